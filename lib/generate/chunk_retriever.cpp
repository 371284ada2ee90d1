#include "generate/chunk_retriever.h"

#include <filesystem>

#include "core/error.h"
#include "core/manifest.h"
#include "embed/embedder.h"
#include "index/faiss_index.h"

namespace fs = std::filesystem;

namespace retro {

ChunkRetriever::ChunkRetriever(const RetrieverOptions& o, const Tokenizer* tokenizer) : k_(o.k) {
    if (o.k < 1) user_error_in("--neighbours", "must be at least 1");
    const nlohmann::json im = manifest_read(o.index);
    const std::string im_path = (fs::path(o.index) / "manifest.json").string();
    if (im.value("tool", "") != "retro-index") user_error_in(im_path, "was not written by retro-index");
    db_ = std::make_unique<ChunkDb>(o.db);
    const std::string db_fp = folder_fingerprint(db_->manifest());
    std::string index_db_fp;
    for (const auto& in : im.value("inputs", nlohmann::json::array()))
        if (in.value("role", "") == "db") index_db_fp = in.value("fingerprint", "");
    if (index_db_fp != db_fp)
        user_error_in(o.db, "is not the database " + o.index + " was built from (fingerprint " + db_fp +
                                ", the index records " + index_db_fp + ")",
                      "pass the --db the index was built from, or rebuild the index");
    if (!im.contains("embedder")) user_error_in(im_path, "names no embedder", "rebuild the index with retro-index");
    embedder_ = embedder_from_json(im.at("embedder"), o.index, tokenizer);
    index_ = std::make_unique<FaissIndex>(FaissIndex::load((fs::path(o.index) / "index.faiss").string()));
    if (index_->dim() != embedder_->dim())
        user_error_in((fs::path(o.index) / "index.faiss").string(),
                      cat("has dimension ", index_->dim(), ", the embedder makes ", embedder_->dim()));
    if (index_->size() != db_->chunk_count())
        user_error_in((fs::path(o.index) / "index.faiss").string(),
                      cat("holds ", index_->size(), " vectors, the database ", db_->chunk_count(), " chunks"));
    if (o.nprobe > 0) index_->set_nprobe(o.nprobe);
    if (o.ef_search > 0) index_->set_ef_search(o.ef_search);
}

ChunkRetriever::~ChunkRetriever() = default;

std::string ChunkRetriever::embedder_name() const { return embedder_->name(); }

void ChunkRetriever::retrieve(const std::int32_t* chunks, std::int64_t n, std::int32_t* tokens,
                              std::vector<Retrieval>& found) const {
    const int cs = db_->chunk_size(), d = embedder_->dim();
    std::vector<float> emb(static_cast<std::size_t>(n * d));
    embedder_->embed(chunks, n, cs, emb.data());
    std::vector<std::int64_t> ids(static_cast<std::size_t>(n * k_));
    std::vector<float> scores(ids.size());
    index_->search(n, emb.data(), k_, ids.data(), scores.data());
    found.assign(static_cast<std::size_t>(n), Retrieval{});
    const std::int64_t r = 2 * cs;
    for (std::int64_t i = 0; i < n; i++) {
        auto& f = found[static_cast<std::size_t>(i)];
        for (int j = 0; j < k_; j++) {
            const std::int64_t id = ids[static_cast<std::size_t>(i * k_ + j)];
            std::int32_t* dst = tokens + (i * k_ + j) * r;
            f.ids.push_back(id < 0 || id >= db_->chunk_count() ? -1 : id);
            f.scores.push_back(scores[static_cast<std::size_t>(i * k_ + j)]);
            if (f.ids.back() < 0)
                std::fill(dst, dst + r, 0);
            else
                db_->neighbour_tokens(id, dst);
        }
    }
}

}  // namespace retro
