// Linear layer, torch.nn.Linear layout (weight [O, I]), through OpenBLAS sgemm/dgemm:
//   forward:  y[N, O] = x[N, I] W^T + b            (b may be null: no bias)
//   backward: dx[N, I]  = dy W                       (activations: =; dx may be null to skip)
//             dW[O, I] += dy^T x,  db[O] += sum_n dy (parameters: +=; dW null skips both, for frozen weights)
#pragma once
#include <cstdint>

namespace retro::nn {

template <typename T>
void linear_forward(T* y, const T* x, const T* W, const T* b, std::int64_t N, std::int64_t I, std::int64_t O);
template <typename T>
void linear_backward(T* dx, T* dW, T* db, const T* dy, const T* x, const T* W, std::int64_t N, std::int64_t I,
                     std::int64_t O);

}  // namespace retro::nn
