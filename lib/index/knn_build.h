// `retro-knn`: the k nearest neighbours of every chunk (or of another database's chunks) in an
// index, never the query chunk itself nor any chunk of its document (ARCHITECTURE.md Decision 4):
// search k + extra, drop, keep k, pad with -1. `--exact` searches by brute force instead
// (exact_search.h on the CPU, or cuBLAS + a top-k kernel with --device cuda; the document filter
// applied inside the search). Resumable and
// shardable by query blocks, like retro-index.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/tool_context.h"
#include "index/block_parts.h"

namespace retro {

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
void knn_merge(const ToolContext& ctx, const std::vector<std::string>& shard_dirs, const std::string& out, bool force);

// Drops candidates that are the query itself (`self` >= 0) or of document `doc` (when docs is not
// null), keeps the first k in order, pads with -1 / -inf.
void knn_filter_row(const std::int64_t* cand_ids, const float* cand_scores, int candidates, std::int64_t self,
                    std::int64_t doc, const std::int64_t* docs, int k, std::int64_t* ids, float* scores);

}  // namespace retro
