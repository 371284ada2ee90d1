// CudaBert: the BERT encoder forward + mean pool of lib/embed/bert_model.h on the GPU, for `retro-index
// --embedder bert --device cuda`. Same packing (sequences back to back, no padding), same math in fp32:
// every dense layer is one cublasSgemm over all tokens of the batch (pedantic math: no TF32), attention runs per
// (sequence, head) over that sequence's tokens, LayerNorm/GELU/softmax/bias/residual are small fused kernels.
// Weights are uploaded once; host pointers in and out. UserError when built without CUDA or with no device.
// provides: CudaBert
#pragma once
#include <cstdint>
#include <memory>

#include "embed/bert_model.h"

namespace retro {

class CudaBert {
public:
    explicit CudaBert(const BertModel& model);
    ~CudaBert();
    CudaBert(const CudaBert&) = delete;
    CudaBert& operator=(const CudaBert&) = delete;

    // BertModel::forward_mean's contract: `count` sequences ids[offsets[s] .. offsets[s+1]) -> out [count, hidden]
    // (the mean of each sequence's last hidden states). Not thread-safe (one stream, reused buffers).
    void forward_mean(const std::int32_t* ids, const std::int64_t* offsets, int count, float* out);

    struct State;

private:
    std::unique_ptr<State> s_;
};

}  // namespace retro
