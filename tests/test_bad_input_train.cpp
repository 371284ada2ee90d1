// Bad input to retro-train (see test_bad_input_cli.cpp): optimizer options, divergence and checkpoint state, the
// folders it writes into and keeps, its validation, plot and eval inputs, and the messages that name what is wrong.
#include <sys/stat.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
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
using test::copy_folder;
using test::expect_refused;
const auto& train_args = test::cli_train_args;
const auto& pipeline = test::bad_input_pipeline;   // (the pipeline's run: 2 steps with retrieval, a checkpoint at each)

}  // namespace

TEST_CASE("bad input: retro-train refuses NaN and out-of-range optimizer options, stops on divergence, checks its checkpoint state") {
    const Pipeline& p = pipeline();
    test::TempDir t("badtrain");
    const fs::path r = t / "r";
    for (const auto& [flag, value] : std::vector<std::pair<std::string, std::string>>{
             {"--lr", "nan"}, {"--lr", "inf"}, {"--weight-decay", "nan"}, {"--beta1", "1"}, {"--beta2", "-1"},
             {"--eps", "0"}, {"--clip", "-1"}, {"--min-lr-ratio", "2"}, {"--val-every", "-1"},
             {"--checkpoint-every", "-3"},
             // NaN passed CLI11's Range / PositiveNumber checks: trained as if 0, the state's null unreadable on --resume
             {"--retrieval-dropout", "nan"}, {"--oracle-neighbours", "NaN"}, {"--val-fraction", "nan"},
             {"--retrieval-lr-scale", "nan"}, {"--grad-accum", "99999999999"},
             {"--batch-size", "100000"}}) {   // (named first: before, "--grad-accum: x --batch-size is a step of 1 x 100000")
        CAPTURE(flag);
        expect_refused(test::run_tool("retro-train", train_args(p, r) + " --steps 1 " + flag + " " + value), {flag});
        CHECK(!fs::exists(r / "manifest.json"));
    }

    expect_refused(test::run_tool("retro-train", train_args(p, r) + " --steps 1 --resume --force"), {"--resume and --force: contradict each other"});
    // a folder that is not there is named with its option (it said "nosuch: no such folder")
    expect_refused(test::run_tool("retro-train", train_args(p, r) + " --steps 1 --knn " + (t / "nosuch").string()),
                   {"--knn: " + (t / "nosuch").string() + ": no such folder"});
    expect_refused(test::run_tool("retro-knn", p.db.string() + " --db " + p.db.string() + " --out " + (t / "k").string()),
                   {"was written by retro-chunk, not retro-index", "(fix: pass the index folder retro-index --out wrote"});
    // an empty value (a script's unset variable) was taken as the option left out: a run from scratch, exit 0
    expect_refused(test::run_tool("retro-train", train_args(p, r) + " --steps 1 --init-from ''"), {"--init-from: is empty"});
    expect_refused(test::run_tool("retro-generate", p.run.string() + " --index " + p.index.string() + " --checkpoint '' x"),
                   {"--checkpoint: is empty"});
    expect_refused(test::run_tool("retro-bench", "generate --json ''"), {"--json: is empty"});
    // a number list given "": read as 0 ("each alpha must be in (0, 1], got 0")
    expect_refused(test::run_tool("retro-train", "eval --run " + p.run.string() + " --db " + p.db.string() + " --alphas ''"),
                   {"--alphas: is empty"});
    // "--" as a value: `--output --` wrote a file named "--"
    expect_refused(test::run_tool("retro-bench", "generate --json --"), {"--json: is \"--\" (the end of the options), not a value"});
    expect_refused(test::run_tool("retro-generate", "'' --index " + p.index.string() + " x"), {"run: is empty (fix: give a value)"});
    expect_refused(test::run_tool("retro-generate", p.run.string() + " --index " + p.index.string() + " --prompts " + p.db.string() +
                                                        " --output " + (t / "o.jsonl").string()),
                   {"is a folder, not a prompts file"});
    // retro-knn's count given to retro-train's --neighbours (the old name of --knn): "2/manifest.json: missing"
    {
        const auto count = test::run_tool("retro-train", "--db " + p.db.string() + " --neighbours 2 --config " + p.config.string() +
                                                             " --out " + r.string() + " --steps 1");
        CHECK(count.exit_code == 2);   // (after the deprecation warning's line)
        CHECK(count.err.find("--knn: '2' is a number, not a neighbours folder") != std::string::npos);
    }
    expect_refused(test::run_tool("retro-knn", p.index.string() + " --db " + p.db.string() + " --out " + (t / "k").string() +
                                                   " --neighbours 99999999999"),
                   {"--neighbours: '99999999999' is not a value it takes"});
    CHECK(!fs::exists(r / "manifest.json"));
    expect_refused(test::run_tool("retro-generate", p.run.string() + " --index " + p.index.string() + " --temperature nan x"),
                   {"--temperature: 'nan' is not a finite number"});

    // a learning rate that overflows the weights: the step's metrics line, then one line, and no model
    expect_refused(test::run_tool("retro-train", train_args(p, r) + " --steps 3 --warmup 0 --clip 0 --lr 1e30 --weight-decay 0"),
                   {r.string(), "training diverged"});
    CHECK(!fs::exists(r / "manifest.json"));
    CHECK(!fs::exists(r / "model.safetensors"));
    {   // every metrics line is JSON (the diverged step's loss was written "-nan", which no JSON reader takes)
        std::ifstream m(r / "metrics.jsonl");
        std::int64_t lines = 0;
        for (std::string line; std::getline(m, line); lines++)
            CHECK_MESSAGE(!nlohmann::json::parse(line, nullptr, false).is_discarded(), line);
        CHECK(lines >= 1);
    }
    // a weight decay that zeroes or flips the weights at the learning rate given: refused before any step (it
    // diverged steps later, its advice naming --lr alone)
    expect_refused(test::run_tool("retro-train", train_args(p, t / "wd") + " --steps 3 --weight-decay 1e20"),
                   {"--weight-decay: 1e+20 x the peak learning rate", "must stay above 0"});
    expect_refused(test::run_tool("retro-train", train_args(p, t / "wd") + " --steps 3 --lr 0.5 --retrieval-lr-scale 4 --weight-decay 0.5"),
                   {"--weight-decay: 0.5 x the peak learning rate 2 is 1"});
    expect_refused(test::run_tool("retro-train", train_args(p, t / "wd") + " --steps 3 --retrieval-lr-scale 1e400"),
                   {"--retrieval-lr-scale"});

    // a checkpoint state a run cannot reach, or one past --steps
    const fs::path run = t / "run";
    copy_folder(p.run, run);
    fs::remove(run / "manifest.json");
    fs::remove(run / "model.safetensors");
    fs::remove_all(run / "checkpoints" / "step_00000002");   // as if killed after the step-1 checkpoint
    const fs::path state = run / "checkpoints" / "step_00000001" / "state.json";
    REQUIRE(fs::exists(state));
    const std::string good = test::read_text(state);
    for (const auto& [key, value] : std::vector<std::pair<std::string, nlohmann::json>>{
             {"epoch", -1}, {"position", -5}, {"position", 1000000}, {"step", "x"}, {"step", 0}}) {
        CAPTURE(key);
        nlohmann::json st = nlohmann::json::parse(good);
        st[key] = value;
        test::write_text(state, st.dump());
        expect_refused(test::run_tool("retro-train", train_args(p, run) + " --steps 2 --resume"), {state.string()});
        CHECK(!fs::exists(run / "manifest.json"));
    }
    test::write_text(state, good);
    const fs::path later = run / "checkpoints" / "step_00000002";
    copy_folder(p.run / "checkpoints" / "step_00000002", later);
    expect_refused(test::run_tool("retro-train", train_args(p, run) + " --steps 1 --resume"),
                   {(later / "state.json").string(), "past --steps 1"});
    CHECK(!fs::exists(run / "manifest.json"));
    const test::RunResult resumed = test::run_tool("retro-train", train_args(p, run) + " --steps 2 --resume");
    CHECK_MESSAGE(resumed.exit_code == 0, resumed.err);
}

TEST_CASE("bad input: a run refused after its --out was made leaves nothing that blocks the corrected rerun") {
    const Pipeline& p = pipeline();
    test::TempDir t("badleft");
    const fs::path ix = t / "ix";
    expect_refused(test::run_tool("retro-index", p.db.string() + " --out " + ix.string() + " --dim 0 --quiet"), {"--dim"});
    CHECK(!fs::exists(ix));
    CHECK(test::run_tool("retro-index", p.db.string() + " --out " + ix.string() + " --dim 8 --quiet").exit_code == 0);
    expect_refused(test::run_tool("retro-index", p.db.string() + " --out " + (t / "idmap").string() +
                                                     " --index IDMap,Flat --dim 8 --quiet"),
                   {"--index", "IDMap"});
    CHECK(!fs::exists(t / "idmap"));
    expect_refused(test::run_tool("retro-index", p.db.string() + " --out " + (t / "bm").string() +
                                                     " --kind bm25 --bm25-k1 nan --quiet"),
                   {"--bm25-k1", "nan"});
    // finite but overflowing: every score was inf (null in JSON, inf in distances.npy)
    expect_refused(test::run_tool("retro-index", p.db.string() + " --out " + (t / "bm").string() +
                                                     " --kind bm25 --bm25-k1 1e308 --quiet"),
                   {"--bm25-k1: 1e+308 is not a number from 0 to 1,000,000"});

    const fs::path empty = t / "empty.jsonl", db = t / "db";
    test::write_text(empty, "");
    expect_refused(test::run_tool("retro-chunk", empty.string() + " --tokenizer " + p.tok.string() + " --out " + db.string() +
                                                     " --chunk-size 4 --seq-len 16 --quiet"),
                   {"no non-empty document"});
    CHECK(!fs::exists(db));

    nlohmann::json c = nlohmann::json::parse(test::read_text(p.config));
    c["num_tokens"] = 64;   // below the database's 300 pieces: refused before the run folder is touched
    const fs::path small = t / "small.json", r = t / "r";
    test::write_text(small, c.dump());
    expect_refused(test::run_tool("retro-train", "--db " + p.db.string() + " --knn " + p.knn.string() + " --config " +
                                                     small.string() + " --out " + r.string() + " --steps 1 --quiet"),
                   {small.string(), "num_tokens"});
    CHECK(!fs::exists(r / "config.json"));

    // an --out the file system refuses: exit 2 and the path first, not an internal error
    const fs::path file = t / "afile";
    test::write_text(file, "x");
    expect_refused(test::run_tool("retro-tokenizer", "train " + p.corpus.string() + " --out " + file.string() +
                                                         " --vocab-size 300 --quiet"),
                   {"retro-tokenizer: error: " + file.string() + ": "});
}

TEST_CASE("bad input: retro-train keeps to its own folders - the user's files, another run's checkpoints, its orphans") {
    const Pipeline& p = pipeline();
    test::TempDir t("trainfolders");

    // a folder no tool made that holds someone else's model (a downloaded model's config.json and model.safetensors):
    // refused with and without --force (--force replaced both, as advised)
    const fs::path mine = t / "mine";
    fs::create_directories(mine);
    test::write_text(mine / "config.json", "{\"my\": \"own config\"}");
    test::write_text(mine / "model.safetensors", "precious");
    for (const std::string extra : {"", " --force"}) {
        CAPTURE(extra);
        expect_refused(test::run_tool("retro-train", train_args(p, mine) + " --steps 1" + extra),
                       {mine.string(), "holds a model.safetensors no retro-train run claims"});
    }
    fs::remove(mine / "model.safetensors");
    for (const std::string extra : {"", " --force"})
        expect_refused(test::run_tool("retro-train", train_args(p, mine) + " --steps 1" + extra),
                       {mine.string(), "holds a config.json that is not --config's"});
    CHECK(test::read_text(mine / "config.json") == "{\"my\": \"own config\"}");
    // taken: an empty folder, one holding a log written before the run (`| tee run/train.log`, sbatch --output), and
    // one a run of an earlier version left when killed in its first step (its own config.json alone)
    fs::create_directories(t / "empty");
    CHECK(test::run_tool("retro-train", train_args(p, t / "empty") + " --steps 1").exit_code == 0);
    fs::create_directories(t / "logged");
    test::write_text(t / "logged" / "train.log", "started\n");
    CHECK(test::run_tool("retro-train", train_args(p, t / "logged") + " --steps 1").exit_code == 0);
    CHECK(test::read_text(t / "logged" / "train.log") == "started\n");
    fs::create_directories(t / "old");
    fs::copy_file(p.config, t / "old" / "config.json");
    CHECK(test::run_tool("retro-train", train_args(p, t / "old") + " --steps 1").exit_code == 0);

    // --out inside another run's checkpoints/ (a checkpoint, or the folder of them): refused, with or without --force
    const fs::path other = t / "other";
    copy_folder(p.run, other);
    const fs::path step1 = other / "checkpoints" / "step_00000001";
    REQUIRE(fs::exists(step1 / "DONE"));
    const std::string before = test::read_text(step1 / "model.safetensors");
    for (const fs::path& inside : {step1, other / "checkpoints", other / "checkpoints" / "new"})
        for (const std::string extra : {"", " --force"}) {
            CAPTURE(inside);
            CAPTURE(extra);
            expect_refused(test::run_tool("retro-train", train_args(p, inside) + " --steps 1" + extra),
                           {inside.string(), "lies inside " + (other / "checkpoints").string() + ", which retro-train keeps for itself"});
        }
    CHECK(test::read_text(step1 / "model.safetensors") == before);
    CHECK(!fs::exists(other / "checkpoints" / "new"));

    // a checkpoint folder a kill left without DONE (cut while written, or while pruned): removed at the next save
    const fs::path run = t / "run";
    REQUIRE(test::run_tool("retro-train", train_args(p, run) + " --steps 2 --checkpoint-every 1").exit_code == 0);
    fs::create_directories(run / "checkpoints" / "step_00000001");
    fs::remove(run / "checkpoints" / "step_00000001" / "DONE");   // (pruning removes DONE first)
    fs::create_directories(run / "checkpoints" / "step_00000003");
    test::write_text(run / "checkpoints" / "step_00000003" / "model.safetensors.tmp", "cut");
    REQUIRE(test::run_tool("retro-train", train_args(p, run) + " --steps 4 --checkpoint-every 1 --keep-checkpoints 2 --resume").exit_code == 0);
    std::vector<std::string> left;
    for (const auto& e : fs::directory_iterator(run / "checkpoints")) left.push_back(e.path().filename().string());
    std::sort(left.begin(), left.end());
    CHECK(left == std::vector<std::string>{"step_00000003", "step_00000004"});
    CHECK(fs::exists(run / "checkpoints" / "step_00000003" / "DONE"));
    CHECK(!fs::exists(run / "checkpoints" / "step_00000003" / "model.safetensors.tmp"));
}

TEST_CASE("bad input: retro-train's --val-batches past the split - plot of edited metrics - eval of an edited checkpoint") {
    const Pipeline& p = pipeline();
    test::TempDir t("trainmisc");
    // --val-batches is bounded by the batches the validation split holds (1e8 sized 1.6 GB of slots at the run's end;
    // the address-space limit makes that a failure, where AddressSanitizer allows one: below, the same loss still)
    const fs::path vb = t / "vb";
    const std::string limit = test::kAddressSanitizer ? "" : "ulimit -v 2000000; ";
    if (test::kAddressSanitizer) MESSAGE("no ulimit -v for the --val-batches 1e8 run: AddressSanitizer cannot start under it");
    const auto big = test::run_command("sh -c " + retro::shell_quote(limit + "exec " + test::tool_path("retro-train") + " " +
                                                                      train_args(p, vb) + " --steps 1 --val-batches 100000000"));
    CHECK_MESSAGE(big.exit_code == 0, big.err);
    const fs::path ref = t / "ref";
    REQUIRE(test::run_tool("retro-train", train_args(p, ref) + " --steps 1 --val-batches 1000").exit_code == 0);
    auto val_loss = [](const fs::path& run) {
        std::ifstream m(run / "metrics.jsonl");
        std::string line, last;
        while (std::getline(m, line)) last = line;
        return nlohmann::json::parse(last).value("val_loss", -1.0);
    };
    CHECK(val_loss(vb) == val_loss(ref));   // the batches the split holds: the same figure

    // plot: lines whose step or loss is not a number are left out and counted (an internal error before)
    const fs::path pl = t / "pl";
    fs::create_directories(pl);
    test::write_text(pl / "metrics.jsonl", "{\"step\": 1, \"loss\": 5}\n{\"step\": \"2\", \"loss\": 4}\n{\"step\": 3, \"loss\": null}\n"
                                           "{\"step\": 4, \"loss\": 3, \"val_loss\": \"x\"}\n");
    const auto plotted = test::run_tool("retro-train", "plot " + pl.string());
    if (plotted.err.find("gnuplot: not found") == std::string::npos) {
        CHECK_MESSAGE(plotted.exit_code == 0, plotted.err);
        CHECK(plotted.err.find("2 lines without a numeric step and loss left out (line 2 first)") != std::string::npos);
    }

    // eval --weights of a checkpoint (its folder or its file): held to its state.json's fingerprints, as
    // retro-generate --checkpoint is (a changed byte was evaluated without a word)
    const fs::path run = t / "run";
    copy_folder(p.run, run);
    const fs::path ck = run / "checkpoints" / "step_00000002";
    std::string bytes = test::read_text(ck / "model.safetensors");
    bytes[bytes.size() - 3] ^= 0x10;
    test::write_text(ck / "model.safetensors", bytes);
    for (const fs::path& w : {ck, ck / "model.safetensors"}) {
        CAPTURE(w);
        expect_refused(test::run_tool("retro-train", "eval --run " + run.string() + " --db " + p.db.string() + " --knn " + p.knn.string() +
                                                         " --weights " + w.string() + " --quiet"),
                       {(ck / "model.safetensors").string(), "has changed since retro-train wrote it"});
    }
    const auto taken = test::run_tool("retro-train", "eval --run " + run.string() + " --db " + p.db.string() + " --knn " + p.knn.string() +
                                                         " --weights " + ck.string() + " --quiet --no-verify");
    CHECK_MESSAGE(taken.exit_code == 0, taken.err);

    // eval's val split of another database than the run's: said (its documents are held out by their own positions)
    const fs::path other_db = t / "other-db";
    fs::create_directories(t / "fewer");
    for (const auto& e : fs::directory_iterator(p.corpus))
        if (e.path().filename().string() != "d0.txt") fs::copy_file(e.path(), t / "fewer" / e.path().filename());
    REQUIRE(test::run_tool("retro-chunk", (t / "fewer").string() + " --tokenizer " + p.tok.string() + " --out " + other_db.string() +
                                              " --chunk-size 4 --seq-len 16 --quiet").exit_code == 0);
    const std::string eval_other = "eval --run " + p.run.string() + " --db " + other_db.string() + " --max-batches 1";
    const auto warned = test::run_tool("retro-train", eval_other);
    CHECK_MESSAGE(warned.exit_code == 0, warned.err);
    CHECK(warned.err.find("is not the database " + p.run.string() + " trained on") != std::string::npos);
    const auto all = test::run_tool("retro-train", eval_other + " --split all");
    CHECK(all.exit_code == 0);
    CHECK(all.err.find("is not the database") == std::string::npos);
    const auto same = test::run_tool("retro-train", "eval --run " + p.run.string() + " --db " + p.db.string() + " --max-batches 1");
    CHECK(same.exit_code == 0);
    CHECK(same.err.find("is not the database") == std::string::npos);
}

TEST_CASE("bad input: retro-train names what is wrong - a group twice, a device, a database as --knn, the default CCA layers") {
    const Pipeline& p = pipeline();
    test::TempDir t("trainmsg");
    expect_refused(test::run_tool("retro-train", train_args(p, t / "a") + " --steps 1 --train-only cca,cca"),
                   {"--train-only: lists cca twice"});
    expect_refused(test::run_tool("retro-train", train_args(p, t / "b") + " --steps 1 --init-from /dev/null"),
                   {"/dev/null: is neither a file nor a folder"});
    // a database given as --knn: named as such ("db/neighbours.npy: cannot open" before)
    expect_refused(test::run_tool("retro-train", "--db " + p.db.string() + " --knn " + p.db.string() + " --config " +
                                                     p.config.string() + " --out " + (t / "c").string() + " --batch-size 2 --steps 1 --quiet"),
                   {"--knn: " + p.db.string() + " holds retro-chunk's output, not retro-knn's neighbours"});
    // a config without dec_cross_attn_layers takes RETRO-pytorch's [1, 3, 6, 9]: said when that is what does not fit
    nlohmann::json cfg = nlohmann::json::parse(test::read_text(p.config));
    cfg.erase("dec_cross_attn_layers");
    test::write_text(t / "nolayers.json", cfg.dump());
    expect_refused(test::run_tool("retro-train", "--db " + p.db.string() + " --knn " + p.knn.string() + " --config " +
                                                     (t / "nolayers.json").string() + " --out " + (t / "d").string() + " --steps 1 --quiet"),
                   {"names layer 6 but dec_depth is 3 (RETRO-pytorch's default [1, 3, 6, 9]"});
    // --no-fused-attention on the CPU: taken, and said to do nothing there
    const auto fused = test::run_tool("retro-train", train_args(p, t / "e") + " --steps 1 --no-fused-attention --quiet");
    CHECK(fused.exit_code == 0);
    const auto fused_loud = test::run_tool("retro-train", "--db " + p.db.string() + " --knn " + p.knn.string() + " --config " +
                                                              p.config.string() + " --out " + (t / "f").string() +
                                                              " --batch-size 2 --threads 1 --steps 1 --no-fused-attention");
    CHECK(fused_loud.exit_code == 0);
    CHECK(fused_loud.err.find("--no-fused-attention has no effect on the CPU") != std::string::npos);
}

TEST_CASE("retro-train's step lines on stderr say the run's steps and the time left - metrics.jsonl keeps its fields") {
    const Pipeline& p = pipeline();
    test::TempDir t("train-left");
    std::string args = test::cli_train_args(p, t / "run") + " --steps 3";
    args.replace(args.find(" --quiet"), 8, "");
    const test::RunResult r = test::run_tool("retro-train", args);
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    int shown = 0;
    std::istringstream err(r.err);
    for (std::string line; std::getline(err, line);) {
        if (line.rfind("{\"step\": ", 0) != 0) continue;
        const nlohmann::json j = nlohmann::json::parse(line);   // still one JSON object
        CHECK(j.at("of") == 3);
        CHECK(j.at("left").get<std::string>().back() == 's');   // format_seconds: "0s", "3m05s"
        if (j.at("step") == 3) CHECK(j.at("left") == "0s");
        ++shown;
    }
    CHECK(shown == 3);
    const std::string metrics = test::read_text(t / "run/metrics.jsonl");
    CHECK(metrics.find("\"of\"") == std::string::npos);
    CHECK(metrics.find("\"left\"") == std::string::npos);
}

TEST_CASE("bad input: eval without --db takes the database the run records - a run of config.json alone asks for it") {
    // --db was required (a helper's docs walk, session 67: retro-generate, retro-knn and retro-index query take theirs
    // from the folders' records)
    const Pipeline& p = pipeline();
    const std::string rest = " --knn " + p.knn.string() + " --max-batches 1 --batch-size 2 --json --threads 1 --quiet";
    const test::RunResult given = test::run_tool("retro-train", "eval " + p.run.string() + " --db " + p.db.string() + rest);
    REQUIRE_MESSAGE(given.exit_code == 0, given.err);
    const test::RunResult recorded = test::run_tool("retro-train", "eval " + p.run.string() + rest);
    CHECK_MESSAGE(recorded.exit_code == 0, recorded.err);
    CHECK(recorded.out == given.out);
    // outside weights in a folder of config.json alone: nothing records a database
    test::TempDir t("evaldb");
    fs::copy_file(p.run / "config.json", t / "config.json");
    expect_refused(test::run_tool("retro-train", "eval " + t.path.string() + " --weights " + (p.run / "model.safetensors").string() + rest),
                   {"--db: is required: " + t.path.string() + " has no manifest.json to take the database from (fix: pass --db)"});
    expect_refused(test::run_tool("retro-train", "eval " + (t / "none").string() + rest), {"none: is not a folder"});
}
