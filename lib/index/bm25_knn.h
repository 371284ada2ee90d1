// `retro-knn BM25_INDEX --db DB --out KNN`: for every chunk (or every chunk of --queries) the k best
// BM25 matches in a bm25 index folder (bm25_index_build.h), never the chunk itself nor a chunk of its
// document, ordered by (score desc, chunk id asc); distances.npy holds the BM25 scores. The index's
// postings are searched in memory term at a time (bm25_postings.h) where they fit, else with Xapian's
// matcher, one Xapian database per thread (bm25_search.h). Same outputs, state.json, query blocks,
// --resume, --shard and merge as the dense search (knn_build.h, block_parts.h); threads split each
// block's queries. Flags of the dense search (--exact, --measure-recall, --device, --nprobe,
// --ef-search, --faiss-search) are refused in one line.
#pragma once
#include "core/tool_context.h"
#include "index/knn_build.h"

namespace retro {

void knn_build_bm25(const ToolContext& ctx, const KnnOptions& opts);

}  // namespace retro
