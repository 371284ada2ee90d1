// Implementation of bow_embedder.h.
#include "embed/bow_embedder.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "core/error.h"
#include "core/npy.h"
#include "core/progress.h"
#include "core/splitmix.h"
#include "core/threads.h"
#include "data/chunk_db.h"
#include "text/tokenizer.h"

namespace retro {
namespace {

std::uint64_t mix(std::uint64_t x) { return splitmix64(x); }

bool is_content(std::int32_t t) { return t != TOKEN_PAD && t != TOKEN_BOS && t != TOKEN_EOS; }

}  // namespace

void bow_features(const std::int32_t* tokens, int chunk_size, int hash_bits, std::vector<std::uint32_t>& out) {
    out.clear();
    const std::uint64_t mask = (std::uint64_t(1) << hash_bits) - 1;
    std::int32_t prev = -1;
    for (int i = 0; i < chunk_size; ++i) {
        std::int32_t t = tokens[i];
        if (!is_content(t)) {
            prev = -1;
            continue;
        }
        out.push_back(static_cast<std::uint32_t>(mix(static_cast<std::uint64_t>(t)) & mask));   // unigram
        if (prev >= 0)                                                                           // bigram
            out.push_back(static_cast<std::uint32_t>(
                mix((static_cast<std::uint64_t>(prev) << 32) ^ static_cast<std::uint64_t>(t) ^ 0xb16a3ull) & mask));
        prev = t;
    }
    std::sort(out.begin(), out.end());
}

BowEmbedder::BowEmbedder(BowOptions opts, std::vector<float> idf) : opts_(opts), idf_(std::move(idf)) {
    if (opts_.dim < 1) user_error_in("--dim", "must be positive");
    RETRO_CHECK(idf_.size() == (std::size_t(1) << opts_.hash_bits), "idf size ", idf_.size());
}

void BowEmbedder::embed(const std::int32_t* tokens, std::int64_t n, int chunk_size, float* out) const {
    const float proj_scale = 1.0f / std::sqrt(static_cast<float>(opts_.projection_nnz));
    parallel_ranges(n, [&](std::int64_t begin, std::int64_t end, int) {
        std::vector<std::uint32_t> feats;
        for (std::int64_t c = begin; c < end; ++c) {
            float* row = out + c * opts_.dim;
            std::fill(row, row + opts_.dim, 0.0f);
            bow_features(tokens + c * chunk_size, chunk_size, opts_.hash_bits, feats);
            for (std::size_t i = 0; i < feats.size();) {
                std::size_t j = i;
                while (j < feats.size() && feats[j] == feats[i]) ++j;
                float w = (1.0f + std::log(static_cast<float>(j - i))) * idf_[feats[i]] * proj_scale;
                for (int r = 0; r < opts_.projection_nnz; ++r) {   // feature -> nnz signed output dims
                    std::uint64_t h = mix(opts_.seed ^ (static_cast<std::uint64_t>(feats[i]) * 0x100 + r));
                    row[h % static_cast<std::uint64_t>(opts_.dim)] += (h >> 63) ? -w : w;
                }
                i = j;
            }
            double norm = 0;
            for (int d = 0; d < opts_.dim; ++d) norm += double(row[d]) * row[d];
            if (norm > 0) {
                float inv = static_cast<float>(1.0 / std::sqrt(norm));
                for (int d = 0; d < opts_.dim; ++d) row[d] *= inv;
            }
        }
    });
}

nlohmann::json BowEmbedder::to_json() const {
    return {{"name", "bow"},
            {"dim", opts_.dim},
            {"hash_bits", opts_.hash_bits},
            {"projection_nnz", opts_.projection_nnz},
            {"seed", opts_.seed},
            {"idf", "idf.npy"}};
}

void BowEmbedder::save_idf(const std::string& index_dir) const {
    npy_save((std::filesystem::path(index_dir) / "idf.npy").string(), {static_cast<std::int64_t>(idf_.size())}, idf_.data());
}

std::vector<float> bow_fit_idf(const ChunkDb& db, const BowOptions& opts) {
    const std::size_t buckets = std::size_t(1) << opts.hash_bits;
    const std::int64_t n = db.chunk_count();
    const int cs = db.chunk_size();
    const int threads = thread_count();
    // 64-bit counts: a bucket of a common token is in every chunk, and one thread's share of a Pile-scale database
    // passes 2^32 chunks (32-bit counters wrapped there, silently: the commonest features got the highest idf)
    std::vector<std::vector<std::uint64_t>> df(static_cast<std::size_t>(threads), std::vector<std::uint64_t>(buckets, 0));
    Progress progress("bow: document frequencies", n, "chunks");
    parallel_ranges(n, [&](std::int64_t begin, std::int64_t end, int t) {
        std::vector<std::int32_t> rows;
        std::vector<std::uint32_t> feats;
        auto& mine = df[static_cast<std::size_t>(t)];
        for (std::int64_t b = begin; b < end; b += 4096) {
            std::int64_t e = std::min(end, b + 4096);
            rows.clear();
            db.rows(b, e, rows);
            for (std::int64_t c = 0; c < e - b; ++c) {
                bow_features(rows.data() + c * cs, cs, opts.hash_bits, feats);
                feats.erase(std::unique(feats.begin(), feats.end()), feats.end());
                for (auto f : feats) mine[f]++;
            }
            progress.add(e - b);
        }
    });
    progress.finish();
    std::vector<float> idf(buckets);
    for (std::size_t i = 0; i < buckets; ++i) {
        std::uint64_t d = 0;
        for (const auto& m : df) d += m[i];
        idf[i] = static_cast<float>(std::log((1.0 + n) / (1.0 + d)) + 1.0);
    }
    return idf;
}

std::unique_ptr<BowEmbedder> bow_embedder_from_json(const nlohmann::json& j, const std::string& index_dir) {
    BowOptions o;
    o.dim = j.value("dim", o.dim);
    o.hash_bits = j.value("hash_bits", o.hash_bits);
    o.projection_nnz = j.value("projection_nnz", o.projection_nnz);
    o.seed = j.value("seed", o.seed);
    if (o.hash_bits < 4 || o.hash_bits > 28 || o.projection_nnz < 1 || o.dim < 1)
        user_error_in(index_dir, "manifest.json holds impossible bow settings");
    NpyArray idf((std::filesystem::path(index_dir) / j.value("idf", "idf.npy")).string());
    idf.expect_shape({std::int64_t(1) << o.hash_bits});
    const float* p = idf.data<float>();
    return std::make_unique<BowEmbedder>(o, std::vector<float>(p, p + idf.numel()));
}

}  // namespace retro
