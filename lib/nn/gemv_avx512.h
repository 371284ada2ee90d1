// The decode step's matrix-vector products on AVX-512: y[n, o] (+)= Σ_k W[o, k] · x[n, k] for the few rows n < N
// (N ≤ kGemvMaxRows: one sequence, or a handful decoded together) and o < O, W row-major with leading dimension
// ldw. KV-cached decoding runs every linear layer on those few rows, so it is bound by reading W
// (docs/performance.md "Session 34"): OpenBLAS's sgemv read the 512-wide rows at half the rate a plain AVX-512 read
// reaches, and once per x row. Here W is read once for all N rows, one weight row after another as one sequential
// stream (which the hardware prefetcher follows at the memory rate; interleaved rows are several streams it does
// not), each weight row's 16-lane slices FMA'd into two accumulators per x row; for more than 4 x rows (or 4 rows
// of 1024+ columns) weight rows go in pairs, each x slice loaded once for both (the same sums). Attention over a KV cache reads one
// head's short slice of every cache row (W with ldw > I): those rows are prefetched in software 16 rows ahead, as a
// stride of kilobytes touches each page too few times for the hardware's stride prefetcher.
// Summation order, the same for every N: lane j of accumulator a sums columns 32i + 16a + j in k order (a 16-column
// remainder into accumulator 0, the masked tail into accumulator 1), then a0 + a1 and the 16 lanes by a tree; so a
// row's result does not depend on N, and differs from cblas_sgemv's by float rounding only. CPUs with AVX2 and FMA but
// no AVX-512 run the same products in 8-lane form (nn/gemv_avx2.cpp); GemvKernels below is the set a process uses.
// provides: kGemvMaxRows, the AVX-512 and AVX2 kernels, GemvKernels, gemv_best_kernels, gemv_kernels,
//           gemv_attention_kernels
#pragma once
#include <cstdint>

namespace retro::nn {

inline constexpr std::int64_t kGemvMaxRows = 8;

// Whether this CPU (and build) runs the kernels below (AVX-512 F, BW and VL).
bool gemv_avx512_available();

// y[n * ldy + o] = (accumulate ? y[n * ldy + o] : 0) + Σ_k W[o * ldw + k] · x[n * ldx + k], n < N ≤ kGemvMaxRows,
// o < O, k < I. Single-threaded: callers split O.
void gemv_rows_avx512(const float* W, std::int64_t O, std::int64_t I, std::int64_t ldw, const float* x,
                      std::int64_t ldx, std::int64_t N, float* y, std::int64_t ldy, bool accumulate);

// The same with bf16 weights (nn/decode_weights_bf16.h): each is widened to fp32 exactly (its 16 bits above 16
// zero bits) and the sums run as above in fp32; W is half the bytes.
void gemv_rows_bf16_avx512(const std::uint16_t* W, std::int64_t O, std::int64_t I, std::int64_t ldw, const float* x,
                           std::int64_t ldx, std::int64_t N, float* y, std::int64_t ldy, bool accumulate);

// The other orientation, for attention's p V over a KV cache: y[n * ldy + o] = Σ_i x[n * ldx + i] · W[i * ldw + o],
// n < N ≤ kGemvMaxRows, o < O, i < I (W [I, O] row-major: the rows of W weighted by x and summed). W's rows are
// read in i order, a block of W's columns at a time, once for all N; lane o's sum runs in i order.
void gemv_t_rows_avx512(const float* W, std::int64_t I, std::int64_t O, std::int64_t ldw, const float* x,
                        std::int64_t ldx, std::int64_t N, float* y, std::int64_t ldy);

// The same three for CPUs with AVX2 and FMA but no AVX-512 (nn/gemv_avx2.cpp: 8 lanes, its own fixed order, a row's
// result again independent of N).
bool gemv_avx2_available();
void gemv_rows_avx2(const float* W, std::int64_t O, std::int64_t I, std::int64_t ldw, const float* x, std::int64_t ldx,
                    std::int64_t N, float* y, std::int64_t ldy, bool accumulate);
void gemv_rows_bf16_avx2(const std::uint16_t* W, std::int64_t O, std::int64_t I, std::int64_t ldw, const float* x,
                         std::int64_t ldx, std::int64_t N, float* y, std::int64_t ldy, bool accumulate);
void gemv_t_rows_avx2(const float* W, std::int64_t I, std::int64_t O, std::int64_t ldw, const float* x, std::int64_t ldx,
                      std::int64_t N, float* y, std::int64_t ldy);

// One CPU's set of the kernels above.
struct GemvKernels {
    const char* isa;   // "avx512" or "avx2"
    void (*rows)(const float*, std::int64_t, std::int64_t, std::int64_t, const float*, std::int64_t, std::int64_t,
                 float*, std::int64_t, bool);
    void (*rows_bf16)(const std::uint16_t*, std::int64_t, std::int64_t, std::int64_t, const float*, std::int64_t,
                      std::int64_t, float*, std::int64_t, bool);
    void (*t_rows)(const float*, std::int64_t, std::int64_t, std::int64_t, const float*, std::int64_t, std::int64_t,
                   float*, std::int64_t);
};
// The set this CPU runs: AVX-512's, else AVX2's (also on an AVX-512 CPU with RETRO_GEMV=avx2, for side-by-side
// timing and the tests), else none (nullptr: a CPU without AVX2 and FMA). bf16 decode weights need one.
const GemvKernels* gemv_best_kernels();
// The set the model's few-row linear layers use: gemv_best_kernels(), none with RETRO_GEMV=blas (cblas_sgemv).
const GemvKernels* gemv_kernels();
// The set attention over a KV cache uses: gemv_kernels(), none with RETRO_GEMV=linear either (cblas_sgemm).
const GemvKernels* gemv_attention_kernels();

}  // namespace retro::nn
