// Killed runs (see test_bad_input_cli.cpp): a kill mid-removal resumes to the straight run's arrays, a failed append
// names the file, a second run into a folder another process is writing is refused.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
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

TEST_CASE("killed runs: retro-knn killed while it removed its parts resumes to the straight run's arrays") {
    const Pipeline& p = pipeline();
    test::TempDir t("killknn");
    const fs::path out = t / "knn";
    const std::string cmd = p.index.string() + " --db " + p.db.string() + " --out " + out.string() + " --block 16 --quiet";
    REQUIRE(test::run_tool("retro-knn", cmd).exit_code == 0);
    const std::string straight_nb = test::read_text(out / "neighbours.npy"), straight_ds = test::read_text(out / "distances.npy");
    // the end of a run: state.json and most parts removed, the manifest not written yet; block 0 kept its neighbours
    // part but lost its distances part (the pair is removed one file at a time)
    fs::remove(out / "manifest.json");
    fs::create_directories(out / "parts");
    NpyArray nb((out / "neighbours.npy").string());
    const std::int64_t k = nb.dim(1);
    npy_save((out / "parts" / "neighbours.0.npy").string(), {16, k}, nb.data<std::int64_t>());
    const test::RunResult resumed = test::run_tool("retro-knn", cmd + " --resume");
    CHECK_MESSAGE(resumed.exit_code == 0, resumed.err);
    CHECK(fs::exists(out / "manifest.json"));
    CHECK(test::read_text(out / "neighbours.npy") == straight_nb);
    CHECK(test::read_text(out / "distances.npy") == straight_ds);
    CHECK(!fs::exists(out / "parts"));
}

TEST_CASE("killed runs: an append that fails (a full disk) is an error naming the file, not a lost line") {
    if (!fs::exists("/dev/full")) {
        MESSAGE("skipped: no /dev/full");
        return;
    }
    CHECK_THROWS_WITH_AS(append_to_file("/dev/full", "{\"step\": 1}\n"),
                         doctest::Contains("/dev/full: write failed: No space left on device"), UserError);
    test::TempDir t("append");
    append_to_file((t / "m.jsonl").string(), "a\n");
    append_to_file((t / "m.jsonl").string(), "b\n");
    CHECK(test::read_text(t / "m.jsonl") == "a\nb\n");
}

TEST_CASE("killed runs: a second run into a folder another process is writing is refused, the folder untouched") {
    const Pipeline& p = pipeline();
    test::TempDir t("lock");
    const fs::path db = t / "db", run = t / "run";
    copy_folder(p.db, db);
    copy_folder(p.run, run);
    // this test process plays the first run: it holds both folders' locks (as a tool does for its whole run)
    output_folder_lock(db.string(), "retro-chunk");
    output_folder_lock(run.string() + "/", "retro-train");   // the same folder however it is spelled
    CHECK_NOTHROW(output_folder_lock(db.string(), "retro-chunk"));   // taken again by its holder: at once
    const std::string before = test::read_text(run / "metrics.jsonl");
    expect_refused(test::run_tool("retro-chunk", p.corpus.string() + " --tokenizer " + p.tok.string() + " --out " +
                                                     db.string() + " --chunk-size 4 --seq-len 16 --quiet --force"),
                   {db.string(), "another run is writing into it (retro-chunk, pid "});
    CHECK(fs::exists(db / "manifest.json"));
    {   // the shards of `--shard auto` given one --out: told to give each rank its own (a helper's pass, session 54)
        test::ScopedEnv rank("OMPI_COMM_WORLD_RANK", "1"), size("OMPI_COMM_WORLD_SIZE", "2");
        expect_refused(test::run_tool("retro-chunk", p.corpus.string() + " --tokenizer " + p.tok.string() + " --out " +
                                                         db.string() + " --chunk-size 4 --seq-len 16 --quiet --force --shard auto"),
                       {"another run is writing into it", "give each of the 2 ranks its own --out, expanded by each rank (e.g. "
                                                          "mpirun ... bash -c 'retro-chunk ... --out " + db.string() +
                                                              ".$OMPI_COMM_WORLD_RANK'), then join them with retro-chunk merge"});
    }
    expect_refused(test::run_tool("retro-train", train_args(p, run) + " --steps 3 --resume"),
                   {run.string(), "another run is writing into it (retro-train, pid "});
    expect_refused(test::run_tool("retro-train", train_args(p, run) + " --steps 3 --force --seed 7"),
                   {"another run is writing into it"});
    CHECK(test::read_text(run / "metrics.jsonl") == before);
    CHECK(fs::exists(run / "manifest.json"));
    // a folder not made yet, named with a trailing separator by its holder: the same folder
    output_folder_lock((t / "fresh").string() + "/", "retro-chunk");
    expect_refused(test::run_tool("retro-chunk", p.corpus.string() + " --tokenizer " + p.tok.string() + " --out " +
                                                     (t / "fresh").string() + " --chunk-size 4 --seq-len 16 --quiet"),
                   {"another run is writing into it"});
    // another folder is free
    CHECK(test::run_tool("retro-train", train_args(p, t / "run2") + " --steps 1").exit_code == 0);
}

// A helper's kill soak (session 68): a --force stopped while it cleared a finished folder left its manifest.json and
// not all of its outputs (removed last, or in directory order), and --resume said "already complete". The manifest now
// goes first; a finished folder missing an output it records is refused by --resume, naming the file.
TEST_CASE("killed runs: --resume of a finished folder that lost an output names the file, not already complete") {
    const Pipeline& p = pipeline();
    test::TempDir t("killforce");
    struct Case {
        std::string tool, args, output;
        fs::path from;
    };
    const std::vector<Case> cases = {
        {"retro-chunk", p.corpus.string() + " --tokenizer " + p.tok.string() + " --chunk-size 4 --seq-len 16 --quiet",
         "chunks.npy", p.db},
        {"retro-index", p.db.string() + " --dim 16 --quiet", "index.faiss", p.index},
        {"retro-knn", p.index.string() + " --db " + p.db.string() + " --quiet", "neighbours.npy", p.knn},
    };
    for (const Case& c : cases) {
        CAPTURE(c.tool);
        const fs::path out = t / (c.tool + "-out");
        copy_folder(c.from, out);
        const std::string cmd = c.args + " --out " + out.string() + " --resume";
        const test::RunResult whole = test::run_tool(c.tool, cmd);   // the copy is whole: nothing to do
        CHECK_MESSAGE(whole.exit_code == 0, whole.err);
        fs::remove(out / c.output);
        expect_refused(test::run_tool(c.tool, cmd),
                       {c.output + ": missing, though ", "manifest.json records it: the folder is not whole",
                        "(fix: make it again with " + c.tool});
        CHECK_FALSE(fs::exists(out / c.output));
    }
    // retro-tokenizer's --resume trains a folder without its tok.model again (it is complete only with both files)
    copy_folder(p.tok, t / "tok");
    fs::remove(t / "tok" / "tok.model");
    const test::RunResult tok = test::run_tool("retro-tokenizer", "train " + p.corpus.string() + " --vocab-size 300 --quiet --out " +
                                                                      (t / "tok").string() + " --resume");
    CHECK_MESSAGE(tok.exit_code == 0, tok.err);
    CHECK(fs::exists(t / "tok" / "tok.model"));
}

// The kill soak (session 68): retro-tokenizer killed between its tok.model and its manifest left a whole model that no
// manifest recorded, and retro-chunk took it. Its state.json now marks the folder from before the old manifest goes
// until the new one is written (text/tokenizer_folder.h).
TEST_CASE("killed runs: a tok.model whose training stopped before its manifest is refused by its readers - --resume finishes it") {
    const Pipeline& p = pipeline();
    test::TempDir t("killtok");
    const fs::path tok = t / "tok", db = t / "db";
    copy_folder(p.tok, tok);
    const std::string model = test::read_text(tok / "tok.model");
    fs::remove(tok / "manifest.json");
    test::write_text(tok / "state.json", nlohmann::json{{"tool", "retro-tokenizer"}, {"run", "a training"}}.dump());
    const std::string chunk = p.corpus.string() + " --tokenizer " + tok.string() + " --out " + db.string() +
                              " --chunk-size 4 --seq-len 16 --quiet";
    expect_refused(test::run_tool("retro-chunk", chunk),
                   {(tok / "tok.model").string() + ": is the model of a retro-tokenizer training stopped before its end",
                    "(fix: finish it: run the same retro-tokenizer train command again with --resume)"});
    CHECK_FALSE(fs::exists(db));
    expect_refused(test::run_tool("retro-tokenizer", "encode --model " + tok.string(), "kato rimen\n"),
                   {"training stopped before its end"});
    // a training writing it now (this test process plays it: it holds the folder's lock, in a copy)
    const fs::path live = t / "live";
    copy_folder(tok, live);
    output_folder_lock(live.string(), "retro-tokenizer");
    expect_refused(test::run_tool("retro-tokenizer", "encode --model " + (live / "tok.model").string(), "kato\n"),
                   {(live / "tok.model").string() + ": is being written: a retro-tokenizer training is replacing it now "
                                                    "(retro-tokenizer, pid ",
                    "(fix: wait for it to end)"});
    // the training's own command names it, and --resume trains it again: the same model, its manifest, no mark
    const std::string train = "train " + p.corpus.string() + " --out " + tok.string() + " --vocab-size 300 --quiet";
    expect_refused(test::run_tool("retro-tokenizer", train),
                   {"holds a tok.model without its manifest.json: a training stopped as it wrote them (its state.json marks it)",
                    "--resume or --force"});
    const test::RunResult resumed = test::run_tool("retro-tokenizer", train + " --resume");
    REQUIRE_MESSAGE(resumed.exit_code == 0, resumed.err);
    CHECK(fs::exists(tok / "manifest.json"));
    CHECK_FALSE(fs::exists(tok / "state.json"));
    CHECK(test::read_text(tok / "tok.model") == model);
    const test::RunResult chunked = test::run_tool("retro-chunk", chunk);
    CHECK_MESSAGE(chunked.exit_code == 0, chunked.err);
    // killed after the manifest and before the mark's removal: finished (readers take it), and --resume removes the mark
    test::write_text(tok / "state.json", nlohmann::json{{"tool", "retro-tokenizer"}, {"run", "a training"}}.dump());
    const test::RunResult read = test::run_tool("retro-tokenizer", "encode --model " + tok.string(), "kato rimen\n");
    CHECK_MESSAGE(read.exit_code == 0, read.err);
    const test::RunResult kept = test::run_tool("retro-tokenizer", train + " --resume");
    CHECK_MESSAGE(kept.exit_code == 0, kept.err);
    CHECK_FALSE(fs::exists(tok / "state.json"));
    // a tok.model without a manifest and without the mark (made by hand, spm_train's) is still taken
    fs::remove(tok / "manifest.json");
    const test::RunResult by_hand = test::run_tool("retro-tokenizer", "encode --model " + tok.string(), "kato rimen\n");
    CHECK_MESSAGE(by_hand.exit_code == 0, by_hand.err);
    // (the mutation campaign of session 71, two survivors:) a stopped --force training left another model in the marked
    // folder: the finished database's --resume vouches only for the model it records, so it names the stopped training
    const fs::path other = t / "other";
    REQUIRE(test::run_tool("retro-tokenizer", "train " + p.corpus.string() + " --out " + other.string() + " --vocab-size 320 --quiet")
                .exit_code == 0);
    REQUIRE(test::read_text(other / "tok.model") != model);
    fs::copy_file(other / "tok.model", tok / "tok.model", fs::copy_options::overwrite_existing);
    test::write_text(tok / "state.json", nlohmann::json{{"tool", "retro-tokenizer"}, {"run", "a training"}}.dump());
    expect_refused(test::run_tool("retro-chunk", chunk + " --resume"), {"is the model of a retro-tokenizer training stopped before its end"});
    // the marked folder without its model: the database's readers name the stopped training, not a missing file
    fs::remove(tok / "tok.model");
    expect_refused(test::run_tool("retro-chunk", "inspect " + db.string() + " --chunk 0"),
                   {(tok / "tok.model").string() + ": does not exist: a retro-tokenizer training stopped before it wrote the model"});
}

// A helper's review of the mark (session 70): a state.json of someone else's in --out was replaced, then deleted; a
// mark cut short by a kill stayed for good; the old model a stopped --force left, which a database records byte for
// byte, was refused to that database's readers; a link to a marked model passed.
TEST_CASE("killed runs: the tokenizer's mark never takes another's state.json - and is judged by the model's own folder") {
    const Pipeline& p = pipeline();
    test::TempDir t("killtokmark");
    const std::string train = "train " + p.corpus.string() + " --vocab-size 300 --quiet --out ";
    const nlohmann::json mark = {{"tool", "retro-tokenizer"}, {"run", "a training"}};
    // someone else's state.json (a checkpoint's names no tool): refused before the training, kept
    fs::create_directories(t / "ck");
    test::write_text(t / "ck" / "state.json", "{\"step\": 500}");
    expect_refused(test::run_tool("retro-tokenizer", train + (t / "ck").string()),
                   {"holds a state.json retro-tokenizer did not write", "(fix: choose another --out"});
    CHECK(test::read_text(t / "ck" / "state.json") == "{\"step\": 500}");
    CHECK_FALSE(fs::exists(t / "ck" / "tok.model"));
    // a kill as the mark was written (its .tmp, whole or empty) beside a finished tokenizer: --resume removes it
    const fs::path tok = t / "tok";
    copy_folder(p.tok, tok);
    for (const std::string& left : {std::string(), mark.dump(2)}) {
        test::write_text(tok / "state.json.tmp", left);
        const test::RunResult kept = test::run_tool("retro-tokenizer", train + tok.string() + " --resume");
        CHECK_MESSAGE(kept.exit_code == 0, kept.err);
        CHECK_FALSE(fs::exists(tok / "state.json.tmp"));
    }
    // a database chunked with it, then a --force of the tokenizer stopped after the old manifest went: the old model,
    // which the database records byte for byte, is read through the database; asked for by itself it is refused
    const fs::path db = t / "db";
    REQUIRE(test::run_tool("retro-chunk", p.corpus.string() + " --tokenizer " + tok.string() + " --out " + db.string() +
                                              " --chunk-size 4 --seq-len 16 --quiet")
                .exit_code == 0);
    fs::remove(tok / "manifest.json");
    test::write_text(tok / "state.json", mark.dump());
    const test::RunResult shown = test::run_tool("retro-chunk", "inspect " + db.string() + " --chunk 0");
    CHECK_MESSAGE(shown.exit_code == 0, shown.err);
    CHECK(shown.err.find("statistics without text") == std::string::npos);
    CHECK(shown.err.find("training stopped") == std::string::npos);
    expect_refused(test::run_tool("retro-tokenizer", "encode --model " + tok.string(), "kato\n"), {"training stopped before its end"});
    // retro-chunk --resume of that finished database: complete, as before the stop (it refused the model)
    const test::RunResult resumed = test::run_tool("retro-chunk", p.corpus.string() + " --tokenizer " + tok.string() + " --out " +
                                                                      db.string() + " --chunk-size 4 --seq-len 16 --resume");
    CHECK_MESSAGE(resumed.exit_code == 0, resumed.err);
    CHECK(resumed.err.find("is already complete") != std::string::npos);
    // a link to the marked model, from a folder of its own: judged by the folder that holds the file
    fs::create_directories(t / "elsewhere");
    fs::create_symlink(tok / "tok.model", t / "elsewhere" / "tok.model");
    expect_refused(test::run_tool("retro-tokenizer", "encode --model " + (t / "elsewhere").string(), "kato\n"),
                   {"training stopped before its end"});
    // the training stopped before it wrote a model: named as such, not "no such tokenizer model"
    fs::create_directories(t / "none");
    test::write_text(t / "none" / "state.json", mark.dump());
    expect_refused(test::run_tool("retro-tokenizer", "encode --model " + (t / "none").string(), "kato\n"),
                   {"does not exist: a retro-tokenizer training stopped before it wrote the model", "--resume"});
}

// The same soak: retro-knn stopped after its neighbours.npy and before its manifest left a folder marked unfinished
// (state.json), which retro-train --knn took (its run then recorded no neighbours); retro-knn show refused it.
TEST_CASE("killed runs: retro-train --knn refuses a retro-knn folder marked unfinished, takes a neighbours.npy made by hand") {
    const Pipeline& p = pipeline();
    test::TempDir t("killknnmark");
    const fs::path knn = t / "knn";
    fs::create_directories(knn / "parts");
    fs::copy_file(p.knn / "neighbours.npy", knn / "neighbours.npy");
    fs::copy_file(p.knn / "distances.npy", knn / "distances.npy");
    test::write_text(knn / "state.json", nlohmann::json{{"tool", "retro-knn"}}.dump());
    const std::string args = "--db " + p.db.string() + " --knn " + knn.string() + " --config " + p.config.string() +
                             " --batch-size 2 --quiet --threads 1 --steps 1 --out ";
    expect_refused(test::run_tool("retro-train", args + (t / "run").string()),
                   {"manifest.json: missing: the folder is an unfinished retro-knn run", "--resume"});
    CHECK_FALSE(fs::exists(t / "run" / "model.safetensors"));
    // neighbours.npy alone (a user's numpy array, docs/retro-pytorch.md): taken, as before
    const fs::path own = t / "own";
    fs::create_directories(own);
    fs::copy_file(p.knn / "neighbours.npy", own / "neighbours.npy");
    const test::RunResult r = test::run_tool("retro-train", "--db " + p.db.string() + " --knn " + own.string() + " --config " +
                                                                p.config.string() + " --batch-size 2 --quiet --threads 1 --steps 1 --out " +
                                                                (t / "run2").string());
    CHECK_MESSAGE(r.exit_code == 0, r.err);
}

// The same soak: retro-train's --force stopped after the manifest and checkpoints/ went leaves weights without a
// manifest; --resume pointed to --init-from, which refuses such weights. A finished run without checkpoints keeps that fix.
TEST_CASE("killed runs: retro-train --resume over weights without their manifest and checkpoints says to start over") {
    const Pipeline& p = pipeline();
    test::TempDir t("killtrainforce");
    const fs::path run = t / "run", done = t / "done";
    copy_folder(p.run, run);
    copy_folder(p.run, done);
    fs::remove(run / "manifest.json");
    fs::remove_all(run / "checkpoints");
    fs::remove_all(done / "checkpoints");
    const std::string args = train_args(p, run) + " --steps 2 --checkpoint-every 1 --resume";
    expect_refused(test::run_tool("retro-train", args),
                   {"holds a model.safetensors without its manifest.json and no checkpoint", "(fix: start over with --force)"});
    expect_refused(test::run_tool("retro-train", train_args(p, done) + " --steps 2 --checkpoint-every 1 --resume"),
                   {"holds a finished run and no checkpoint to continue it from", "--init-from"});
}

// The same soak: `retro-train eval RUN` of a stopped run (no manifest.json) said "--db: is required".
TEST_CASE("killed runs: eval of a stopped run without --db names the unfinished run") {
    const Pipeline& p = pipeline();
    test::TempDir t("killeval");
    const fs::path run = t / "run";
    copy_folder(p.run, run);
    fs::remove(run / "manifest.json");
    expect_refused(test::run_tool("retro-train", "eval " + run.string() + " --quiet"),
                   {run.string() + ": is an unfinished retro-train run (no manifest.json yet", "(fix: finish it with retro-train --resume, or pass --db)"});
}

// /tmp/retrokit-locks-UID grew by one file per folder ever written (23,643 on the dev box after the kill soak of
// session 68): a run now removes its lock files as it ends, by its own exit or by a stop signal (a SIGKILL leaves one).
TEST_CASE("killed runs: a run's lock file goes when the run ends, by exit or by SIGTERM") {
    const Pipeline& p = pipeline();
    test::TempDir t("lockfile");
    const fs::path db = t / "db", run = t / "run";
    const test::RunResult chunk = test::run_tool("retro-chunk", p.corpus.string() + " --tokenizer " + p.tok.string() + " --out " +
                                                                    db.string() + " --chunk-size 4 --seq-len 16 --quiet");
    REQUIRE_MESSAGE(chunk.exit_code == 0, chunk.err);
    CHECK_FALSE(fs::exists(output_folder_lock_file(db.string())));
    // a refused run (exit 2) removes its own too
    expect_refused(test::run_tool("retro-chunk", p.corpus.string() + " --tokenizer " + p.tok.string() + " --out " +
                                                     db.string() + " --chunk-size 4 --seq-len 16 --quiet --force --resume"),
                   {"--resume"});
    CHECK_FALSE(fs::exists(output_folder_lock_file(db.string())));
    // stopped by SIGTERM once its run has begun (metrics.jsonl: its lock taken and its stop handler installed; a
    // signal before then ends it by the default action and leaves the file, which a later run sweeps): retro-train
    // ends its step, keeps a checkpoint and dies by the signal
    const std::string lock = shell_quote(output_folder_lock_file(run.string()));
    const std::string begun = shell_quote((run / "metrics.jsonl").string());
    const test::RunResult stopped = test::run_command(
        "{ " + shell_quote(test::tool_path("retro-train")) + " " + train_args(p, run) + " --steps 100000 & pid=$!; i=0; " +
        "while [ ! -e " + begun + " ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done; [ -e " + lock +
        " ] && echo seen; kill -TERM $pid; wait $pid; echo rc=$?; }");
    CHECK_MESSAGE(stopped.out == "seen\nrc=143\n", (stopped.out + stopped.err));
    CHECK_FALSE(fs::exists(output_folder_lock_file(run.string())));
    // a folder whose lock file was left by a SIGKILLed run is taken as before
    test::write_text(output_folder_lock_file((t / "db2").string()), "retro-chunk, pid 1, since then");
    const test::RunResult again = test::run_tool("retro-chunk", p.corpus.string() + " --tokenizer " + p.tok.string() + " --out " +
                                                                    (t / "db2").string() + " --chunk-size 4 --seq-len 16 --quiet");
    CHECK_MESSAGE(again.exit_code == 0, again.err);
    CHECK_FALSE(fs::exists(output_folder_lock_file((t / "db2").string())));
    // a run sweeps the lock folder of files over an hour old that no process holds (those SIGKILLed runs left), never
    // one a process holds, however old
    const fs::path locks = fs::path(output_folder_lock_file((t / "db3").string())).parent_path();
    const fs::path stale = locks / ("stale-" + t.path.filename().string() + ".lock"),
                   held = locks / ("held-" + t.path.filename().string() + ".lock"),
                   recent = locks / ("recent-" + t.path.filename().string() + ".lock");
    for (const fs::path& f : {stale, held, recent}) test::write_text(f, "retro-chunk, pid 1, since then");
    const int held_fd = ::open(held.c_str(), O_RDONLY | O_CLOEXEC);
    REQUIRE(held_fd >= 0);
    REQUIRE(::flock(held_fd, LOCK_EX | LOCK_NB) == 0);
    for (const fs::path& f : {stale, held}) fs::last_write_time(f, fs::file_time_type::clock::now() - std::chrono::hours(2));
    const test::RunResult third = test::run_tool("retro-chunk", p.corpus.string() + " --tokenizer " + p.tok.string() + " --out " +
                                                                    (t / "db3").string() + " --chunk-size 4 --seq-len 16 --quiet");
    CHECK_MESSAGE(third.exit_code == 0, third.err);
    CHECK_FALSE(fs::exists(stale));
    CHECK(fs::exists(held));
    CHECK(fs::exists(recent));
    ::close(held_fd);
    fs::remove(held);
    fs::remove(recent);
}

// The mutation campaign of session 71: a line of the lock files' handling no test saw.
TEST_CASE("killed runs: a lock file its holder removes while a run waits is not the one the run locks") {
    test::TempDir t("lockswap");
    const fs::path out = t / "out";
    const std::string lock = output_folder_lock_file(out.string());
    // a holder that removes its lock file as it ends, while this run waits for the lock: the run must lock a file that
    // is there (a lock on the removed one guards nothing against the next run, which makes a new file)
    const int holder = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    REQUIRE(holder >= 0);
    REQUIRE(::flock(holder, LOCK_EX | LOCK_NB) == 0);
    std::thread ends([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        ::unlink(lock.c_str());
        ::close(holder);
    });
    output_folder_lock(out.string(), "retro-knn");
    ends.join();
    CHECK(fs::exists(lock));
    CHECK(output_folder_writer(out.string()).empty());   // (this process holds it)
}
