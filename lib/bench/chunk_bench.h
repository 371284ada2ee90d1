// retro-bench chunk: retro-chunk's throughput (MB/s of text, tokens/s) at 1 thread and at all
// threads, its peak RSS, and in the same run a bare in-process sentencepiece Encode loop over the
// same text (the bound to compare with, ANCHORS.md §7). Corpus generated (pseudo-words) or given.
#pragma once
#include <nlohmann/json.hpp>
#include <cstdint>
#include <string>
#include <vector>

namespace retro::bench {

struct ChunkBenchOptions {
    std::vector<std::string> corpus;   // empty: generate one of size_mb
    double size_mb = 64;               // generated corpus size (MB of text)
    std::string tokenizer;             // empty: train a unigram model of `vocab_size` on the corpus
    int vocab_size = 8000;
    double encode_mb = 64;             // text held in memory for the bare Encode loop (at most)
    std::vector<int> threads;          // retro-chunk thread counts; empty: 1 and all cores
    std::string chunk_bin;             // retro-chunk binary; empty: next to this executable
    std::string work_dir;              // empty: a fresh folder under the temp dir, removed after
    std::string json;                  // write results here when not empty
    // how the corpus is read, as retro-chunk's options (passed to it): --glob, --text-key, --on-error fail|skip
    std::string glob = "**/*.txt", text_key = "text", on_error = "fail";
};

// Runs the benchmark; the table goes to stdout, notes to stderr; returns the JSON results.
nlohmann::json run_chunk_bench(const ChunkBenchOptions& opt, const std::string& command_line);

}  // namespace retro::bench
