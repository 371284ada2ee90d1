// The batching every text encoder embedder shares (bert, t5): sequences of token ids are sorted
// longest first, packed back to back `batch` at a time (no padding: offsets mark where each
// starts), pooled by the model's forward into [count, dim] rows, and each row L2-normalised into
// its original position (sentence-transformers' Normalize: x / max(||x||, 1e-12)). An empty
// sequence gets a zero row. Also the mean pooling both encoders use.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

namespace retro {

// forward(ids, offsets, count, pooled): `count` sequences ids[offsets[s] .. offsets[s+1]) ->
// pooled [count, dim] (before normalisation).
using PackedForward = std::function<void(const std::int32_t* ids, const std::int64_t* offsets, int count, float* pooled)>;

void embed_packed_batches(const std::vector<std::vector<int>>& seqs, int batch, int dim, const PackedForward& forward,
                          float* out);

// out[dim] = the mean of rows[len, dim] (sentence-transformers' mean pooling: sum / max(len, 1e-9)).
void mean_pool_rows(const float* rows, std::int64_t len, int dim, float* out);

// out[dim] = the element-wise max of rows[len, dim] (sentence-transformers' max pooling over the real tokens); zeros
// for len 0.
void max_pool_rows(const float* rows, std::int64_t len, int dim, float* out);

// y[0..n) = x / max(||x||_2, 1e-12) (x and y may be the same).
void l2_normalise(const float* x, int n, float* y);

}  // namespace retro
