// CudaBert: the BERT encoder forward + mean pool of embed/bert_model.h on the GPU, for `retro-index
// --embedder bert --device cuda` (defined by kernels/bert_cuda.cu; a CPU-only build names it only under
// `if constexpr (kCudaBuilt)`, core/cuda_device.h). Same packing (sequences back to back, no padding), same math
// in fp32: every dense layer is one cublasSgemm over all tokens of the batch (pedantic math: no TF32), attention
// runs per (sequence, head) over that sequence's tokens, LayerNorm/GELU/softmax/bias/residual are small fused
// kernels. Weights are uploaded once; host pointers in and out.
// provides: CudaBert
#pragma once
#include <cstdint>
#include <memory>

#include "embed/bert_model.h"

namespace retro {

class CudaBert {
public:
    // Uploads the model's weights to device 0. UserError without a device.
    static std::unique_ptr<CudaBert> upload(const BertModel& model);
    virtual ~CudaBert() = default;

    // BertModel::forward_mean's contract: `count` sequences ids[offsets[s] .. offsets[s+1]) -> out [count, hidden]
    // (the mean of each sequence's last hidden states). Not thread-safe (one stream, reused buffers).
    virtual void forward_mean(const std::int32_t* ids, const std::int64_t* offsets, int count, float* out) = 0;
};

}  // namespace retro
