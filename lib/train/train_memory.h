// An upper estimate of retro-train's memory, checked before the model is built (issue 16 item 6):
// parameters, gradients and AdamW's two moments (4 floats per parameter), plus the activations a
// micro-batch keeps for the backward pass: per decoder layer the residual stream, norms, q/k/v,
// attention output and the 4x FFN, and the attention scores and probabilities (B·H·T²); per CCA
// layer its projections and scores against the k·r retrieved tokens of each chunk; per encoder
// layer the same over the B·M·k neighbour sequences of r tokens; and the logits with their
// gradient (B·T·vocab). Measured against peak RSS (demo config, 3 steps, 2026-11-25): 859 MiB
// estimated vs 895 MiB at batch 8 (the RSS also holds the mapped database and the libraries),
// 3.2 GiB vs 2.6 GiB at batch 32. It is there to refuse sizes that cannot fit, not to plan to the MiB.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "model/config.h"

namespace retro {
namespace nn {
class NnBackend;   // nn/nn_backend.h
}

double train_memory_bytes(const RetroConfig& c, std::int64_t batch, std::int64_t seq_len, bool retrieval);

// Exact bytes of a backend (GPU) run, known before its first step (model/backend_model.h): parameters and
// gradients (2 x 4 bytes per parameter), the summed gradients where a rank runs more than one micro-batch a step
// (rank_micro_batches = --grad-accum / ranks > 1: 4 more), AdamW's moments and
// decay flags (9 bytes per trainable parameter), and the activation arena of one micro-batch of `batch` x
// `seq_len` tokens with k neighbours of r tokens per chunk.
// Plus the backend's scratch (an upper bound: model/backend_model.h's backend_model_scratch_bound).
struct DeviceTrainBytes {
    std::size_t weights = 0, optimizer = 0, arena = 0, scratch = 0;
    std::size_t total() const { return weights + optimizer + arena + scratch; }
};
DeviceTrainBytes train_device_bytes(const RetroConfig& c, std::int64_t batch, std::int64_t seq_len, std::int64_t k,
                                    std::int64_t r, bool retrieval, std::int64_t rank_micro_batches,
                                    std::int64_t trainable_parameters, bool bf16_gemm = false,
                                    const nn::NnBackend* be = nullptr,   // be, head_trainable: backend_model_plan's
                                    bool head_trainable = true);
// UserError naming `option` when `need` exceeds `free_bytes` of device memory ("needs 12.3 GiB on the GPU (arena
// ..., weights ..., optimizer ...), the GPU has 8.0 GiB free").
void device_memory_require(const std::string& option, const DeviceTrainBytes& need, std::size_t free_bytes,
                           const std::string& what, const std::string& fix);

}  // namespace retro
