// The work behind `retro-chunk CORPUS... --tokenizer tok.model --out db/`: reads the corpus in
// input blocks, encodes each block on all threads, appends documents in corpus order (so the bytes
// do not depend on the thread count), checkpoints for --resume, and writes manifest.json last.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/tool_context.h"
#include "text/corpus.h"

namespace retro {

struct ChunkOptions {
    std::vector<std::string> inputs;    // folders and .jsonl/.jsonl.gz/.jsonl.zst files
    std::string tokenizer;              // tok.model or a folder holding it
    std::string out;                    // output folder
    int chunk_size = 64;
    int seq_len = 2048;                 // a multiple of chunk_size
    int shard_index = 0, shard_count = 1;
    bool resume = false, force = false;
    CorpusOptions corpus;
    std::int64_t block_docs = 1024;     // input block: at most this many documents ...
    std::int64_t block_bytes = 4 << 20; // ... or the first document that reaches this many bytes
    double checkpoint_seconds = 10;     // how often --resume state is saved (0: after every block)
};

// Parses "--shard i/n" into opts; UserError on anything else.
void chunk_parse_shard(const std::string& text, ChunkOptions& opts);

void chunk_corpus(const ToolContext& ctx, const ChunkOptions& opts);

}  // namespace retro
