// Softmax cross-entropy with an ignore index (torch F.cross_entropy(..., ignore_index=pad), mean reduction):
//   loss = (1/M) sum_{n: t_n != ignore} (logsumexp(logits[n, :]) - logits[n, t_n]),  M = #non-ignored rows
// Shapes: logits [N, V], targets [N]. M = 0 gives loss 0 (torch gives NaN) and zero gradient.
// backward: dlogits[n, :] = dloss (softmax(logits[n, :]) - onehot(t_n)) / M, 0 on ignored rows (=).
#pragma once
#include <cstdint>
#include <vector>

namespace retro::nn {

// Returns the mean loss; `lse` [N] (log-sum-exp per row) is saved for backward; `*valid` = M.
template <typename T>
T cross_entropy_forward(T* lse, std::int64_t* valid, const T* logits, const std::int32_t* targets, std::int64_t N,
                        std::int64_t V, std::int32_t ignore_index);
template <typename T>
void cross_entropy_backward(T* dlogits, T dloss, const T* logits, const T* lse, const std::int32_t* targets,
                            std::int64_t N, std::int64_t V, std::int32_t ignore_index, std::int64_t valid);

}  // namespace retro::nn
