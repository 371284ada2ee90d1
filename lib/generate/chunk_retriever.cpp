#include "generate/chunk_retriever.h"

#include <filesystem>

#include "core/error.h"
#include "embed/embedder.h"
#include "index/bm25_search.h"
#include "index/faiss_index.h"
#include "index/index_folder.h"

namespace fs = std::filesystem;

namespace retro {

ChunkRetriever::ChunkRetriever(const RetrieverOptions& o, const Tokenizer* tokenizer)
    : k_(o.k), alignment_(o.alignment), min_match_(o.min_match), pad_(o.pad) {
    if (o.k < 1) user_error_in("--neighbours", "must be at least 1");
    db_ = std::make_unique<ChunkDb>(o.db);
    IndexFolderOptions fo;
    fo.nprobe = o.nprobe;
    fo.ef_search = o.ef_search;
    fo.verify = o.verify;
    IndexFolder folder = index_folder_open(o.index, *db_, fo);
    if (folder.kind == "bm25") {
        const Bm25Params p = bm25_params_from_json(folder.manifest.value("bm25", nlohmann::json()), folder.file("manifest.json"));
        bm25_ = std::make_unique<Bm25Searcher>(folder.file(kBm25DbFile), p, db_->chunk_count());
        return;
    }
    embedder_ = embedder_from_json(folder.embedder(), o.index, tokenizer);
    if (folder.dim != embedder_->dim())
        user_error_in(folder.file("index.faiss"), cat("has dimension ", folder.dim, ", the embedder makes ", embedder_->dim()));
    index_folder_check_embedder(folder, *db_, *embedder_);   // (the manifest's settings give the index's vectors)
    index_ = std::move(folder.index);
}

ChunkRetriever::~ChunkRetriever() = default;

std::string ChunkRetriever::embedder_name() const { return bm25_ ? "bm25" : embedder_->name(); }

void ChunkRetriever::retrieve(const std::int32_t* chunks, std::int64_t n, std::int32_t* tokens,
                              std::vector<Retrieval>& found) const {
    const int cs = db_->chunk_size();
    std::vector<std::int64_t> ids(static_cast<std::size_t>(n * k_));
    std::vector<float> scores(ids.size());
    if (bm25_) {
        for (std::int64_t i = 0; i < n; i++) bm25_->search(chunks + i * cs, cs, k_, nullptr, -1, ids.data() + i * k_, scores.data() + i * k_);
    } else {
        std::vector<float> emb(static_cast<std::size_t>(n * embedder_->dim()));
        embedder_->embed(chunks, n, cs, emb.data());
        index_->search(n, emb.data(), k_, ids.data(), scores.data());
    }
    found.assign(static_cast<std::size_t>(n), Retrieval{});
    const std::int64_t r = 2 * cs;
    for (std::int64_t i = 0; i < n; i++) {
        auto& f = found[static_cast<std::size_t>(i)];
        for (int j = 0; j < k_; j++) {
            const std::int64_t id = ids[static_cast<std::size_t>(i * k_ + j)];
            std::int32_t* dst = tokens + (i * k_ + j) * r;
            const bool valid = id >= 0 && id < db_->chunk_count();
            const bool read = valid && neighbour_read(*db_, alignment_, min_match_, chunks + i * cs, id, pad_, dst);
            if (!valid) std::fill(dst, dst + r, pad_);
            f.ids.push_back(read ? id : -1);
            f.scores.push_back(scores[static_cast<std::size_t>(i * k_ + j)]);
        }
    }
}

}  // namespace retro
