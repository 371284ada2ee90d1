// Multi-head scaled dot-product attention core, as RETRO-pytorch's Attention.forward after the projections
// (the caller scales q by dim_head^-1/2 and applies rotary before, as RP does). The one CPU attention core of
// the model: attention_head_forward does one (item, head); attention_forward runs it over a uniform batch
// (training, probabilities kept for backward), attention_segments_forward over ragged segments (KV-cached
// decoding: each sequence's new rows against its cached keys, CCA rows against their chunk's neighbours).
// Shapes: q [B, Nq, H*D], k and v [B, Nk, H*D] (heads interleaved, torch 'b n (h d)'), out [B, Nq, H*D],
// probs [B, H, Nq, Nk'] saved for backward, Nk' = Nk + 1 with a null key/value (column 0), else Nk.
//   s[i, j]  = q_i . k_j   (j = 0 is the learned null key when present: never masked, not rotated)
//   masked   : key_mask[b, j] == 0, or causal with j > i + Nk - Nq (bottom-right aligned, RP's triu)
//   s[i, j]  = -finfo(T).max where masked (not -inf: a fully masked row becomes a uniform average over all keys)
//   p = softmax_j(s);  out_i = sum_j p_ij v_j
// backward: ds = p * (dp - sum_j p dp), ds = 0 where masked (torch masked_fill passes no gradient there),
//   dq = ds k, dk = ds^T q, dv = p^T dout (activations: =); dnull_k += ds[:, 0]^T q, dnull_v += p[:, 0]^T dout
//   (parameters: +=).
#pragma once
#include <cstdint>
#include <vector>

namespace retro::nn {

struct AttentionShape {
    std::int64_t B = 1, Nq = 1, Nk = 1, H = 1, D = 1;
    bool causal = false;
    bool null_kv = false;
    std::int64_t keys() const { return Nk + (null_kv ? 1 : 0); }
};

// One (item, head): query rows Q (row stride ldq), keys/values K, V (row stride ldk), output rows O (stride
// ldo); P [Nq, Nk'] receives the probabilities. null_k/null_v [D] or null (no null column); key_mask [Nk] or
// null; causal is bottom-right aligned (query i sees keys j <= i + Nk - Nq).
template <typename T>
void attention_head_forward(T* O, std::int64_t ldo, T* P, const T* Q, std::int64_t ldq, const T* K, const T* V,
                            std::int64_t ldk, std::int64_t Nq, std::int64_t Nk, std::int64_t D, const T* null_k,
                            const T* null_v, const std::uint8_t* key_mask, bool causal);

// key_mask [B, Nk] (1 = attend) or null; null_k/null_v [H*D] when shape.null_kv.
template <typename T>
void attention_forward(T* out, T* probs, const T* q, const T* k, const T* v, const T* null_k, const T* null_v,
                       const std::uint8_t* key_mask, const AttentionShape& s);
template <typename T>
void attention_backward(T* dq, T* dk, T* dv, T* dnull_k, T* dnull_v, const T* dout, const T* probs, const T* q,
                        const T* k, const T* v, const T* null_k, const T* null_v, const std::uint8_t* key_mask,
                        const AttentionShape& s);

// Ragged batch, forward only: query rows [first, first + rows) of q [*, H*D] attend the segment's own keys
// k, v [keys, H*D] (row stride H*D) under its key_mask [keys] (or none); out rows of each segment are
// written, other rows are left alone. null_k/null_v [H*D] or null, shared by every segment.
template <typename T>
struct AttentionSegment {
    std::int64_t first = 0, rows = 0, keys = 0;
    const T* k = nullptr;
    const T* v = nullptr;
    const std::uint8_t* key_mask = nullptr;
};
template <typename T>
void attention_segments_forward(T* out, const T* q, const std::vector<AttentionSegment<T>>& segments, std::int64_t H,
                                std::int64_t D, bool causal, const T* null_k, const T* null_v);

}  // namespace retro::nn
