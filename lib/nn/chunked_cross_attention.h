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
// 0..r-1; query 0 of each group at position 2cs-2, queries 1..cs-1 at position 0 (identity). With
// CcaShape::aligned_queries (config "cca_query_positions": "aligned") query i sits at cs-1+i, as RP's comment
// intended: the token it predicts, continuation position cs+i, is then one position after it.
// Parameters: AttentionParams with null_k / null_v (RP names cross_attn.to_q ..., cross_attn.null_k/null_v).
// backward: dx (=), dE (=), parameter gradients (+=).
// Two entry points share these rules: cca_forward/backward over whole sequences (training), and for KV-cached
// decoding cca_context_forward (chunk u's keys/values, once, kept in a CcaKvCache) + cca_rows_forward (new
// rows at any positions, each reading its chunk u(p) from the cache); both use nn/attention_layer.h's
// projections and nn/attention.h's core.
#pragma once
#include <cstdint>
#include <vector>

#include "nn/attention_layer.h"
#include "nn/rotary.h"

namespace retro::nn {

struct CcaShape {
    std::int64_t B = 1, n = 1, chunk = 1, chunks = 0, neighbours = 1, retrieved = 2, dim = 1, heads = 1,
                 dim_head = 1, rot_dim = 0;
    bool aligned_queries = false;   // query i of a group at rotary position cs-1+i instead of RP's quirk
};

// The attention layer CCA runs: B*chunks groups of cs queries against k*r keys (+ the null key), no causal mask.
AttentionLayerShape cca_attention_shape(const CcaShape& s);

// The query / key position tables for CCA rotary: RP's (the quirk above), or with `aligned` the intended cs-1+i.
std::vector<std::int64_t> cca_query_positions(std::int64_t chunk, bool aligned = false);
std::vector<std::int64_t> cca_key_positions(std::int64_t neighbours, std::int64_t retrieved);

template <typename T>
struct CcaCache {
    RotaryTable<T> q_rot, k_rot;
    std::vector<T> xs, ys;
    AttentionLayerCache<T> attn;
};

// Training: the whole sequences at once, activations kept in the cache for backward.
template <typename T>
void cca_forward(T* y, CcaCache<T>& cache, const T* x, const T* E, const std::uint8_t* key_mask,
                 const AttentionParams<T>& p, const CcaShape& s);
template <typename T>
void cca_backward(T* dx, T* dE, const AttentionParams<T>& grads, const T* dy, CcaCache<T>& cache,
                  const AttentionParams<T>& p, const CcaShape& s);

// Decoding. Keys/values of the encoded neighbours of one sequence, chunk after chunk: [chunks, k*r, heads*dim_head]
// (keys rotated at 0..r-1 per neighbour), and their key mask [chunks, k*r].
template <typename T>
struct CcaKvCache {
    std::vector<T> k, v;
    std::vector<std::uint8_t> mask;
    std::int64_t chunks(std::int64_t keys_per_chunk) const {
        return static_cast<std::int64_t>(mask.size()) / keys_per_chunk;
    }
    void clear() {
        k.clear();
        v.clear();
        mask.clear();
    }
};

// k, v [chunks * k*r, heads*dim_head] of E [chunks, k*r, dim]: the keys/values cca_forward computes for a chunk.
template <typename T>
void cca_context_forward(T* k, T* v, const T* E, std::int64_t chunks, const AttentionParams<T>& p, const CcaShape& s);

// y [rows, dim] for rows x [rows, dim] (normalised) of sequences seq[i] at positions pos[i]: 0 when
// pos < cs - 1, else the CCA output of that position, reading chunk u = floor((pos + 1)/cs) - 1 of
// caches[seq[i]] (which must hold it) with the query rotated as in cca_forward. Uses s.chunk, neighbours,
// retrieved, dim, heads, dim_head, rot_dim.
template <typename T>
void cca_rows_forward(T* y, const T* x, std::int64_t rows, const std::int64_t* seq, const std::int64_t* pos,
                      const std::vector<CcaKvCache<T>>& caches, const AttentionParams<T>& p, const CcaShape& s);

}  // namespace retro::nn
