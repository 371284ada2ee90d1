// The brute-force oracle of the exact-search tests (test_knn.cpp, test_exact_search.cpp): every
// score by a plain loop, rows sorted by (score desc, id asc), the same-document filter, -1 / -inf
// padding. And integer-valued test vectors, whose dot products are exact in float whatever the
// summation order, with many tied scores so the tie rule is tested too.
#pragma once
#include <algorithm>
#include <cstdint>
#include <limits>
#include <random>
#include <utility>
#include <vector>

namespace retro::test {

// docs (when not null) has an entry per base row and, at index i + qdoc_offset, query i's document.
inline void knn_oracle(const std::vector<float>& q, const std::vector<float>& x, int d, int k,
                       const std::vector<std::int64_t>* docs, std::int64_t qdoc_offset, std::vector<std::int64_t>& ids,
                       std::vector<float>& scores) {
    std::int64_t m = static_cast<std::int64_t>(q.size()) / d, n = static_cast<std::int64_t>(x.size()) / d;
    ids.assign(static_cast<std::size_t>(m * k), -1);
    scores.assign(ids.size(), -std::numeric_limits<float>::infinity());
    for (std::int64_t i = 0; i < m; ++i) {
        std::vector<std::pair<float, std::int64_t>> all;
        for (std::int64_t j = 0; j < n; ++j) {
            if (docs && (*docs)[j] == (*docs)[i + qdoc_offset]) continue;
            float s = 0;
            for (int t = 0; t < d; ++t) s += q[i * d + t] * x[j * d + t];
            all.push_back({-s, j});
        }
        std::sort(all.begin(), all.end());
        for (int r = 0; r < k && r < static_cast<int>(all.size()); ++r) {
            ids[i * k + r] = all[r].second;
            scores[i * k + r] = -all[r].first;
        }
    }
}

// Entries uniform in {-range, ..., range}.
inline std::vector<float> knn_integer_vectors(std::int64_t n, int d, unsigned seed, int range = 2) {
    std::mt19937 rng(seed);
    std::vector<float> v(static_cast<std::size_t>(n * d));
    for (auto& x : v) x = static_cast<float>(static_cast<int>(rng() % (2 * range + 1)) - range);
    return v;
}

}  // namespace retro::test
