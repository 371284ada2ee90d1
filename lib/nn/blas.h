// Row-major GEMM over OpenBLAS for the nn ops (C = alpha*op(A)*op(B) + beta*C), float and double.
// The single-thread BLAS guard is core/blas_threads.h.
#pragma once
#include <cblas.h>

#include <cstdint>

#include "core/blas_threads.h"

namespace retro::nn {

inline void gemm(bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K, float alpha, const float* A,
                 std::int64_t lda, const float* B, std::int64_t ldb, float beta, float* C, std::int64_t ldc) {
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)M, (int)N,
                (int)K, alpha, A, (int)lda, B, (int)ldb, beta, C, (int)ldc);
}
inline void gemm(bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K, double alpha, const double* A,
                 std::int64_t lda, const double* B, std::int64_t ldb, double beta, double* C, std::int64_t ldc) {
    cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)M, (int)N,
                (int)K, alpha, A, (int)lda, B, (int)ldb, beta, C, (int)ldc);
}

// Row-major y = alpha*op(A)*x + beta*y.
inline void gemv(bool ta, std::int64_t M, std::int64_t N, float alpha, const float* A, std::int64_t lda, const float* x,
                 float beta, float* y) {
    cblas_sgemv(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, (int)M, (int)N, alpha, A, (int)lda, x, 1, beta, y, 1);
}
inline void gemv(bool ta, std::int64_t M, std::int64_t N, double alpha, const double* A, std::int64_t lda,
                 const double* x, double beta, double* y) {
    cblas_dgemv(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, (int)M, (int)N, alpha, A, (int)lda, x, 1, beta, y, 1);
}

using retro::BlasSingleThread;   // core/blas_threads.h

}  // namespace retro::nn
