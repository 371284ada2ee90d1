// Inner products of float vectors for the graph and list searches (hnsw_search.h, the fast HNSW
// build storage): one query against one row, or against four rows at once (four independent sums
// share the query's loads). AVX-512F where the CPU has it, a portable loop elsewhere; picked once.
// Summation order: 16 lanes of partial sums (four interleaved registers for one row), then a
// tree reduction, so results can differ from a sequential sum in the last bits.
#pragma once
#include <cstdint>

namespace retro {

float dot_f32(const float* a, const float* b, int d);
// out[r] = q . x_r for the four rows x0..x3
void dot4_f32(const float* q, const float* x0, const float* x1, const float* x2, const float* x3, int d, float* out);

// The same against rows stored as IEEE half floats (fp16 bits), converted in registers.
float dot_f16(const float* q, const std::uint16_t* x, int d);
void dot4_f16(const float* q, const std::uint16_t* x0, const std::uint16_t* x1, const std::uint16_t* x2,
              const std::uint16_t* x3, int d, float* out);
// dst[i] = fp16 bits of src[i] (round to nearest even), n values.
void to_f16(const float* src, std::int64_t n, std::uint16_t* dst);

// Hints the d floats at x into the cache (every 64-byte line).
inline void prefetch_row(const float* x, int d) {
    const char* p = reinterpret_cast<const char*>(x);
    for (int off = 0; off < d * 4; off += 64) __builtin_prefetch(p + off, 0, 3);
}

}  // namespace retro
