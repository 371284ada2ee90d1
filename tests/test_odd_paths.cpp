// Paths a shell script may hand the tools (a helper's odd-paths campaign, session 57: every tool over paths with
// spaces, quotes, newlines, UTF-8, links, pipes, long names, other file systems). Each case here failed before: after
// the work, or with a folder left that looked finished, or naming the wrong cause.
#include <doctest/doctest.h>

#include <filesystem>
#include <iterator>
#include <string>

#include "core/shell_quote.h"
#include "test_cli_pipeline.h"
#include "test_util.h"

namespace fs = std::filesystem;
using namespace retro;

namespace {

std::string in_folder(const fs::path& dir, const std::string& command) { return "cd " + shell_quote(dir.string()) + " && " + command; }

}  // namespace

TEST_CASE("odd paths: a relative path in a current folder whose path is not UTF-8 is refused before the work where it would be recorded") {
    // the manifest records absolute paths: a relative --out there failed as the manifest was written, after the work,
    // exit 1 with json's type_error.316, and --resume failed the same way
    const test::CliPipeline& p = test::bad_input_pipeline();
    test::TempDir t("cwd-latin1");
    const fs::path cwd = t.path / "caf\xe9";
    fs::create_directories(cwd);
    const std::string where = "is relative to the current folder '" + (t.path / "caf").string() + "\\xe9', whose path is not valid UTF-8";
    const std::string chunk = test::tool_path("retro-chunk") + " " + p.corpus.string() + " --tokenizer " + p.tok.string() +
                              " --chunk-size 4 --seq-len 16 --quiet --out ";
    test::expect_refused(test::run_command(in_folder(cwd, chunk + "db")), {"--out: 'db' " + where, "give absolute paths"});
    test::expect_refused(test::run_command(in_folder(cwd, test::tool_path("retro-train") + " " + test::cli_train_args(p, "run") +
                                                          " --steps 1")),
                         {"--out: 'run' " + where});
    test::expect_refused(test::run_command(in_folder(cwd, test::tool_path("retro-tokenizer") + " train " + p.corpus.string() +
                                                          " --out tok --vocab-size 300 --quiet")),
                         {"--out: 'tok' " + where});
    test::write_text(t / "prompts.jsonl", "\"hello\"\n");
    test::expect_refused(test::run_command(in_folder(cwd, test::tool_path("retro-generate") + " " + p.run.string() + " --index " +
                                                          p.index.string() + " --db " + p.db.string() + " --prompts " +
                                                          (t / "prompts.jsonl").string() + " --output out.jsonl --quiet")),
                         {"--output: 'out.jsonl' " + where});
    CHECK(fs::is_empty(cwd));
    // with absolute paths the current folder is never recorded (retro-bench's children run so): the run is made
    const test::RunResult absolute = test::run_command(in_folder(cwd, chunk + (t / "db").string()));
    CHECK_MESSAGE(absolute.exit_code == 0, absolute.err);
    CHECK(fs::exists(t / "db" / "manifest.json"));
    // the commands that record no path run there
    const test::RunResult encoded = test::run_command(in_folder(cwd, "echo hello | " + test::tool_path("retro-tokenizer") +
                                                                         " encode --model " + p.tok.string()));
    CHECK_MESSAGE(encoded.exit_code == 0, encoded.err);
    const test::RunResult inspected = test::run_command(in_folder(cwd, test::tool_path("retro-chunk") + " inspect " + p.db.string()));
    CHECK_MESSAGE(inspected.exit_code == 0, inspected.err);
}

TEST_CASE("odd paths: retro-train refuses a --config that is a pipe before training (the manifest failed on it after every step)") {
    const test::CliPipeline& p = test::bad_input_pipeline();
    test::TempDir t("config-pipe");
    // (in a subshell: run_command gives the command line a standard input of its own)
    const test::RunResult r = test::run_command("( cat " + shell_quote(p.config.string()) + " | " + test::tool_path("retro-train") +
                                                " " + test::cli_train_args(p, t / "run") + " --steps 1 --config /dev/stdin )");
    test::expect_refused(r, {"--config: /dev/stdin is not a regular file (a pipe or a device)", "save the config to a file"});
    CHECK_FALSE(fs::exists(t / "run"));
}

TEST_CASE("odd paths: a run folder without its manifest (stopped before its end) is refused by retro-generate and eval, a checkpoint of it is taken") {
    // its model.safetensors is written before the manifest: a run whose manifest failed left a folder both tools read
    // as finished
    const test::CliPipeline& p = test::bad_input_pipeline();
    test::TempDir t("unfinished-run");
    const fs::path run = t / "run";
    test::copy_folder(p.run, run);
    fs::remove(run / "manifest.json");
    REQUIRE(fs::exists(run / "model.safetensors"));
    const std::string gen = " --index " + p.index.string() + " --db " + p.db.string() + " --greedy --max-tokens 3 --threads 1 --quiet hello";
    test::expect_refused(test::run_tool("retro-generate", run.string() + gen),
                         {run.string() + ": is an unfinished retro-train run (no manifest.json", "--checkpoint " + (run / "checkpoints").string()});
    const std::string eval = " --db " + p.db.string() + " --knn " + p.knn.string() + " --max-batches 1 --threads 1 --quiet";
    test::expect_refused(test::run_tool("retro-train", "eval " + run.string() + eval),
                         {run.string() + ": is an unfinished retro-train run", "--weights " + (run / "checkpoints").string()});
    const std::string checkpoint = (run / "checkpoints" / "step_00000002").string();
    const test::RunResult g = test::run_tool("retro-generate", run.string() + " --checkpoint " + checkpoint + gen);
    CHECK_MESSAGE(g.exit_code == 0, g.err);
    const test::RunResult e = test::run_tool("retro-train", "eval " + run.string() + " --weights " + checkpoint + eval);
    CHECK_MESSAGE(e.exit_code == 0, e.err);
    // a folder put together by hand (a config and weights, no tool's leftovers) is still taken
    fs::remove_all(run / "checkpoints");
    fs::remove(run / "metrics.jsonl");
    const test::RunResult by_hand = test::run_tool("retro-generate", run.string() + gen);
    CHECK_MESSAGE(by_hand.exit_code == 0, by_hand.err);
}

TEST_CASE("odd paths: an output name with no room for its temporary copy's suffix is refused before the work, not after") {
    const test::CliPipeline& p = test::bad_input_pipeline();
    test::TempDir t("long-names");
    const fs::path json_out = t / (std::string(247, 'e') + ".json");   // 252 bytes: its .tmp makes 256
    test::expect_refused(test::run_tool("retro-train", "eval --run " + p.run.string() + " --db " + p.db.string() + " --knn " +
                                                           p.knn.string() + " --json-out " + json_out.string() + " --quiet"),
                         {"its name is 252 bytes, 256 with the .tmp of the copy written first", "at most 251 bytes"});
    test::write_text(t / "prompts.jsonl", "\"hello\"\n");
    const fs::path output = t / (std::string(244, 'h') + ".jsonl");   // 250 bytes: its journal's .partial makes 258
    test::expect_refused(test::run_tool("retro-generate", p.run.string() + " --index " + p.index.string() + " --db " + p.db.string() +
                                                              " --prompts " + (t / "prompts.jsonl").string() + " --output " +
                                                              output.string() + " --max-tokens 3 --quiet"),
                         {"its name is 250 bytes, 262 with the .partial.tmp", "at most 243 bytes"});
    // nothing but the prompts is left: no report, no output, no journal
    CHECK(std::distance(fs::directory_iterator(t.path), fs::directory_iterator()) == 1);
}

TEST_CASE("odd paths: an input folder behind a link loop is named with the loop, not as missing") {
    test::TempDir t("link-loop");
    fs::create_symlink(t / "loop", t / "loop");
    test::expect_refused(test::run_tool("retro-index", (t / "loop").string() + " --out " + (t / "ix").string()),
                         {(t / "loop").string() + ": Too many levels of symbolic links"});
    test::expect_refused(test::run_tool("retro-chunk", "merge " + (t / "loop").string() + " --out " + (t / "db").string()),
                         {(t / "loop").string() + ": Too many levels of symbolic links"});
}

TEST_CASE("odd paths: a dangling link as --out, a file as the run, --output ending in '/' are named for what they are") {
    const test::CliPipeline& p = test::bad_input_pipeline();
    test::TempDir t("odd-messages");
    fs::create_symlink(t / "gone", t / "dangling");
    // (creating it said "cannot create folder: File exists")
    test::expect_refused(test::run_tool("retro-chunk", p.corpus.string() + " --tokenizer " + p.tok.string() + " --out " +
                                                           (t / "dangling").string() + " --chunk-size 4 --seq-len 16 --quiet"),
                         {(t / "dangling").string() + ": is a link to " + (t / "gone").string() + ", which does not exist"});
    test::expect_refused(test::run_tool("retro-index", p.db.string() + " --out " + (t / "dangling").string() + " --quiet"),
                         {"is a link to " + (t / "gone").string()});
    CHECK_FALSE(fs::exists(t / "gone"));
    // (it said "has no config.json")
    test::expect_refused(test::run_tool("retro-generate", (p.run / "config.json").string() + " --no-retrieval --tokenizer " +
                                                              p.tok.string() + " hello"),
                         {"config.json: is a file, not a run folder"});
    // (it said ".../new is not a folder" of a folder that is not there)
    test::write_text(t / "prompts.jsonl", "\"hello\"\n");
    test::expect_refused(test::run_tool("retro-generate", p.run.string() + " --index " + p.index.string() + " --db " + p.db.string() +
                                                              " --prompts " + (t / "prompts.jsonl").string() + " --output " +
                                                              (t / "new").string() + "/"),
                         {"new/: ends in '/', a folder's name"});
}
