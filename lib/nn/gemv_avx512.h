// The decode step's matrix-vector product on AVX-512F: y[o] (+)= Σ_k W[o, k] · x[k] for o < O, W row-major with
// leading dimension ldw. KV-cached decoding runs every linear layer on one row, so it is bound by reading W once
// (docs/performance.md "Session 34"): OpenBLAS's sgemv read the 512-wide rows at half the rate a plain AVX-512
// read reaches. Here 8 rows are read together (8 streams, x loaded once per 16 columns, one FMA per element) with
// the next 8 rows prefetched as the current ones are summed; a row's 16 lane sums are added at the end.
// Summation order: per row, lane j sums columns j, j+16, ... in k order, then the 16 lanes by a tree; the result
// differs from cblas_sgemv's by float rounding only.
#pragma once
#include <cstdint>

namespace retro::nn {

// Whether this CPU (and build) runs gemv_rows_avx512.
bool gemv_avx512_available();

// y[o] = (accumulate ? y[o] : 0) + Σ_k W[o * ldw + k] · x[k], o < O, k < I. Single-threaded: callers split O.
void gemv_rows_avx512(const float* W, std::int64_t O, std::int64_t I, std::int64_t ldw, const float* x, float* y,
                      bool accumulate);

}  // namespace retro::nn
