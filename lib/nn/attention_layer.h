// RETRO-pytorch's Attention module: projections, scale, partial rotary, attention core, output projection.
// Used for decoder causal self-attention, encoder bidirectional self-attention (key pad mask), encoder
// cross-attention to the decoder chunk, and (with a learned null key/value) inside chunked cross-attention.
// Shapes: x [B, Nq, dim], context [B, Nk, context_dim] (null = self-attention on x), key_mask [B, Nk].
//   q = (x Wq^T) * dim_head^-1/2, rotary(q_pos);  k = rotary(c Wk^T, k_pos);  v = c Wv^T     (no biases)
//   o = attention(q, k, v; mask, causal, null k/v);   y = o Wo^T + bo                     (y [B, Nq, dim])
// Parameter names follow RP: to_q.weight [HD, dim], to_k.weight / to_v.weight [HD, context_dim],
// to_out.weight [dim, HD], to_out.bias [dim], null_k / null_v [HD] (HD = heads * dim_head).
// backward: dx (=) gets the q path, plus the k/v path for self-attention; dcontext (=) gets the k/v path
// for cross-attention; parameter gradients +=.
// The projections are public for KV-cached decoding (nn/attention_kv_cache.h, nn/chunked_cross_attention.h),
// which keeps keys/values between calls and runs the same arithmetic on new rows only.
#pragma once
#include <cstdint>
#include <vector>

#include "nn/attention.h"
#include "nn/rotary.h"

namespace retro::nn {

template <typename T>
struct AttentionParams {
    T* to_q = nullptr;
    T* to_k = nullptr;
    T* to_v = nullptr;
    T* to_out_w = nullptr;
    T* to_out_b = nullptr;
    T* null_k = nullptr;   // only with null_kv
    T* null_v = nullptr;
};

struct AttentionLayerShape {
    std::int64_t B = 1, Nq = 1, Nk = 1, dim = 1, context_dim = 1, heads = 1, dim_head = 1;
    bool causal = false, null_kv = false, self = true;
    std::int64_t inner() const { return heads * dim_head; }
    AttentionShape core() const { return {B, Nq, Nk, heads, dim_head, causal, null_kv}; }
};

template <typename T>
struct AttentionLayerCache {
    const T* x = nullptr;
    const T* context = nullptr;
    const std::uint8_t* key_mask = nullptr;
    const RotaryTable<T>* q_rot = nullptr;
    const RotaryTable<T>* k_rot = nullptr;
    std::vector<T> q, k, v, o, probs;
};

// q [B*N, HD] = rotary((x to_q^T) * dim_head^-1/2) with one table row per position n (rot may be null).
template <typename T>
void attention_queries_forward(T* q, const T* x, const T* to_q, const RotaryTable<T>* rot, std::int64_t B,
                               std::int64_t N, std::int64_t dim, std::int64_t heads, std::int64_t dim_head);
// k = rotary(c to_k^T), v = c to_v^T, both [B*N, HD]; c [B*N, dim] (rot may be null).
template <typename T>
void attention_keys_values_forward(T* k, T* v, const T* c, const T* to_k, const T* to_v, const RotaryTable<T>* rot,
                                   std::int64_t B, std::int64_t N, std::int64_t dim, std::int64_t heads,
                                   std::int64_t dim_head);

// q_rot / k_rot may be null (no rotary); they must outlive the backward call, as must x, context, key_mask.
template <typename T>
void attention_layer_forward(T* y, AttentionLayerCache<T>& cache, const T* x, const T* context,
                             const std::uint8_t* key_mask, const RotaryTable<T>* q_rot, const RotaryTable<T>* k_rot,
                             const AttentionParams<T>& p, const AttentionLayerShape& s);
template <typename T>
void attention_layer_backward(T* dx, T* dcontext, const AttentionParams<T>& grads, const T* dy,
                              AttentionLayerCache<T>& cache, const AttentionParams<T>& p, const AttentionLayerShape& s);

}  // namespace retro::nn
