// Killed runs (see test_bad_input_cli.cpp): a kill mid-removal resumes to the straight run's arrays, a failed append
// names the file, a second run into a folder another process is writing is refused.
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
