// Retrieval during generation (RETRO.md C.2, ARCHITECTURE.md Decision 6): a finished chunk of generated
// (or prompt) ids is embedded with the embedder the index was built with (rebuilt from index/manifest.json),
// searched in index/index.faiss for k neighbours, and turned into neighbour + continuation ids from db/
// (ChunkDb::neighbour_tokens). Nothing is dropped but ids FAISS could not fill (-1), which become pads
// (masked in CCA). With the model's "neighbour_alignment": "match" or "neighbour_min_match" the units are
// read as training reads them (data/neighbour_window.h): shifted to their match with the chunk, and a
// neighbour sharing too short a run is not read (pads, id -1). Opening checks that the index was built from this db (fingerprints). A bm25 index folder
// (retro-index --kind bm25) is searched with the chunk's token ids as the BM25 query instead (bm25_search.h).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/chunk_db.h"
#include "data/neighbour_window.h"

namespace retro {

class Bm25Searcher;
class Embedder;
class FaissIndex;
class Tokenizer;

struct RetrieverOptions {
    std::string index, db;
    int k = 2;
    int nprobe = 0, ef_search = 0;   // 0 = as the index was saved
    NeighbourAlignment alignment = NeighbourAlignment::chunk;   // the model config's neighbour_alignment
    int min_match = 0;                                         // the model config's neighbour_min_match
    std::int32_t pad = 0;
    bool verify = false;                                       // re-hash index.faiss before FAISS reads it
};

struct Retrieval {
    std::vector<std::int64_t> ids;   // [k], -1 = none
    std::vector<float> scores;       // [k] inner products (cosine: unit vectors), or BM25 scores
};

class ChunkRetriever {
public:
    // `tokenizer` decodes ids for a `bert` embedder (may be null for `bow`); it must outlive the retriever.
    ChunkRetriever(const RetrieverOptions& o, const Tokenizer* tokenizer);
    ~ChunkRetriever();
    const ChunkDb& db() const { return *db_; }
    int k() const { return k_; }
    int chunk_size() const { return db_->chunk_size(); }
    std::string embedder_name() const;

    // n chunks [n, cs] -> neighbour + continuation ids [n, k, 2cs] and what was found.
    void retrieve(const std::int32_t* chunks, std::int64_t n, std::int32_t* tokens, std::vector<Retrieval>& found) const;

private:
    int k_;
    NeighbourAlignment alignment_;
    int min_match_;
    std::int32_t pad_;
    std::unique_ptr<ChunkDb> db_;
    std::unique_ptr<Embedder> embedder_;
    std::unique_ptr<FaissIndex> index_;
    std::unique_ptr<Bm25Searcher> bm25_;   // set instead of embedder_ / index_ for a bm25 folder
};

}  // namespace retro
