// CudaBert: the BERT encoder forward + mean (or CLS) pool of embed/bert_model.h on the GPU — BERT, DistilBERT, ELECTRA,
// RoBERTa and XLM-R (positions from bert_position_ids, on the host); not MPNet (no relative-position bias here) — for `retro-index
// --embedder bert --device cuda` (defined by kernels/bert_cuda.cu; a CPU-only build names it only under
// `if constexpr (kCudaBuilt)`, core/cuda_device.h). Same packing (sequences back to back, no padding), same math
// in fp32: every dense layer is one cublasSgemm over all tokens of the batch (pedantic math: no TF32), attention
// runs per (sequence, head) over that sequence's tokens, LayerNorm/GELU/softmax/bias/residual are small fused
// kernels. Weights are uploaded once; host pointers in and out. The work runs on the caller's stream
// (core/cuda_device.h: CudaStreamOwner) and each call returns when it is done.
// provides: CudaBert, kCudaBertMaxTokens
#pragma once
#include <cstdint>
#include <memory>

#include "core/cuda_device.h"
#include "embed/bert_model.h"

namespace retro {

// The longest text the attention kernel takes: one score row of floats in dynamic shared memory beside its 32-float
// reduction array, within the 48 KB a launch has without opting in. (No BERT-family checkpoint RetroKit reads
// allows more than 8,192 positions; BertEmbedder refuses a longer --max-length on the GPU in one line.)
inline constexpr int kCudaBertMaxTokens = (48 * 1024 - 32 * 4) / 4;

class CudaBert {
public:
    // Uploads the model's weights to device 0 on `stream`. UserError without a device.
    static std::unique_ptr<CudaBert> upload(const BertModel& model, CudaStream stream);
    virtual ~CudaBert() = default;

    // BertModel::forward_mean's contract: `count` sequences ids[offsets[s] .. offsets[s+1]) -> out [count, hidden]
    // (the mean of each sequence's last hidden states), on `stream`. Not thread-safe (reused buffers).
    virtual void forward_mean(const std::int32_t* ids, const std::int64_t* offsets, int count, float* out,
                              CudaStream stream) = 0;
    // The same with each sequence's first token's state in place of the mean (BertModel::forward_cls).
    virtual void forward_cls(const std::int32_t* ids, const std::int64_t* offsets, int count, float* out,
                             CudaStream stream) = 0;
};

}  // namespace retro
