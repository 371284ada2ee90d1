// Linear layer, torch.nn.Linear layout (weight [O, I]), through OpenBLAS sgemm/dgemm:
//   forward:  y[N, O] = x[N, I] W^T + b            (b may be null: no bias)
//             (up to 8 rows in fp32 through the few-row GEMV of nn/gemv_avx512.h, or cblas_sgemv per row)
// The sums do not depend on the thread count (LinearSums below).
//   backward: dx[N, I]  = dy W                       (activations: =; dx may be null to skip)
//             dW[O, I] += dy^T x,  db[O] += sum_n dy (parameters: +=; dW null skips both, for frozen weights)
#pragma once
#include <cstdint>

namespace retro::nn {

template <typename T>
void linear_forward(T* y, const T* x, const T* W, const T* b, std::int64_t N, std::int64_t I, std::int64_t O);
// How linear_forward adds up a row's sums. Either way the bits do not depend on the thread count: a GEMM is cut
// into tiles the shapes alone fix (256 rows x 128 outputs; the backward's dx and dW likewise), which the threads take
// whole — OpenBLAS's sgemm sums a row by its tile, so splitting the rows among the threads made the bits depend on
// their number (tests/test_train_threads.cpp, tests/test_generate_batch_invariance.cpp). The modes:
//   thread_invariant  the default: a row's bits depend on the call's row count and the row's place among them.
//   row_invariant     (fp32) each row the bits it gets alone, whatever the rows beside it: every row through the
//                     few-row kernel (nn/gemv_avx512.h) in groups of 8, a block of W's rows at a time for every
//                     group so the block is read from cache (without AVX-512 or AVX2+FMA, or with RETRO_GEMV=blas: cblas_sgemv
//                     a row at a time over output tiles of 128, in groups of 4); ~70 % of sgemm's rate on many rows, so for the CPU
//                     decoder's decode rows (one a sequence: generate/cached_decoder.h) only.
enum class LinearSums { thread_invariant, row_invariant };

// Sets the mode for the scope's lifetime and restores the previous one. Process-wide, like nn::DecodeWeightsScope
// (the products run on OpenMP's threads): made and destroyed outside parallel regions.
class LinearSumsScope {
public:
    explicit LinearSumsScope(LinearSums mode);
    ~LinearSumsScope();
    LinearSumsScope(const LinearSumsScope&) = delete;
    LinearSumsScope& operator=(const LinearSumsScope&) = delete;

private:
    LinearSums previous_;
};

template <typename T>
void linear_backward(T* dx, T* dW, T* db, const T* dy, const T* x, const T* W, std::int64_t N, std::int64_t I,
                     std::int64_t O);

}  // namespace retro::nn
