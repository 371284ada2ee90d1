// Linear layer, torch.nn.Linear layout (weight [O, I]), through OpenBLAS sgemm/dgemm:
//   forward:  y[N, O] = x[N, I] W^T + b            (b may be null: no bias)
//             (up to 8 rows in fp32 through the few-row GEMV of nn/gemv_avx512.h, or cblas_sgemv per row)
//   backward: dx[N, I]  = dy W                       (activations: =; dx may be null to skip)
//             dW[O, I] += dy^T x,  db[O] += sum_n dy (parameters: +=; dW null skips both, for frozen weights)
#pragma once
#include <cstdint>

namespace retro::nn {

template <typename T>
void linear_forward(T* y, const T* x, const T* W, const T* b, std::int64_t N, std::int64_t I, std::int64_t O);
// While a RowInvariantLinearScope(true) lives, linear_forward in fp32 gives each row the bits it gets alone, whatever
// the row count N: every row goes through the few-row kernel (in groups of at most 8, a block of W's rows at a time
// for every group so the block is read from cache), never through sgemm, whose sums for a row depend on N and on the
// row's place in the block (tests/test_generate_batch_invariance.cpp). For the decode rows of a CPU decoding step
// (one a sequence: generate/cached_decoder.h), so that a sequence's text does not depend on the others decoded with
// it. Process-wide, like nn::DecodeWeightsScope (the GEMV runs on OpenMP's threads); made and destroyed outside
// parallel regions; restores the previous setting.
class RowInvariantLinearScope {
public:
    explicit RowInvariantLinearScope(bool on);
    ~RowInvariantLinearScope();
    RowInvariantLinearScope(const RowInvariantLinearScope&) = delete;
    RowInvariantLinearScope& operator=(const RowInvariantLinearScope&) = delete;

private:
    bool previous_;
};

template <typename T>
void linear_backward(T* dx, T* dW, T* db, const T* dy, const T* x, const T* W, std::int64_t N, std::int64_t I,
                     std::int64_t O);

}  // namespace retro::nn
