// The spellings one tool uses for an option another tool spells otherwise (docs/tools.md, "Option names"): each alias
// sets the same value as the option's own name (the outputs are compared byte for byte), and --help lists both.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "test_cli_pipeline.h"
#include "test_util.h"

namespace fs = std::filesystem;
using namespace retro;

namespace {

// The command's standard output, the command required to succeed.
std::string output_of(const std::string& tool, const std::string& args) {
    const test::RunResult r = test::run_tool(tool, args);
    REQUIRE_MESSAGE(r.exit_code == 0, tool, " ", args, ": ", r.err);
    return r.out;
}

}  // namespace

TEST_CASE("options: eval's run as its first word, --batch and --checkpoint give what --run, --batch-size and --weights give") {
    const test::CliPipeline& p = test::bad_input_pipeline();
    const fs::path checkpoint = p.run / "checkpoints" / "step_00000001";
    REQUIRE(fs::exists(checkpoint));
    const std::string data = " --db " + p.db.string() + " --knn " + p.knn.string() + " --max-batches 1 --json --threads 1 --quiet";
    const std::string own = output_of("retro-train", "eval --run " + p.run.string() + " --batch-size 2 --weights " +
                                                         checkpoint.string() + data);
    CHECK(own.find("\"chunks\"") != std::string::npos);
    CHECK(output_of("retro-train", "eval " + p.run.string() + " --batch 2 --checkpoint " + checkpoint.string() + data) == own);
    // and the alias changes what it should: another batch size, other weights
    CHECK(output_of("retro-train", "eval " + p.run.string() + " --batch 1 --checkpoint " + checkpoint.string() + data) != own);
    CHECK(output_of("retro-train", "eval " + p.run.string() + " --batch 2" + data) != own);
    // the run given both ways is refused, not one of them dropped
    const test::RunResult twice = test::run_tool("retro-train", "eval " + p.run.string() + " --run " + p.run.string() + data);
    CHECK(twice.exit_code == 2);
    CHECK(twice.err.find("given twice") != std::string::npos);
    const test::RunResult none = test::run_tool("retro-train", "eval" + data);
    CHECK(none.exit_code == 2);
    CHECK(none.err.find("the run folder (the first word, or --run) is required") != std::string::npos);
    // --help lists the run once a way, neither as REQUIRED next to the other (one of the two is)
    const std::string help = output_of("retro-train", "eval --help");
    CHECK(help.find("REQUIRED         Run folder") == std::string::npos);
    CHECK(help.find("--run TEXT REQUIRED") == std::string::npos);
    CHECK(help.find("required: the first word or --run") != std::string::npos);

    // retro-generate: --weights for --checkpoint
    const std::string gen = " --index " + p.index.string() + " --db " + p.db.string() + " --greedy --max-tokens 6 --threads 1 --quiet hello";
    const std::string by_checkpoint = output_of("retro-generate", p.run.string() + " --checkpoint " + checkpoint.string() + gen);
    CHECK_FALSE(by_checkpoint.empty());
    CHECK(output_of("retro-generate", p.run.string() + " --weights " + checkpoint.string() + gen) == by_checkpoint);
}

TEST_CASE("options: retro-bench knn --neighbours is its --k, and every alias is listed in its command's --help") {
    const std::string knn = "knn --n 600 --dim 8 --queries 8 --ivf-nlist 0 --pq-m 0 --debian-queries 0 --thread-counts 1 "
                            "--threads 1 --quiet --json -";
    const std::string by_k = output_of("retro-bench", knn + " --k 3");
    CHECK(by_k.find("\"k\": 3") != std::string::npos);
    CHECK(output_of("retro-bench", knn + " --neighbours 3").find("\"k\": 3") != std::string::npos);

    struct Listed {
        std::string tool, command, names;
    };
    const std::vector<Listed> listed = {
        {"retro-train", "", "--batch-size,--batch"},
        {"retro-train", "eval", "--batch-size,--batch"},
        {"retro-train", "eval", "--weights,--checkpoint"},
        {"retro-generate", "", "--batch-size,--batch"},
        {"retro-generate", "", "--checkpoint,--weights"},
        {"retro-index", "", "--batch,--batch-size"},
        {"retro-bench", "embed", "--batch,--batch-size"},
        {"retro-bench", "train", "--batch,--batch-size"},
        {"retro-bench", "train", "--threads,--thread-counts"},
        {"retro-bench", "generate", "--batch,--batch-size"},
        {"retro-bench", "generate", "--output,--max-tokens"},
        {"retro-bench", "knn", "--k,--neighbours"},
        {"retro-knn", "", "--neighbours,--k"},
        {"retro-bench", "chunk", "--chunk-threads,--thread-counts"},
    };
    for (const Listed& l : listed) {
        INFO(l.tool, " ", l.command, ": ", l.names);
        CHECK(output_of(l.tool, l.command + " --help").find(l.names) != std::string::npos);
    }
}

TEST_CASE("options: retro-knn --k is its --neighbours (the same neighbours, byte for byte)") {
    const test::CliPipeline& p = test::bad_input_pipeline();
    test::TempDir t("knnk");
    const std::string common = p.index.string() + " --db " + p.db.string() + " --threads 1 --quiet --out ";
    output_of("retro-knn", common + (t / "by_neighbours").string() + " --neighbours 1");
    output_of("retro-knn", common + (t / "by_k").string() + " --k 1");
    const auto bytes = [](const fs::path& f) { return test::read_text(f); };
    CHECK(bytes(t / "by_k" / "neighbours.npy") == bytes(t / "by_neighbours" / "neighbours.npy"));
    CHECK(bytes(t / "by_k" / "distances.npy") == bytes(t / "by_neighbours" / "distances.npy"));
    // and it is k: the pipeline's own neighbours (2 a chunk) differ
    CHECK(bytes(t / "by_k" / "neighbours.npy") != bytes(p.knn / "neighbours.npy"));
}
