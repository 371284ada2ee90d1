// `--shard auto` (issue 20, core/shard.h): every preprocessing stage, run as the tasks of a simulated Slurm
// step (SLURM_PROCID / SLURM_NTASKS set by the test, as srun sets them) and merged, gives the same bytes as
// one straight run: retro-chunk, retro-index (bow and the BERT embedder), retro-knn. Outside a launcher,
// `auto` is refused in one line. examples/scale-out/shards-xargs.sh, run again, skips what is done.
#include <doctest/doctest.h>

#include <algorithm>

#include "core/shell_quote.h"
#include "test_chunk_util.h"
#include "test_util.h"

namespace fs = std::filesystem;
using namespace retro;

namespace {

// Runs `tool args --shard auto --out <out>.<i>` as task i of n, for every i; returns the folders.
std::string run_slurm_tasks(const std::string& tool, const std::string& args, const fs::path& out, int n) {
    std::string folders;
    for (int i = 0; i < n; i++) {
        const fs::path o = out.string() + "." + std::to_string(i);
        auto r = test::run_command("SLURM_PROCID=" + std::to_string(i) + " SLURM_NTASKS=" + std::to_string(n) + " " +
                                   test::tool_path(tool) + " " + args + " --shard auto --out " + o.string());
        INFO(tool, " task ", i, ": ", r.err);
        REQUIRE(r.exit_code == 0);
        folders += " " + o.string();
    }
    return folders;
}

void check_same_files(const fs::path& a, const fs::path& b, std::initializer_list<const char*> files) {
    for (const char* f : files) {
        CAPTURE(f);
        REQUIRE(fs::exists(a / f));
        CHECK(test::read_text(a / f) == test::read_text(b / f));
    }
}

}  // namespace

TEST_CASE("shard auto: every stage under a simulated Slurm step, merged, equals one straight run byte for byte") {
    test::TempDir dir("shard-auto");
    const fs::path corpus = test::chunk_test_jsonl(dir, "c.jsonl", 40'000, 600, 7);
    const std::string chunk_args = corpus.string() + " --tokenizer " + test::chunk_test_tokenizer() +
                                   " --chunk-size 16 --seq-len 64 --block-docs 5 --quiet";
    // retro-chunk
    auto r = test::run_tool("retro-chunk", chunk_args + " --out " + (dir / "db").string());
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    std::string shards = run_slurm_tasks("retro-chunk", chunk_args, dir / "dbs", 3);
    r = test::run_tool("retro-chunk", "merge" + shards + " --out " + (dir / "db-merged").string() + " --quiet");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    test::chunk_check_same_bytes(dir / "db", dir / "db-merged");
    const std::string db = (dir / "db").string();

    // retro-index, bow embedder and a Flat index
    const std::string index_args = db + " --dim 16 --index Flat --block 64 --quiet";
    r = test::run_tool("retro-index", index_args + " --out " + (dir / "index").string());
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    shards = run_slurm_tasks("retro-index", index_args, dir / "idx", 2);
    r = test::run_tool("retro-index", "merge" + shards + " --out " + (dir / "index-merged").string() + " --quiet");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    check_same_files(dir / "index", dir / "index-merged", {"embeddings.npy", "index.faiss"});

    // retro-knn
    const std::string knn_args = (dir / "index").string() + " --db " + db + " --neighbours 2 --block 64 --exact --quiet";
    r = test::run_tool("retro-knn", knn_args + " --out " + (dir / "knn").string());
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    shards = run_slurm_tasks("retro-knn", knn_args, dir / "knns", 3);
    r = test::run_tool("retro-knn", "merge" + shards + " --out " + (dir / "knn-merged").string() + " --quiet");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    check_same_files(dir / "knn", dir / "knn-merged", {"neighbours.npy", "distances.npy"});

    // retro-index with the BERT embedder (the tiny random checkpoint of the golden tests)
    const std::string bert_args = db + " --embedder bert --model " +
                                  (test::source_dir() / "tests/reference/golden/bert_tiny").string() +
                                  " --index Flat --block 64 --quiet";
    r = test::run_tool("retro-index", bert_args + " --out " + (dir / "bert").string());
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    shards = run_slurm_tasks("retro-index", bert_args, dir / "berts", 2);
    r = test::run_tool("retro-index", "merge" + shards + " --out " + (dir / "bert-merged").string() + " --quiet");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    check_same_files(dir / "bert", dir / "bert-merged", {"embeddings.npy", "index.faiss"});
}

TEST_CASE("shard auto: outside srun or mpirun it is refused in one line") {
    test::TempDir dir("shard-auto-none");
    const fs::path corpus = test::chunk_test_jsonl(dir, "c.jsonl", 5'000, 600, 3);
    // unset whatever launcher this test itself may run under
    auto r = test::run_command("env -u SLURM_PROCID -u SLURM_NTASKS -u SLURM_STEP_NUM_TASKS -u OMPI_COMM_WORLD_RANK "
                               "-u OMPI_COMM_WORLD_SIZE -u PMI_RANK -u PMI_SIZE " +
                               test::tool_path("retro-chunk") + " " + corpus.string() + " --tokenizer " +
                               test::chunk_test_tokenizer() + " --shard auto --out " + (dir / "db").string());
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("retro-chunk: error: --shard: auto: no launcher environment") == 0);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    CHECK_FALSE(fs::exists(dir / "db" / "manifest.json"));
    // a Slurm batch script's own shell (the job's SLURM_NTASKS, no step): the line says to start a step
    r = test::run_command("env -u SLURM_PROCID -u SLURM_STEP_ID -u SLURM_STEP_NUM_TASKS -u OMPI_COMM_WORLD_RANK "
                          "-u OMPI_COMM_WORLD_SIZE -u PMI_RANK -u PMI_SIZE SLURM_JOB_ID=7 SLURM_NTASKS=2 " +
                          test::tool_path("retro-chunk") + " " + corpus.string() + " --tokenizer " +
                          test::chunk_test_tokenizer() + " --shard auto --out " + (dir / "db").string());
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("--shard: auto: this is Slurm job 7's batch shell (or salloc's)") != std::string::npos);
    CHECK(r.err.find("srun --ntasks=N") != std::string::npos);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
}

TEST_CASE("shard scripts: shards-xargs.sh run again skips the finished stages and remakes a lost one byte for byte") {
    test::TempDir dir("shards-xargs");
    const fs::path corpus = test::chunk_test_jsonl(dir, "c.jsonl", 120'000, 600, 5), out = dir / "out";
    const std::string bin = fs::path(test::tool_path("retro-chunk")).parent_path().string();
    const std::string cmd = "cd " + shell_quote(test::source_dir().string()) + " && RETRO_BIN=" + shell_quote(bin) +
                            " bash examples/scale-out/shards-xargs.sh " + shell_quote(corpus.string()) + " " +
                            shell_quote(out.string()) + " 2";
    auto r = test::run_command(cmd);
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    const std::string index = test::read_text(out / "index" / "index.faiss");
    const auto knn_time = fs::last_write_time(out / "knn" / "neighbours.npy");
    // again: every stage is done, nothing is rewritten (the merges used to refuse their own output)
    r = test::run_command(cmd);
    REQUIRE(r.exit_code == 0);
    CHECK(fs::last_write_time(out / "knn" / "neighbours.npy") == knn_time);
    // an index stage stopped before its merge wrote the manifest, one shard lost: remade, the same bytes
    fs::remove(out / "index" / "manifest.json");
    fs::remove_all(out / "shards" / "index.1");
    r = test::run_command(cmd);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(fs::exists(out / "index" / "manifest.json"));
    CHECK(test::read_text(out / "index" / "index.faiss") == index);
    CHECK(fs::last_write_time(out / "knn" / "neighbours.npy") == knn_time);
}
