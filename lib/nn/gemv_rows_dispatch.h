// The row-count dispatch both GEMV kernel files share (nn/gemv_avx512.cpp, nn/gemv_avx2.cpp): their kernels are
// templates on the number of x rows, 1..kGemvMaxRows, so that each row's accumulators stay in registers.
// provides: gemv_rows_dispatch
#pragma once
#include <cstdint>
#include <type_traits>

#include "core/error.h"
#include "nn/gemv_avx512.h"

namespace retro::nn {

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
