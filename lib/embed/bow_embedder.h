// The `bow` embedder (ARCHITECTURE.md Decision 5): a chunk's token ids -> hashed unigram and
// bigram features -> TF-IDF weights (1 + ln tf) * idf -> seeded sparse random projection to
// `dim` -> L2 norm. No weights: the only state is the idf table fitted on the database.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "embed/embedder.h"

namespace retro {

class ChunkDb;

struct BowOptions {
    int dim = 256;
    int hash_bits = 18;            // 2^18 feature buckets
    int projection_nnz = 4;        // output dims each feature lands in (Achlioptas-style, ±1/sqrt(nnz))
    std::uint64_t seed = 0x5eed;
};

class BowEmbedder : public Embedder {
public:
    // idf has 2^hash_bits entries.
    BowEmbedder(BowOptions opts, std::vector<float> idf);
    std::string name() const override { return "bow"; }
    int dim() const override { return opts_.dim; }
    void embed(const std::int32_t* tokens, std::int64_t n, int chunk_size, float* out) const override;
    nlohmann::json to_json() const override;   // names "idf.npy" (saved by save_idf)
    void save_idf(const std::string& index_dir) const;
    const std::vector<float>& idf() const { return idf_; }

private:
    BowOptions opts_;
    std::vector<float> idf_;
};

// Document frequencies over every chunk of the database -> smoothed idf
// ln((1 + N) / (1 + df)) + 1 (the scikit-learn form), computed on all threads.
std::vector<float> bow_fit_idf(const ChunkDb& db, const BowOptions& opts);
std::unique_ptr<BowEmbedder> bow_embedder_from_json(const nlohmann::json& j, const std::string& index_dir);

// The hashed feature buckets of one chunk (exposed for tests).
void bow_features(const std::int32_t* tokens, int chunk_size, int hash_bits, std::vector<std::uint32_t>& out);

}  // namespace retro
