// What a tool may write over or delete, found by the walkthrough audit of 2026-12-02 (session 37): --force deletes
// only a folder its tool made (never the user's files, an unfinished run of another tool, or a file named as --out),
// an --out inside another tool's folder is refused, retro-train's --resume continues only the run it was given (not a
// finished run whose checkpoints are gone, not another database or neighbours), --force refuses an --init-from it
// would delete, and eval's and plot's files never replace a run's own. Each refusal: exit 2, one line, inputs intact.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "core/fingerprint.h"
#include "test_cli_pipeline.h"
#include "test_util.h"

using namespace retro;
namespace fs = std::filesystem;

namespace {

using Pipeline = test::CliPipeline;
using test::expect_refused;
const auto& train_args = test::cli_train_args;

// the pipeline's run: 2 steps with retrieval, a checkpoint at each
const Pipeline& pipeline() {
    static Pipeline p("owner");
    static bool built = false;
    if (!built) test::cli_pipeline_build(p, 900, 16, "--knn " + p.knn.string() + " --steps 2 --checkpoint-every 1");
    built = true;
    return p;
}

// a copy of the pipeline's run as a kill after its step-1 checkpoint leaves it
void unfinished_run(const Pipeline& p, const fs::path& to) {
    test::copy_folder(p.run, to);
    fs::remove(to / "manifest.json");
    fs::remove(to / "model.safetensors");
    fs::remove_all(to / "checkpoints" / "step_00000002");
}

}  // namespace

TEST_CASE("ownership: --force deletes only a folder its tool made, an --out inside another tool's folder or naming a file is refused") {
    const Pipeline& p = pipeline();
    test::TempDir t("own-force");
    const std::string index_args = " --dim 16 --quiet --threads 1";

    // the user's own files: retro-index and retro-knn --force used to empty the folder
    const fs::path mine = t / "mine";
    fs::create_directories(mine / "sub");
    test::write_text(mine / "notes.txt", "keep me\n");
    expect_refused(test::run_tool("retro-index", p.db.string() + " --out " + mine.string() + " --force" + index_args),
                   {mine.string(), "holds files retro-index did not write (notes.txt, sub/)"});
    // without --quiet too: refused before the bow embedder's pass over the database (its progress line came first)
    expect_refused(test::run_tool("retro-index", p.db.string() + " --out " + mine.string() + " --force --dim 16 --threads 1"),
                   {mine.string(), "holds files retro-index did not write (notes.txt, sub/)"});
    expect_refused(test::run_tool("retro-knn", p.index.string() + " --db " + p.db.string() + " --out " + mine.string() +
                                                   " --force --quiet"),
                   {mine.string(), "holds files retro-knn did not write"});
    CHECK(test::read_text(mine / "notes.txt") == "keep me\n");
    CHECK(fs::is_directory(mine / "sub"));

    // an unfinished run of another tool (no manifest yet): neither cleared nor written into
    const fs::path run = t / "run";
    unfinished_run(p, run);
    expect_refused(test::run_tool("retro-index", p.db.string() + " --out " + run.string() + " --force" + index_args),
                   {run.string(), "holds an unfinished retro-train run"});
    expect_refused(test::run_tool("retro-chunk", p.corpus.string() + " --tokenizer " + p.tok.string() + " --out " +
                                                     run.string() + " --chunk-size 4 --seq-len 16 --force --quiet"),
                   {run.string(), "holds an unfinished retro-train run"});
    CHECK(fs::exists(run / "checkpoints" / "step_00000001" / "DONE"));
    CHECK(!fs::exists(run / "manifest.json"));
    const test::RunResult resumed = test::run_tool("retro-train", train_args(p, run) + " --steps 2 --resume");
    CHECK_MESSAGE(resumed.exit_code == 0, resumed.err);

    // an --out inside an input folder a tool made (that tool's --force would delete it)
    const fs::path index = t / "index";
    test::copy_folder(p.index, index);
    expect_refused(test::run_tool("retro-knn", index.string() + " --db " + p.db.string() + " --out " +
                                                   (index / "knn").string() + " --quiet"),
                   {"lies inside", "retro-index's output"});
    CHECK(!fs::exists(index / "knn"));
    // --resume into another tool's finished folder names that tool (retro-knn said "already holds the finished
    // neighbours of another job: parameters.block ..." of an index folder)
    // (before the index is read and verified: no progress line comes first, stderr is the one line)
    const test::RunResult knn_resume = test::run_tool("retro-knn", p.index.string() + " --db " + p.db.string() +
                                                                       " --out " + index.string() + " --resume");
    expect_refused(knn_resume, {index.string() + ": holds retro-index's output (manifest.json), not retro-knn's"});
    CHECK(knn_resume.err.rfind("retro-knn: error: ", 0) == 0);
    expect_refused(test::run_tool("retro-chunk", p.corpus.string() + " --tokenizer " + p.tok.string() + " --out " +
                                                     index.string() + " --chunk-size 4 --seq-len 16 --resume --quiet"),
                   {index.string() + ": holds retro-index's output (manifest.json), not retro-chunk's"});

    // a regular file named as --out
    const fs::path file = t / "afile";
    test::write_text(file, "x\n");
    expect_refused(test::run_tool("retro-index", p.db.string() + " --out " + file.string() + " --force" + index_args),
                   {file.string(), "is a file, not a folder"});
    expect_refused(test::run_tool("retro-tokenizer", "train " + p.corpus.string() + " --out " + file.string() +
                                                         " --vocab-size 300 --quiet"),
                   {file.string(), "is a file, not a folder"});
    CHECK(test::read_text(file) == "x\n");

    // what a retro-index run stopped at once leaves (parts/, a .tmp), or a merge stopped before its manifest (its
    // outputs, no state.json), is still this tool's to clear
    const fs::path early = t / "early";
    fs::create_directories(early / "parts");
    test::write_text(early / "embeddings.npy.tmp", "");
    test::write_text(early / "idf.npy", "");
    const test::RunResult cleared =
        test::run_tool("retro-index", p.db.string() + " --out " + early.string() + " --force" + index_args);
    CHECK_MESSAGE(cleared.exit_code == 0, cleared.err);
    CHECK(fs::exists(early / "manifest.json"));
    // --force replaces the tool's own files only: the user's beside them stay
    test::write_text(early / "notes.txt", "mine\n");
    const test::RunResult again =
        test::run_tool("retro-index", p.db.string() + " --out " + early.string() + " --force" + index_args);
    CHECK_MESSAGE(again.exit_code == 0, again.err);
    CHECK(test::read_text(early / "notes.txt") == "mine\n");
    // --force with --resume (Ctrl-C's "--resume" added to a --force command): --force would delete the parts kept
    expect_refused(test::run_tool("retro-index", p.db.string() + " --out " + early.string() + " --force --resume" + index_args),
                   {"--resume", "--force starts over"});
    expect_refused(test::run_tool("retro-chunk", p.corpus.string() + " --tokenizer " + p.tok.string() + " --out " +
                                                     (t / "db2").string() + " --chunk-size 4 --seq-len 16 --force --resume --quiet"),
                   {"--resume", "--force starts over"});
    CHECK(fs::exists(early / "index.faiss"));
}

TEST_CASE("ownership: retro-train --resume continues only its own run, --force refuses an --init-from it would delete") {
    const Pipeline& p = pipeline();
    test::TempDir t("own-train");

    // a finished run whose checkpoints were removed: --resume used to train a new model over it from step 0
    const fs::path finished = t / "finished";
    test::copy_folder(p.run, finished);
    fs::remove_all(finished / "checkpoints");
    const std::string model = fingerprint_file((finished / "model.safetensors").string());
    expect_refused(test::run_tool("retro-train", train_args(p, finished) + " --steps 2 --resume --seed 7"),
                   {finished.string(), "holds a finished run and no checkpoint", "--init-from"});
    CHECK(fingerprint_file((finished / "model.safetensors").string()) == model);

    // a complete run: --resume does nothing (its manifest and weights are not rewritten)
    const fs::path complete = t / "complete";
    test::copy_folder(p.run, complete);
    const std::string manifest = test::read_text(complete / "manifest.json");
    const test::RunResult again = test::run_tool("retro-train", train_args(p, complete) + " --steps 2 --resume");
    CHECK_MESSAGE(again.exit_code == 0, again.err);
    CHECK(test::read_text(complete / "manifest.json") == manifest);

    // --force would delete the checkpoint --init-from names: refused before anything is removed
    expect_refused(test::run_tool("retro-train", train_args(p, complete) + " --steps 1 --force --init-from " +
                                                     (complete / "checkpoints" / "step_00000001").string()),
                   {complete.string(), "holds an input of this run (--init-from", "which --force would delete"});
    CHECK(fs::exists(complete / "checkpoints" / "step_00000001" / "DONE"));
    CHECK(test::read_text(complete / "manifest.json") == manifest);
    // a --db and --knn kept inside the run's folder are not among the files --force deletes: the run starts over
    const fs::path beside = t / "beside";
    test::copy_folder(p.run, beside);
    test::copy_folder(p.db, beside / "db");
    test::copy_folder(p.knn, beside / "knn");
    const test::RunResult over =
        test::run_tool("retro-train", "--db " + (beside / "db").string() + " --knn " + (beside / "knn").string() +
                                          " --config " + p.config.string() + " --out " + beside.string() +
                                          " --batch-size 2 --quiet --threads 1 --no-verify --steps 1 --force");
    CHECK_MESSAGE(over.exit_code == 0, over.err);
    CHECK(fs::exists(beside / "db" / "chunks.npy"));
    CHECK(fs::exists(beside / "knn" / "neighbours.npy"));
    CHECK(!fs::exists(beside / "checkpoints" / "step_00000002"));

    // other neighbours of the same size: the checkpoint names the files it trained on (their manifest fingerprints)
    const fs::path run = t / "run", knn = t / "knn";
    unfinished_run(p, run);
    test::copy_folder(p.knn, knn);
    nlohmann::json km = nlohmann::json::parse(test::read_text(knn / "manifest.json"));
    for (auto& o : km["outputs"])
        if (o["path"] == "neighbours.npy") o["fingerprint"] = "0123456789abcdef";
    test::write_text(knn / "manifest.json", km.dump(2));
    const std::string other = "--db " + p.db.string() + " --knn " + knn.string() + " --config " + p.config.string() +
                              " --out " + run.string() + " --batch-size 2 --quiet --threads 1 --no-verify";
    expect_refused(test::run_tool("retro-train", other + " --steps 2 --resume"),
                   {"state.json", "checkpoint was made on another --knn"});
    CHECK(!fs::exists(run / "manifest.json"));

    // a damaged metrics.jsonl: the run resumes and says which steps its curve lost
    std::string metrics = test::read_text(run / "metrics.jsonl");
    metrics = "not json\n" + metrics.substr(metrics.find('\n') + 1);   // step 1's line replaced
    test::write_text(run / "metrics.jsonl", metrics);
    const test::RunResult gap =
        test::run_tool("retro-train", train_args(p, run).substr(0, train_args(p, run).find(" --quiet")) +
                                          " --threads 1 --steps 2 --resume");
    CHECK_MESSAGE(gap.exit_code == 0, gap.err);
    CHECK(gap.err.find("1 of the 1 steps the checkpoint covers have no line (1 unreadable line dropped)") !=
          std::string::npos);
    // said once: a later resume from a checkpoint past the gap (step 2's, which records it) is quiet about it
    fs::remove(run / "manifest.json");
    fs::remove(run / "model.safetensors");
    const test::RunResult later =
        test::run_tool("retro-train", train_args(p, run).substr(0, train_args(p, run).find(" --quiet")) +
                                          " --threads 1 --steps 2 --resume");
    CHECK_MESSAGE(later.exit_code == 0, later.err);
    CHECK_MESSAGE(later.err.find("have no line") == std::string::npos, later.err);
    CHECK(later.err.find("resuming from") != std::string::npos);
}

TEST_CASE("ownership: retro-train eval and plot never write over a run's files, and check their outputs before evaluating") {
    const Pipeline& p = pipeline();
    test::TempDir t("own-eval");
    const fs::path run = t / "run";
    test::copy_folder(p.run, run);
    const std::string model = fingerprint_file((run / "model.safetensors").string());
    const std::string eval = "eval --run " + run.string() + " --db " + p.db.string() + " --knn " + p.knn.string() +
                             " --batch-size 2 --max-batches 1 --no-shuffled --quiet --threads 1";
    expect_refused(test::run_tool("retro-train", eval + " --json-out " + (run / "model.safetensors").string()),
                   {"is a file of retro-train's output", "--json-out would replace it"});
    expect_refused(test::run_tool("retro-train", eval + " --token-losses " +
                                                     (run / "checkpoints" / "step_00000001" / "model.safetensors").string()),
                   {"--token-losses would replace it"});
    CHECK(fingerprint_file((run / "model.safetensors").string()) == model);
    expect_refused(test::run_tool("retro-train", eval + " --json-out " + (t / "no-such" / "e.json").string()),
                   {"e.json", "cannot be written", "is not a folder"});
    expect_refused(test::run_tool("retro-train", "plot " + run.string() + " --out " + (run / "metrics.jsonl").string()),
                   {"is a file of retro-train's output", "--out would replace it"});
    expect_refused(test::run_tool("retro-train", "plot " + run.string() + " --out " + (t / "no-such" / "c.png").string()),
                   {"c.png", "cannot be written"});
    // a file of its own beside the run's passes, and the report is printed
    const test::RunResult ok = test::run_tool("retro-train", eval + " --json-out " + (run / "eval.json").string());
    CHECK_MESSAGE(ok.exit_code == 0, ok.err);
    CHECK(ok.out.find("gain") != std::string::npos);
    CHECK(nlohmann::json::parse(test::read_text(run / "eval.json")).is_object());
}

TEST_CASE("ownership: the audit's messages - an unfinished run to eval, an optimizer file to --init-from, an empty --train-only, a device as the corpus") {
    const Pipeline& p = pipeline();
    test::TempDir t("own-msg");
    const fs::path run = t / "run";
    unfinished_run(p, run);
    const std::string eval = " --db " + p.db.string() + " --knn " + p.knn.string() +
                             " --batch-size 2 --max-batches 1 --no-shuffled --quiet --threads 1";
    expect_refused(test::run_tool("retro-train", "eval --run " + run.string() + eval),
                   {run.string(), "has no model.safetensors yet (an unfinished run)", "--weights"});
    // ... and a checkpoint folder as --weights evaluates it
    const test::RunResult ck = test::run_tool(
        "retro-train", "eval --run " + run.string() + " --weights " + (run / "checkpoints" / "step_00000001").string() + eval);
    CHECK_MESSAGE(ck.exit_code == 0, ck.err);
    expect_refused(test::run_tool("retro-train", "eval --run " + p.db.string() + eval), {"is not a retro-train run"});
    expect_refused(test::run_tool("retro-train", train_args(p, t / "fit") + " --steps 1 --init-from " +
                                                     (p.run / "checkpoints" / "step_00000001" / "optimizer.safetensors").string()),
                   {"optimizer state", "not model weights"});
    expect_refused(test::run_tool("retro-train", train_args(p, t / "fit") + " --steps 1 --train-only ''"),
                   {"--train-only", "names nothing (give a comma list of cca, encoder, copy, decoder)"});
    expect_refused(test::run_tool("retro-tokenizer", "train /dev/null --out " + (t / "tok").string() + " --quiet"),
                   {"/dev/null", "is not a regular file or a folder"});
    CHECK(!fs::exists(t / "fit"));
    CHECK(!fs::exists(t / "tok"));
}
