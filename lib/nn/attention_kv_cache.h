// KV-cached self-attention for decoding: nn/attention_layer.h's causal self-attention over the new rows of
// several sequences at once, each sequence's earlier keys/values kept in a KvCache (forward only).
//   rows [row_begin[s], row_begin[s+1]) of x belong to sequence s, at positions cache[s].positions() ...;
//   rot holds one rotary row per new row (its position);
//   q, k, v = the projections of attention_layer_forward (attention_queries/keys_values_forward);
//   k, v appended to cache[s];  o = causal attention over cache[s] (nn/attention.h); y = o to_out^T + b.
// The rows of all sequences share each projection's GEMM; attention runs per (sequence, head). With every
// row of one sequence fed at once from an empty cache this is attention_layer_forward's arithmetic.
#pragma once
#include <cstdint>
#include <vector>

#include "nn/attention_layer.h"
#include "nn/rotary.h"

namespace retro::nn {

template <typename T>
struct KvCache {
    std::vector<T> k, v;   // [positions, heads*dim_head]; keys rotated at their position
    std::int64_t positions(std::int64_t inner) const { return static_cast<std::int64_t>(k.size()) / inner; }
    void clear() {
        k.clear();
        v.clear();
    }
};

// y [rows, dim]; caches: one per sequence (row_begin.size() - 1 of them); s.dim, s.heads, s.dim_head are used.
template <typename T>
void attention_layer_step(T* y, const T* x, const std::vector<std::int64_t>& row_begin, std::vector<KvCache<T>>& caches,
                          const RotaryTable<T>& rot, const AttentionParams<T>& p, const AttentionLayerShape& s);

}  // namespace retro::nn
