// An encoder's last layer when only some rows' final states are read (sentence-transformers' CLS pooling, CLIP's
// class token and end-of-text token): the attention of those rows alone. Every row's keys and values are still
// needed (the caller projects them as before); the queries, the output projection and the feed-forward are then
// needed for the pooled rows only — 49 of 50 rows of a ViT-B/32 image, all but one row of a chunk.
// provides: PooledRows, pooled_first_rows, pooled_attention, pooled_rows_apply
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

namespace retro {

// The pooled rows of a packed batch, as rows of the batch (relative to its first row): query row i reads keys
// [key_first[i], key_first[i] + key_count[i]) (key_count[i] >= 1).
struct PooledRows {
    std::vector<std::int64_t> row, key_first, key_count;
    std::int64_t size() const { return static_cast<std::int64_t>(row.size()); }
    void add(std::int64_t query_row, std::int64_t first_key, std::int64_t keys) {
        row.push_back(query_row);
        key_first.push_back(first_key);
        key_count.push_back(keys);
    }
};

// Each non-empty sequence's first row (CLS pooling), reading its whole sequence; empty sequences have none.
PooledRows pooled_first_rows(const std::int64_t* offsets, int count);

// ctx[i, :] (row stride H) = per head h: softmax_j(scale · q_i·k_j) · v_j over row i's keys, for the rows of
// `rows`; q, k, v are the rows of the packed QKV buffer (row r at qkv + r·3H: q | k | v, each `heads` heads of
// H / heads). Heads of all rows are spread over the threads; one row's head is one nn::attention_head_forward call
// (a GEMV for a single query).
void pooled_attention(const float* qkv, int H, int heads, float scale, const PooledRows& rows, float* ctx);

// The layer's dense part for the pooled rows alone: their rows of x [*, H] gathered into xs [rows.size(), H],
// `dense(xs, rows.size())` (which reads ctx row i with xs row i), and put back.
void pooled_rows_apply(float* x, int H, const PooledRows& rows, float* xs,
                       const std::function<void(float*, std::int64_t)>& dense);

}  // namespace retro
