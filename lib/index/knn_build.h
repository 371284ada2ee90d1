// `retro-knn`: the k nearest neighbours of every chunk (or of another database's chunks) in an
// index, never the query chunk itself nor any chunk of its document (ARCHITECTURE.md Decision 4):
// search k + extra, drop, keep k, pad with -1. `--exact` searches by brute force instead
// (exact_search.h on the CPU, or cuBLAS + a top-k kernel with --device cuda; the document filter
// applied inside the search). Resumable and
// shardable by query blocks, like retro-index. A bm25 index folder is searched by bm25_knn.h, which
// shares the output steps below.
#pragma once
#include "core/scratch_dir.h"
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/tool_context.h"
#include "index/block_parts.h"

namespace retro {

class ChunkDb;

struct KnnOptions {
    std::string index, db, queries, out;   // queries "" = the db itself
    int k = 2;
    int extra = 8;
    bool exact = false;
    std::string device = "cpu";             // exact search on "cpu" or "cuda"
    int nprobe = 0, ef_search = 0;          // 0 = what the index was saved with
    bool faiss_search = false;              // FAISS's own search instead of ours (ann_search.h)
    std::int64_t block = 16384;             // queries per block
    std::int64_t measure_recall = 0;        // sample size; 0 = don't
    Shard shard;
    bool resume = false, force = false;
};

void knn_build(const ToolContext& ctx, const KnnOptions& opts);

// The k neighbours of every chunk of `db` searched now in `index` (knn_build with the defaults, the chunk's own
// document excluded) into a scratch folder under the system's temp directory, removed with this object: what
// `retro-train eval --index` reads instead of a knn folder.
class ScratchKnn {
public:
    ScratchKnn(const ToolContext& ctx, const std::string& index, const std::string& db, int k);
    ~ScratchKnn();
    ScratchKnn(const ScratchKnn&) = delete;
    ScratchKnn& operator=(const ScratchKnn&) = delete;
    const std::string& dir() const { return dir_; }

private:
    ScratchDir scratch_;   // removed on Ctrl-C too (core/scratch_dir.h)
    std::string dir_;
};
// Joins the folders of a --shard run into the neighbours an unsharded run finds. `resume`: finished neighbours of
// this job in `out` (the shards' index and parameters) are left as they are, an interrupted merge made again.
void knn_merge(const ToolContext& ctx, const std::vector<std::string>& shard_dirs, const std::string& out, bool force,
               bool resume = false);

// Prepares OUT (refused when it exists, unless --force or --resume), refuses a --resume of another job
// (its state.json differs in index_fingerprint, rows or parameters) and writes OUT/state.json. Returns false,
// touching nothing, for a --resume of a finished folder of this same job ("nothing to resume"; another job's
// finished folder is refused naming the difference).
[[nodiscard]] bool knn_state_write(const ToolContext& ctx, const KnnOptions& opts, const nlohmann::json& state);
// After the blocks: a shard logs how to merge and returns false; otherwise the parts (neighbours `nb`,
// distances `ds`) are joined into OUT/neighbours.npy and OUT/distances.npy and it returns true.
bool knn_join_parts(const KnnOptions& opts, const BlockParts& nb, const BlockParts& ds);
// Writes OUT/manifest.json (last) for the finished neighbours.npy / distances.npy of the job in `state`
// and removes state.json and the parts; recall_sample > 0 records the measured recall.
void knn_write_manifest(const ToolContext& ctx, const nlohmann::json& state, const std::string& out, double recall,
                        std::int64_t recall_sample);

// Refuses --neighbours k that no row can fill: k at or above the database's chunk count when it is searched against
// itself (a chunk is never its own neighbour), above it for another database's queries (--neighbours 20000 over
// 14,444 chunks ran a minute, then warned of -1 slots and suggested a larger --nprobe).
void knn_check_k(std::int64_t k, std::int64_t chunks, bool self_mode, const std::string& db);

// The --queries database (null where none is given, or where it is --db itself: self mode), refused when it was
// chunked with another tokenizer than --db (its ids mean other pieces: BM25 scored them as the database's terms).
std::unique_ptr<ChunkDb> knn_queries_open(const std::string& queries, const ChunkDb& db, const std::string& db_dir);

// Drops candidates that are the query itself (`self` >= 0) or of document `doc` (when docs is not
// null), keeps the first k in order, pads with -1 / -inf.
void knn_filter_row(const std::int64_t* cand_ids, const float* cand_scores, int candidates, std::int64_t self,
                    std::int64_t doc, const std::int64_t* docs, int k, std::int64_t* ids, float* scores);

}  // namespace retro
