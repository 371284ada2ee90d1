// An index folder (retro-index's output) opened for searching, with the provenance checks every
// reader needs written once (retro-knn, retro-generate's retriever): the manifest was written by
// retro-index, the index was built from this chunk database (folder fingerprints), it records its
// embedder and dimension, and index.faiss holds that dimension and one vector per chunk (embeddings.npy
// too, for the readers that open it: index_folder_embeddings); nprobe / efSearch applied when given. A
// bm25 folder (manifest "kind": "bm25", bm25_index_build.h) passes the first two checks and returns
// with kind "bm25": its readers open bm25.glass themselves (bm25_search.h).
// Errors are one line naming the file (ARCHITECTURE.md's error rules).
#pragma once
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "core/npy.h"
#include "index/faiss_index.h"

namespace retro {

class ChunkDb;

struct IndexFolderOptions {
    bool load_index = true;          // false: manifest checks only (exact search reads embeddings.npy)
    int nprobe = 0, ef_search = 0;   // 0 = as saved
    bool verify = false;             // re-hash index.faiss against the manifest before FAISS reads it
};

struct IndexFolder {
    std::string dir;
    nlohmann::json manifest;
    std::string kind = "dense";            // "dense" (embedder + FAISS) or "bm25"
    int dim = 0;                           // the manifest's index.dim
    std::unique_ptr<FaissIndex> index;     // null unless load_index
    const nlohmann::json& embedder() const { return manifest.at("embedder"); }
    std::string file(const std::string& name) const;   // dir/name
};

IndexFolder index_folder_open(const std::string& dir, const ChunkDb& db, const IndexFolderOptions& opts);
// The chunk database an index folder records it was built from (its manifest's "db" input), for a reader whose --db
// was left out (retro-knn, retro-index query, retro-generate): refused in one line where the folder is not
// retro-index's, records none, or the database is no longer there. `option` names the option to give instead.
std::string index_folder_recorded_db(const std::string& dir, const std::string& option = "--db");
// The folder's embeddings.npy mapped, once it is seen to be a 2-D f32 or f16 array of the manifest's dimension
// with one row per chunk of `db` (index_folder_open holds index.faiss to the same count); O(1): the header only.
NpyArray index_folder_embeddings(const IndexFolder& f, const ChunkDb& db);
// The embedder rebuilt from the folder's manifest gives the vectors the index holds: the first few chunks of `db` that
// are not all padding embedded now against their rows of embeddings.npy (cosine >= 0.99: f16 rows and another device
// pass). The manifest is not fingerprinted, so an edited setting (bow's seed) embedded every query chunk differently
// from the index, silently. UserError naming the manifest when they differ; nothing checked without embeddings.npy or
// for an embedder other than bow, bert and t5.
class Embedder;
void index_folder_check_embedder(const IndexFolder& f, const ChunkDb& db, const Embedder& embedder);
// The manifest's kind ("dense" when it records none); UserError when the folder has no manifest.
std::string index_folder_kind(const std::string& dir);

}  // namespace retro
