// Bad input to retro-bench (see test_bad_input_cli.cpp): outputs over inputs, sizes that would end in bad_alloc,
// peers, options a run would ignore.
#include <sys/stat.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/npy.h"
#include "core/output_folder.h"
#include "core/shell_quote.h"
#include "test_cli_pipeline.h"
#include "test_util.h"

using namespace retro;
namespace fs = std::filesystem;

namespace {

using Pipeline = test::CliPipeline;
using test::expect_refused;
const auto& pipeline = test::bad_input_pipeline;   // (the pipeline's run: 2 steps with retrieval, a checkpoint at each)

}  // namespace

TEST_CASE("bad input: retro-bench writes no output over its inputs and refuses sizes that end in bad_alloc") {
    // a helper's exploratory pass (session 51): every subcommand but embed wrote its --json over the --config,
    // --base-npy or corpus it read (exit 0), and chunk's --work-dir replaced a real database
    test::TempDir t("bench-over");
    const fs::path cfg = t / "c.json";
    test::write_text(cfg, test::read_text(test::source_dir() / "examples" / "configs" / "tiny.json"));
    const std::string before = test::read_text(cfg);
    expect_refused(test::run_tool("retro-bench", "--quiet train --config " + cfg.string() + " --batch 1 --steps 1 --json " +
                                                     cfg.string()),
                   {"--json: is " + cfg.string() + ", --config", "would replace an input"});
    expect_refused(test::run_tool("retro-bench", "--quiet generate --config " + cfg.string() + " --prompt 4 --output 1 --json " +
                                                     cfg.string()),
                   {"--json: is ", "would replace an input"});
    CHECK(test::read_text(cfg) == before);
    std::vector<float> v(64 * 8, 0.5f);
    npy_save((t / "e.npy").string(), {64, 8}, v.data());
    npy_save((t / "q.npy").string(), {4, 8}, v.data());
    expect_refused(test::run_tool("retro-bench", "--quiet knn --base-npy " + (t / "e.npy").string() + " --queries-npy " +
                                                     (t / "q.npy").string() + " --ivf-nlist 0 --pq-m 0 --debian-queries 0 "
                                                     "--thread-counts 1 --json " + (t / "e.npy").string()),
                   {"--json: is ", "--base-npy"});
    CHECK(NpyArray((t / "e.npy").string()).dim(0) == 64);
    // a NaN among the base vectors: named as the file's, not FAISS's training assert blamed on an "--index" it lacks
    std::vector<float> nan_rows = v;
    nan_rows[5 * 8 + 3] = std::nanf("");
    npy_save((t / "nan.npy").string(), {64, 8}, nan_rows.data());
    expect_refused(test::run_tool("retro-bench", "--quiet knn --base-npy " + (t / "nan.npy").string() + " --queries-npy " +
                                                     (t / "q.npy").string() + " --ivf-nlist 0 --pq-m 0 --debian-queries 0 --thread-counts 1"),
                   {(t / "nan.npy").string() + ": row 5 holds a value that is not finite"});
    expect_refused(test::run_tool("retro-bench", "--quiet retention --T 64 --json " + (t / "r.png").string() + " --plot " +
                                                     (t / "r.png").string()),
                   {"--plot: is ", "the file --json writes too"});
    // a name ending in '/' is a folder's: refused before the timing (it ran them all, then failed to write)
    expect_refused(test::run_tool("retro-bench", "--quiet retention --T 64 --json " + (t / "newdir").string() + "/"),
                   {(t / "newdir").string() + "/: ends in '/', a folder's name"});
    expect_refused(test::run_tool("retro-bench", "--quiet retention --T 64 --plot " + (t / "x.png").string() + "/"),
                   {"x.png/: ends in '/'"});
    // a --work-dir of the user's (a file of theirs in it) is refused, the file untouched; a new one is the bench's
    fs::create_directories(t / "wd");
    test::write_text(t / "wd" / "corpus.jsonl", "{\"text\": \"mine\"}\n");
    expect_refused(test::run_tool("retro-bench", "--quiet chunk --size-mb 0.05 --encode-mb 0.05 --vocab-size 300 "
                                                     "--chunk-threads 1 --work-dir " + (t / "wd").string()),
                   {"--work-dir: ", "did not make"});
    CHECK(test::read_text(t / "wd" / "corpus.jsonl") == "{\"text\": \"mine\"}\n");
    // a corpus whose documents are under another key: --text-key, as retro-chunk (the refusal advised options the
    // bench did not have)
    std::string body;
    for (int i = 0; i < 200; ++i) body += "{\"body\": \"document " + std::to_string(i) + " holds a few words of text to chunk\"}\n";
    test::write_text(t / "body.jsonl", body);
    const std::string body_chunk = "--quiet chunk --corpus " + (t / "body.jsonl").string() + " --vocab-size 300 --encode-mb 0.01";
    expect_refused(test::run_tool("retro-bench", body_chunk + " --chunk-threads 1"), {"has no key 'text'"});
    // (and without --chunk-threads the tool's --threads is the list timed, as for train: it timed 1 and all cores)
    const auto keyed = test::run_tool("retro-bench", "--threads 1 " + body_chunk + " --text-key body --json -");
    CHECK_MESSAGE(keyed.exit_code == 0, keyed.err);
    const nlohmann::json chunk_runs = nlohmann::json::parse(keyed.out).at("retro_chunk");
    REQUIRE(chunk_runs.size() == 1);
    CHECK(chunk_runs[0].at("threads") == 1);
    // --json over a file the bench writes into its --work-dir (the report replaced the corpus, exit 0)
    fs::create_directories(t / "wd2");
    expect_refused(test::run_tool("retro-bench", "--quiet chunk --size-mb 0.05 --encode-mb 0.05 --vocab-size 300 "
                                                     "--chunk-threads 1 --work-dir " + (t / "wd2").string() + " --json " +
                                                     (t / "wd2" / "corpus.jsonl").string()),
                   {"--json: is ", "the --work-dir's corpus"});
    // a misspelt --ops item (dropped silently before), a negative --peer-steps (skipped the peer), sizes FAISS or the
    // synthetic data would die on (std::bad_alloc, exit 1)
    expect_refused(test::run_tool("retro-bench", "--quiet ops --ops nn.linear,bogus"), {"--ops: 'bogus' names no registered op"});
    expect_refused(test::run_tool("retro-bench", "--quiet generate --config " + cfg.string() + " --prompt 4 --output 1 "
                                                     "--peer-steps -3"),
                   {"--peer-steps"});
    const std::string knn = "--quiet knn --n 2000 --dim 8 --queries 16 --ivf-nlist 0 --pq-m 0 --thread-counts 1 --debian-queries 0 ";
    expect_refused(test::run_tool("retro-bench", knn + "--hnsw-m 50000 --clusters 10"), {"--hnsw-m"});
    // (HNSW1 never finished building, taking gigabytes a second)
    expect_refused(test::run_tool("retro-bench", knn + "--hnsw-m 1 --clusters 10"), {"--hnsw-m: 1 neighbour a node: HNSW needs at least 2"});
    // a peer script that is not there: refused before the work (exit 0, a warning about faiss-cpu twice); a peer that
    // fails: said once, with its exit code and command, and kept in the JSON as peer_skipped
    expect_refused(test::run_tool("retro-bench", knn + "--clusters 10 --peer " + (t / "nothere.py").string()), {"--peer", "nothere.py"});
    const auto failed = test::run_tool("retro-bench", knn.substr(std::string("--quiet ").size()) + "--clusters 10 --ivf-nlist 4 --peer " +
                                                          (test::source_dir() / "tests/peers/faiss_knn.py").string() +
                                                          " --python " + (t / "no-python").string() + " --json " + (t / "kp.json").string());
    CHECK_MESSAGE(failed.exit_code == 0, failed.err);
    std::size_t said = 0;
    for (auto at = failed.err.find("peer script failed"); at != std::string::npos; at = failed.err.find("peer script failed", at + 1)) said++;
    CHECK(said == 1);
    CHECK(nlohmann::json::parse(test::read_text(t / "kp.json")).value("peer_skipped", "").find("exit 127") != std::string::npos);
    expect_refused(test::run_tool("retro-bench", knn + "--clusters 2000000000"), {"--clusters"});
    expect_refused(test::run_tool("retro-bench", "--quiet knn --n 20000 --dim 32 --queries 16 --ivf-nlist 16 --pq-m 5 "
                                                 "--thread-counts 1 --debian-queries 0"),
                   {"--pq-m: 5 sub-quantizers do not divide the dimension 32"});
}

TEST_CASE("bad input: retro-bench train refuses a sequence length that is not whole chunks") {
    const Pipeline& p = pipeline();
    for (const std::string len : {"-4", "6"})
        expect_refused(test::run_tool("retro-bench", "--quiet train --config " + p.config.string() +
                                                         " --batch 2 --steps 1 --warmup 0 --threads 1 --seq-len " + len),
                       {"--seq-len"});
}
