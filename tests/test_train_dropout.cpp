// retro-train --retrieval-dropout (issue 17, docs/retrieval.md): a fixed hash picks which training sequences read no
// neighbours (their retrieved tokens all pad, so every neighbour is masked); the draw is the same for any
// --grad-accum and after --resume, and a run resumed with another share is refused.
#include <doctest/doctest.h>

#include <filesystem>

#include "model/retro.h"
#include "test_train_fixtures.h"
#include "test_util.h"
#include "train/data.h"

using namespace retro;
namespace fs = std::filesystem;

TEST_CASE("train dropout: the draw is a fixed hash at the asked share, and only dropped sequences are masked") {
    int dropped = 0, unstable = 0, at0 = 0, at1 = 0;
    for (std::int64_t seq = 0; seq < 20000; seq++) {
        const bool d = retrieval_dropped(7, 3, seq, 0.3);
        unstable += d != retrieval_dropped(7, 3, seq, 0.3);
        dropped += d;
        at0 += retrieval_dropped(7, 3, seq, 0.0);
        at1 += retrieval_dropped(7, 3, seq, 1.0);
    }
    CHECK(unstable == 0);
    CHECK(at0 == 0);
    CHECK(at1 == 20000);
    CHECK(dropped > 0.28 * 20000);
    CHECK(dropped < 0.32 * 20000);
    int differ = 0;   // another epoch or seed draws again
    for (std::int64_t seq = 0; seq < 1000; seq++)
        differ += retrieval_dropped(7, 3, seq, 0.5) != retrieval_dropped(7, 4, seq, 0.5);
    CHECK(differ > 400);

    RetroBatch b;
    b.B = 3;
    b.retrieved.assign(3 * 6, 5);
    mask_dropped_neighbours(b, {false, true, false}, 0);
    for (std::size_t i = 0; i < b.retrieved.size(); i++) CHECK(b.retrieved[i] == (i / 6 == 1 ? 0 : 5));
}

TEST_CASE("train dropout: retro-train --retrieval-dropout trains, differs from 0, resumes bit for bit, and refuses another share") {
    test::TempDir dir("train-dropout");
    test::write_tiny_db(dir / "db", dir / "knn", 4, 16, 40, 6);
    const std::string common = "--db " + (dir / "db").string() + " --knn " + (dir / "knn").string() + " --config " +
                               test::config_path() +
                               " --steps 12 --batch-size 4 --grad-accum 2 --lr 3e-3 --warmup 3 --val-every 6"
                               " --val-batches 2 --val-fraction 0.2 --seed 5 --quiet --threads 1 --checkpoint-every 6";
    auto none = test::run_tool("retro-train", common + " --out " + (dir / "none").string());
    auto a = test::run_tool("retro-train", common + " --retrieval-dropout 0.5 --out " + (dir / "a").string());
    INFO(a.err);
    REQUIRE(none.exit_code == 0);
    REQUIRE(a.exit_code == 0);
    CHECK(test::losses(dir / "a") != test::losses(dir / "none"));

    auto b1 = test::run_tool("retro-train", common + " --retrieval-dropout 0.5 --stop-after 8 --out " + (dir / "b").string());
    REQUIRE(b1.exit_code == 0);
    auto other = test::run_tool("retro-train", common + " --retrieval-dropout 0.25 --resume --out " + (dir / "b").string());
    CHECK(other.exit_code == 2);
    CHECK(other.err.find("--retrieval-dropout") != std::string::npos);
    auto b2 = test::run_tool("retro-train", common + " --retrieval-dropout 0.5 --resume --out " + (dir / "b").string());
    INFO(b2.err);
    REQUIRE(b2.exit_code == 0);
    CHECK(test::losses(dir / "b") == test::losses(dir / "a"));
    CHECK(test::bytes(dir / "b" / "model.safetensors") == test::bytes(dir / "a" / "model.safetensors"));

    auto bad = test::run_tool("retro-train", common + " --retrieval-dropout 1.5 --out " + (dir / "bad").string());
    CHECK(bad.exit_code == 2);
    CHECK_FALSE(fs::exists(dir / "bad" / "model.safetensors"));
}
