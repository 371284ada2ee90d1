// Implementation of packed_batches.h.
#include "embed/packed_batches.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace retro {

void mean_pool_rows(const float* rows, std::int64_t len, int dim, float* out) {
    std::fill(out, out + dim, 0.0f);
    for (std::int64_t r = 0; r < len; ++r)
        for (int j = 0; j < dim; ++j) out[j] += rows[r * dim + j];
    const float inv = 1.0f / std::max<float>(static_cast<float>(len), 1e-9f);
    for (int j = 0; j < dim; ++j) out[j] *= inv;
}

void max_pool_rows(const float* rows, std::int64_t len, int dim, float* out) {
    if (len <= 0) {
        std::fill(out, out + dim, 0.0f);
        return;
    }
    std::copy_n(rows, dim, out);
    for (std::int64_t r = 1; r < len; ++r)
        for (int j = 0; j < dim; ++j) out[j] = std::max(out[j], rows[r * dim + j]);
}

void l2_normalise(const float* x, int n, float* y) {
    double ss = 0;
    for (int j = 0; j < n; ++j) ss += static_cast<double>(x[j]) * x[j];
    float inv = static_cast<float>(1.0 / std::max(std::sqrt(ss), 1e-12));
    for (int j = 0; j < n; ++j) y[j] = x[j] * inv;
}

void embed_packed_batches(const std::vector<std::vector<int>>& seqs, int batch, int dim, const PackedForward& forward,
                          float* out) {
    const std::int64_t n = static_cast<std::int64_t>(seqs.size());
    // Longest first, so each batch packs sequences of similar length.
    std::vector<std::int64_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](std::int64_t a, std::int64_t b) { return seqs[a].size() > seqs[b].size(); });
    std::vector<std::int32_t> ids;
    std::vector<std::int64_t> offsets, rows;
    std::vector<float> pooled;
    for (std::int64_t b0 = 0; b0 < n; b0 += batch) {
        std::int64_t b1 = std::min<std::int64_t>(n, b0 + batch);
        ids.clear();
        offsets.assign(1, 0);
        rows.clear();
        for (std::int64_t i = b0; i < b1; ++i) {
            const auto& s = seqs[order[i]];
            if (s.empty()) {   // no text: a zero row
                std::fill(out + order[i] * dim, out + (order[i] + 1) * dim, 0.0f);
                continue;
            }
            ids.insert(ids.end(), s.begin(), s.end());
            offsets.push_back(static_cast<std::int64_t>(ids.size()));
            rows.push_back(order[i]);
        }
        if (rows.empty()) continue;
        pooled.resize(rows.size() * dim);
        forward(ids.data(), offsets.data(), static_cast<int>(rows.size()), pooled.data());
        for (std::size_t r = 0; r < rows.size(); ++r) l2_normalise(pooled.data() + r * dim, dim, out + rows[r] * dim);
    }
}

}  // namespace retro
