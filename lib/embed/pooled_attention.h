// An encoder's last layer when only some rows' final states are read (sentence-transformers' CLS pooling, CLIP's
// class token and end-of-text token): the attention of those rows alone. Every row's keys and values are still
// needed (the caller projects them as before); the queries, the output projection and the feed-forward are then
// needed for the pooled rows only — 49 of 50 rows of a ViT-B/32 image, all but one row of a chunk.
// provides: pooled_attention
#pragma once
#include <cstdint>

namespace retro {

// ctx[i, :] (row stride H) = per head h: softmax_j(scale · q_i·k_j) · v_j over keys j in [key_first[i],
// key_first[i] + key_count[i]), for the n query rows query_row[i]; q, k, v are the rows of the packed QKV buffer
// (row r at qkv + r·3H: q | k | v, each `heads` heads of H / heads). key_count[i] >= 1. Heads of all rows are
// spread over the threads; one row's head is one nn::attention_head_forward call (a GEMV for a single query).
void pooled_attention(const float* qkv, int H, int heads, float scale, const std::int64_t* query_row,
                      const std::int64_t* key_first, const std::int64_t* key_count, std::int64_t n, float* ctx);

}  // namespace retro
