// Multi-head scaled dot-product attention core, as RETRO-pytorch's Attention.forward after the projections
// (the caller scales q by dim_head^-1/2 and applies rotary before, as RP does).
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

namespace retro::nn {

struct AttentionShape {
    std::int64_t B = 1, Nq = 1, Nk = 1, H = 1, D = 1;
    bool causal = false;
    bool null_kv = false;
    std::int64_t keys() const { return Nk + (null_kv ? 1 : 0); }
};

// key_mask [B, Nk] (1 = attend) or null; null_k/null_v [H*D] when shape.null_kv.
template <typename T>
void attention_forward(T* out, T* probs, const T* q, const T* k, const T* v, const T* null_k, const T* null_v,
                       const std::uint8_t* key_mask, const AttentionShape& s);
template <typename T>
void attention_backward(T* dq, T* dk, T* dv, T* dnull_k, T* dnull_v, const T* dout, const T* probs, const T* q,
                        const T* k, const T* v, const T* null_k, const T* null_v, const std::uint8_t* key_mask,
                        const AttentionShape& s);

}  // namespace retro::nn
