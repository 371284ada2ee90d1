// A tiny pipeline built with the tools themselves, for the CLI tests of bad input and memory refusals:
// corpus (16 synthetic documents) -> tok (vocab 300) -> db (chunk 4, seq 16) -> bow index (dim 16) -> knn -> a run
// of examples/configs/tiny.json (num_tokens 300, max_seq_len `max_seq_len`) trained with `train_options`.
#pragma once
#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <string>

#include "test_util.h"

namespace retro::test {

struct CliPipeline {
    TempDir tmp;
    std::filesystem::path corpus, tok, db, index, knn, run, config;
    explicit CliPipeline(const std::string& tag)
        : tmp(tag), corpus(tmp / "corpus"), tok(tmp / "tok"), db(tmp / "db"), index(tmp / "index"), knn(tmp / "knn"),
          run(tmp / "run"), config(tmp / "config.json") {}
};

// Builds every stage into p (REQUIREs each tool's success); `text_seed` seeds the documents' text.
void cli_pipeline_build(CliPipeline& p, std::uint64_t text_seed, std::int64_t max_seq_len, const std::string& train_options);

// A refusal as the tools' contract has it: exit 2 and exactly one stderr line holding every one of `says` (doctest
// CHECKs, so a test goes on to its next case).
void expect_refused(const RunResult& r, std::initializer_list<std::string> says);

// retro-train's options to train p's config on p's db and knn into `out` (batch 2, one thread, quiet).
std::string cli_train_args(const CliPipeline& p, const std::filesystem::path& out);

// The bad-input tests' pipeline (test_bad_input_*.cpp), built once per process: its run trained 2 steps with
// retrieval, a checkpoint at each.
const CliPipeline& bad_input_pipeline();

// The "tool" of DIR/manifest.json.
std::string manifest_tool(const std::filesystem::path& dir);

// A copy of a stage's folder (or any folder) for a test to damage.
inline void copy_folder(const std::filesystem::path& from, const std::filesystem::path& to) {
    std::filesystem::copy(from, to, std::filesystem::copy_options::recursive);
}

}  // namespace retro::test
