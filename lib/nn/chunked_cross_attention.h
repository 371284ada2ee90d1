// Chunked cross-attention (CCA), RETRO-pytorch 0.3.9's ChunkedCrossAttention (RETRO.md B.6), chunk grid of
// ARCHITECTURE.md Decision 2. Shapes: x [B, n, dim] (already normalised), E [B, l, k, r, dim] (encoded
// neighbours, viewed as [B*l, k*r, dim]), key_mask [B, l, k*r] (retrieved token != pad), y [B, n, dim].
//   l = floor(n / cs) must equal the number of retrieved chunks; n < cs gives y = 0.
//   shift:  xs[b, u, t] = x[b, u*cs + t + cs - 1]  (0 past the end), groups u = 0..l-1 of cs queries
//   attend: ys[b, u] = Attention(xs[b, u], E[b, u]; key_mask, null k/v, rotary)   (no causal mask in a group)
//   back:   y[b, p] = ys[b, u, t] with p = u*cs + t + cs - 1 < n;  y[b, p] = 0 for p < cs - 1
//   so position p reads chunk u(p) = floor((p + 1)/cs) - 1: the last token of chunk u and the first cs-1
//   tokens of chunk u+1 see chunk u's neighbours.
// Rotary (RP quirk, RETRO.md B.6.6, copied for bit-compatibility): keys of each neighbour at positions
// 0..r-1; query 0 of each group at position 2cs-2, queries 1..cs-1 at position 0 (identity).
// Parameters: AttentionParams with null_k / null_v (RP names cross_attn.to_q ..., cross_attn.null_k/null_v).
// backward: dx (=), dE (=), parameter gradients (+=).
#pragma once
#include <cstdint>
#include <vector>

#include "nn/attention_layer.h"
#include "nn/rotary.h"

namespace retro::nn {

struct CcaShape {
    std::int64_t B = 1, n = 1, chunk = 1, chunks = 0, neighbours = 1, retrieved = 2, dim = 1, heads = 1,
                 dim_head = 1, rot_dim = 0;
};

// RP's query / key position tables for CCA rotary.
std::vector<std::int64_t> cca_query_positions(std::int64_t chunk);
std::vector<std::int64_t> cca_key_positions(std::int64_t neighbours, std::int64_t retrieved);

template <typename T>
struct CcaCache {
    RotaryTable<T> q_rot, k_rot;
    std::vector<T> xs, ys;
    AttentionLayerCache<T> attn;
};

template <typename T>
void cca_forward(T* y, CcaCache<T>& cache, const T* x, const T* E, const std::uint8_t* key_mask,
                 const AttentionParams<T>& p, const CcaShape& s);
template <typename T>
void cca_backward(T* dx, T* dE, const AttentionParams<T>& grads, const T* dy, CcaCache<T>& cache,
                  const AttentionParams<T>& p, const CcaShape& s);

}  // namespace retro::nn
