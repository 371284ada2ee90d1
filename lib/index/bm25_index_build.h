// `retro-index DB --out DIR --kind bm25`: one Xapian document per chunk (docid = chunk row + 1, its
// terms the chunk's token ids as "t<id>", pad/bos/eos left out: bm25_params.h), written as a
// single-file Xapian database DIR/bm25.glass, then manifest.json (kind, BM25 parameters, the db's
// fingerprint) last. The database is built in DIR/parts and compacted into bm25.glass.tmp, renamed
// when complete, so an interrupted build leaves nothing that looks complete; --resume builds again
// from the start (one pass, no resumable parts), --shard is refused.
#pragma once
#include "core/tool_context.h"
#include "index/index_build.h"

namespace retro {

void bm25_index_build(const ToolContext& ctx, const IndexBuildOptions& opts);

}  // namespace retro
