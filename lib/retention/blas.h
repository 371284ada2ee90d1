// Row-major GEMM over OpenBLAS for the retention modes (C = alpha*op(A)*op(B) + beta*C).
// The single-thread BLAS guard is core/blas_threads.h.
#pragma once
#include <cblas.h>

#include <cstdint>

#include "core/blas_threads.h"

namespace retro::retention {

inline void gemm(bool ta, bool tb, int M, int N, int K, float alpha, const float* A, int lda,
                 const float* B, int ldb, float beta, float* C, int ldc) {
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K,
                alpha, A, lda, B, ldb, beta, C, ldc);
}
inline void gemm(bool ta, bool tb, int M, int N, int K, double alpha, const double* A, int lda,
                 const double* B, int ldb, double beta, double* C, int ldc) {
    cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K,
                alpha, A, lda, B, ldb, beta, C, ldc);
}

using retro::BlasSingleThread;

// out (n×D, dense) = rows of x (stride ld) each multiplied by w[i]: the decay-scaled operand of a GEMM.
template <typename F>
void scaled_rows(const F* x, std::int64_t ld, std::int64_t n, std::int64_t D, const F* w, F* out) {
    for (std::int64_t i = 0; i < n; ++i)
        for (std::int64_t j = 0; j < D; ++j) out[i * D + j] = w[i] * x[i * ld + j];
}   // core/blas_threads.h

}  // namespace retro::retention
