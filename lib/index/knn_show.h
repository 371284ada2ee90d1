// `retro-knn show`: a chunk's text beside its neighbours' text (and their continuations' first
// tokens), decoded with the database's tokenizer, as text or JSON lines. A run of `retro-knn --queries Q` shows Q's
// chunks (`--queries Q`) beside their neighbours in --db. The neighbours folder's files are verified against its
// manifest first (as every tool's inputs; --no-verify skips it).
#pragma once
#include <cstdint>
#include <string>

namespace retro {

struct KnnShowOptions {
    std::string knn, db, tokenizer;   // tokenizer "" = the db's recorded one
    std::string queries;              // the --queries database of the run ("" = its rows are --db's own chunks)
    bool verify = true;               // hash neighbours.npy and distances.npy against the folder's manifest
    std::int64_t chunk = 0;
    std::int64_t count = 1;           // chunks from `chunk` on
    bool json = false;
};

void knn_show(const KnnShowOptions& opts);

}  // namespace retro
