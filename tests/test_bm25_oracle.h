// The brute-force BM25 oracle of the BM25 tests (test_bm25.cpp, test_generate_cli.cpp), written from the
// formula in docs/index.md "BM25 (lexical) retrieval" (Xapian's BM25Weight with k2 = 0), not from Xapian.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "data/chunk_db.h"

namespace retro::test {

struct Bm25OracleParams {
    double k1 = 1.0, k3 = 1.0, b = 0.5, min_normlen = 0.5;
};

// score(q, c) = sum over terms t of q and c of
//   idf(t) * (k3 + 1) qf / (k3 + qf) * (k1 + 1) f / (k1 ((1 - b) + b L) + f)
// idf(t) = ln r, r = (N - n_t + 0.5) / (n_t + 0.5), r replaced by r/2 + 1 when r < 2;
// L = max(len_c / average len, min_normlen); terms = token ids but pad (0), bos (2), eos (3).
struct Bm25Oracle {
    std::vector<std::map<std::int32_t, int>> tf;   // per chunk: token -> count
    std::vector<int> len;
    std::map<std::int32_t, int> df;
    double avlen = 0;
    Bm25OracleParams p;

    Bm25Oracle(const ChunkDb& db, Bm25OracleParams params) : p(params) {
        std::vector<std::int32_t> rows;
        db.rows(0, db.chunk_count(), rows);
        const int cs = db.chunk_size();
        double total = 0;
        for (std::int64_t c = 0; c < db.chunk_count(); ++c) {
            tf.push_back(counts(rows.data() + c * cs, cs));
            int l = 0;
            for (const auto& [t, n] : tf.back()) l += n, ++df[t];
            len.push_back(l);
            total += l;
        }
        avlen = total / static_cast<double>(db.chunk_count());
    }
    static std::map<std::int32_t, int> counts(const std::int32_t* t, int n) {
        std::map<std::int32_t, int> m;
        for (int i = 0; i < n; ++i)
            if (t[i] != 0 && t[i] != 2 && t[i] != 3) ++m[t[i]];
        return m;
    }
    // 0 when no term is shared (such a chunk is never a match).
    double score(const std::map<std::int32_t, int>& q, std::int64_t c) const {
        const double N = static_cast<double>(tf.size());
        const double L = std::max(len[c] / avlen, p.min_normlen);
        double s = 0;
        for (const auto& [t, qf] : q) {
            auto it = tf[c].find(t);
            if (it == tf[c].end()) continue;
            const double n = df.at(t), f = it->second;
            double r = (N - n + 0.5) / (n + 0.5);
            if (r < 2) r = r * 0.5 + 1;
            s += std::log(r) * (p.k3 + 1) * qf / (p.k3 + qf) * (p.k1 + 1) * f / (p.k1 * ((1 - p.b) + p.b * L) + f);
        }
        return s;
    }
    // The k best chunks for q by (score desc, id asc), skipping chunks c with docs[c] == skip_doc (docs
    // not null); scores within 1e-9 relative count as tied. Fewer than k when fewer share a term.
    std::vector<std::pair<double, std::int64_t>> top(const std::map<std::int32_t, int>& q, int k,
                                                     const std::vector<std::int64_t>* docs, std::int64_t skip_doc) const {
        std::vector<std::pair<double, std::int64_t>> all;
        for (std::int64_t c = 0; c < static_cast<std::int64_t>(tf.size()); ++c) {
            if (docs && (*docs)[c] == skip_doc) continue;
            const double s = score(q, c);
            if (s > 0) all.push_back({s, c});
        }
        std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) {
            if (std::fabs(a.first - b.first) > 1e-9 * std::max(a.first, b.first)) return a.first > b.first;
            return a.second < b.second;
        });
        if (static_cast<int>(all.size()) > k) all.resize(static_cast<std::size_t>(k));
        return all;
    }
};

}  // namespace retro::test
