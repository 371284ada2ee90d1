// `retro-chunk merge db.0/ … db.{n-1}/ --out db/`: joins the shards of one `--shard i/n` run into the
// database an unsharded run writes, byte for byte: input block b comes from shard b % n, and
// document ids, doc_offsets and seq_starts are renumbered. `--resume` (a pipeline run again): a finished merge
// whose manifest records these shards (by their fingerprints) is left as it is, an interrupted one is made again.
#pragma once
#include <string>
#include <vector>

#include "core/tool_context.h"

namespace retro {

struct MergeOptions {
    std::vector<std::string> shards;
    std::string out;
    bool force = false;
    bool resume = false;   // a finished merge of these shards: "already complete"; an interrupted one made again
};

void chunk_merge(const ToolContext& ctx, const MergeOptions& opts);

}  // namespace retro
