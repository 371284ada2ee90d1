// The decode step's matrix-vector product on AVX-512F: y[o] (+)= Σ_k W[o, k] · x[k] for o < O, W row-major with
// leading dimension ldw. KV-cached decoding runs every linear layer on one row, so it is bound by reading W once
// (docs/performance.md "Session 34"): OpenBLAS's sgemv read the 512-wide rows at half the rate a plain AVX-512
// read reaches. Here the rows are read one after another as one sequential stream, two accumulators per row.
// Summation order: per row, lane j of accumulator a sums columns 32i + 16a + j in k order (the masked tail into
// accumulator 1), then a0 + a1 and the 16 lanes by a tree; the result differs from cblas_sgemv's by float
// rounding only.
#pragma once
#include <cstdint>

namespace retro::nn {

// Whether this CPU (and build) runs gemv_rows_avx512 and gemv_rows_bf16_avx512 (AVX-512F, BW and VL).
bool gemv_avx512_available();

// y[o] = (accumulate ? y[o] : 0) + Σ_k W[o * ldw + k] · x[k], o < O, k < I. Single-threaded: callers split O.
void gemv_rows_avx512(const float* W, std::int64_t O, std::int64_t I, std::int64_t ldw, const float* x, float* y,
                      bool accumulate);

// The same with bf16 weights (nn/decode_weights_bf16.h): each is widened to fp32 exactly (its 16 bits above 16
// zero bits) and the sum runs as above in fp32; W is half the bytes.
void gemv_rows_bf16_avx512(const std::uint16_t* W, std::int64_t O, std::int64_t I, std::int64_t ldw, const float* x,
                           float* y, bool accumulate);

}  // namespace retro::nn
