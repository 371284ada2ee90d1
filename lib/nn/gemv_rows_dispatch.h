// What both GEMV kernel files share (nn/gemv_avx512.cpp, nn/gemv_avx2.cpp): the row-count dispatch (their kernels
// are templates on the number of x rows, 1..kGemvMaxRows, so that each row's accumulators stay in registers) and the
// software prefetch of a KV cache's strided rows.
// provides: gemv_rows_dispatch, kPrefetchRows, prefetch_lines
#pragma once
#include <cstdint>
#include <type_traits>

#include "core/error.h"
#include "nn/gemv_avx512.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

namespace retro::nn {

#if defined(__x86_64__) && defined(__GNUC__)
// Rows ahead that the strided kernels prefetch: short rows at a stride of kilobytes (one head's slice of a KV
// cache row) touch a page only a few times, too few for the hardware's stride prefetcher.
inline constexpr std::int64_t kPrefetchRows = 16;

// Every cache line of [p, p + bytes) into L1 (p need not be line-aligned: a KV cache is a std::vector). Baseline x86-64
// (SSE's prefetch): it inlines into either file's target functions.
inline void prefetch_lines(const void* p, std::int64_t bytes) {
    const auto first = reinterpret_cast<std::uintptr_t>(p) & ~std::uintptr_t(63);
    const auto end = reinterpret_cast<std::uintptr_t>(p) + static_cast<std::uintptr_t>(bytes);
    for (std::uintptr_t a = first; a < end; a += 64) _mm_prefetch(reinterpret_cast<const char*>(a), _MM_HINT_T0);
}
#endif

// f(std::integral_constant<int, N>{}) for the runtime N (nothing for 0; more than kGemvMaxRows is a bug).
template <typename F>
void gemv_rows_dispatch(std::int64_t N, F&& f) {
    switch (N) {
        case 0: return;
        case 1: return f(std::integral_constant<int, 1>{});
        case 2: return f(std::integral_constant<int, 2>{});
        case 3: return f(std::integral_constant<int, 3>{});
        case 4: return f(std::integral_constant<int, 4>{});
        case 5: return f(std::integral_constant<int, 5>{});
        case 6: return f(std::integral_constant<int, 6>{});
        case 7: return f(std::integral_constant<int, 7>{});
        case 8: return f(std::integral_constant<int, 8>{});
        default: RETRO_CHECK(false, "gemv of ", N, " rows (at most ", kGemvMaxRows, ")");
    }
}

}  // namespace retro::nn
