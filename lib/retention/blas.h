// Row-major GEMM over OpenBLAS for the retention modes (C = alpha*op(A)*op(B) + beta*C), and a guard
// that keeps OpenBLAS single-threaded while our own OpenMP loop runs one GEMM per thread.
#pragma once
#include <cblas.h>

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

// OpenBLAS (pthread build) would start its own threads inside each of our OpenMP threads.
struct BlasSingleThread {
    int previous;
    BlasSingleThread() : previous(openblas_get_num_threads()) { openblas_set_num_threads(1); }
    ~BlasSingleThread() { openblas_set_num_threads(previous); }
    BlasSingleThread(const BlasSingleThread&) = delete;
    BlasSingleThread& operator=(const BlasSingleThread&) = delete;
};

}  // namespace retro::retention
