// `retro-index`: embed every chunk of a database in blocks (resumable, shardable), keep the
// embeddings as embeddings.npy, build and save a FAISS index over them (docs/formats.md
// "retro-index"). `merge` joins the parts of sharded runs and builds the index. `--kind bm25` builds a
// lexical (Xapian BM25) index instead: bm25_index_build.h.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/output_folder.h"
#include "core/tool_context.h"
#include "embed/bert_embedder.h"
#include "embed/bow_embedder.h"
#include "embed/clip_embedder.h"
#include "embed/t5_embedder.h"

#include <nlohmann/json.hpp>
#include "index/bm25_params.h"
#include "index/block_parts.h"

namespace retro {

struct IndexBuildOptions {
    std::string db, out;
    std::string kind = "dense";         // dense (embedder + FAISS) | bm25 (Xapian: bm25_index_build.h)
    Bm25Params bm25;                    // kind bm25 only
    std::string embedder = "bow";       // bow | bert | t5 | clip
    BowOptions bow;
    BertEmbedderOptions bert;           // also t5's and clip's model_dir, max_length and batch (the same flags)
    std::string tokenizer;              // override of the db's recorded tokenizer (bert and t5)
    std::string factory;                // "" = index_default_factory(N)
    DType embedding_dtype = DType::F32; // f32 | f16
    std::int64_t block = 65536;         // chunks per embedding block
    Shard shard;
    bool resume = false, force = false;
    int nprobe = 0;                     // 0 = index_default_nprobe(nlist)
    int ef_search = 0;                  // 0 = FAISS default
};

void index_build(const ToolContext& ctx, const IndexBuildOptions& opts);
// Joins the folders of a --shard run into the index an unsharded run builds. `resume`: a finished index of this
// job in `out` (the shards' database, embedder and parameters) is left as it is, an interrupted merge made again.
void index_merge(const ToolContext& ctx, const std::vector<std::string>& shard_dirs, const std::string& out, bool force,
                 bool resume = false);

// The refusal of output_folder_prepare for an existing folder of this same tool (its manifest.json or state.json
// names `tool`) without --force or --resume (and of --force with --resume), on its own: tools call it first, before they read and load their
// inputs, so that it is the only line a user sees. Other folders are left to output_folder_prepare's guard.
void output_folder_refuse_existing(const std::string& tool, const std::string& out, bool force, bool resume);
// A --resume (without --force) of a finished folder (its manifest.json exists): `difference(manifest)` is "" for
// this same job, which says "nothing to resume" and returns true (the caller stops); otherwise refused as
// "already holds <what> of another job: <difference>". False when there is no finished folder.
bool output_folder_finished(const std::string& out, bool resume, bool force, const std::string& what,
                            const std::function<std::string(const nlohmann::json&)>& difference);
// Refuses an existing output folder unless --force (cleared: output_folder_clear) or --resume (kept), and the two
// together; creates it. Before that, the guard of core/output_folder.h: never an input, never another tool's folder
// (`tool` = ToolContext::tool). Then Ctrl-C says what to run next (`resumable` false: a merge, again with --force).
// A run that cannot be resumed marks the folder at once with a state.json of its own ({"tool", "resumable": false,
// "run": `run`, e.g. "a merge"}): its interrupted folder is then known as the tool's, and a resumable run's --resume
// into it is refused.
// Every refusal of output_folder_prepare, nothing removed or made: a tool whose options are checked by slow work (an
// embedder loaded or fitted) runs it first, so that --force removes nothing before the work's own refusals.
void output_folder_prepare_check(const std::string& tool, const std::string& out, bool force, bool resume,
                                 const std::vector<OutputInput>& inputs, bool resumable);
void output_folder_prepare(const std::string& tool, const std::string& out, bool force, bool resume,
                           const std::vector<OutputInput>& inputs, bool resumable = true, const std::string& run = "a merge");

}  // namespace retro
