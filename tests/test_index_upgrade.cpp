// A retro-index job started by an older RetroKit and finished by this one: a bert shard whose state.json has no
// embedder.tokenizer_fingerprint (written before 2026-12-02) resumes, and merges with a shard that has it.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include "core/manifest.h"
#include "test_chunk_util.h"
#include "test_util.h"

using namespace retro;
namespace fs = std::filesystem;

TEST_CASE("index upgrade: a bert shard without tokenizer_fingerprint resumes and merges with ones that have it") {
    test::TempDir tmp("index-upgrade");
    const fs::path db = test::chunk_test_db(tmp, 6);
    const fs::path model = test::source_dir() / "tests" / "reference" / "golden" / "bert_tiny";
    const auto shard = [&](int i, const std::string& extra) {
        return test::run_tool("retro-index", db.string() + " --embedder bert --model " + model.string() + " --out " +
                                                 (tmp / ("s" + std::to_string(i))).string() + " --shard " + std::to_string(i) +
                                                 "/3 --quiet" + extra);
    };
    for (int i = 0; i < 3; ++i) REQUIRE(shard(i, "").exit_code == 0);
    // shard 0 as the older tool left it
    const fs::path state = tmp / "s0" / "state.json";
    nlohmann::json old = json_read_file(state.string());
    REQUIRE(old["embedder"].contains("tokenizer_fingerprint"));
    old["embedder"].erase("tokenizer_fingerprint");
    test::write_text(state, old.dump(2));
    const test::RunResult resumed = shard(0, " --resume");
    CHECK_MESSAGE(resumed.exit_code == 0, resumed.err);
    test::write_text(state, old.dump(2));   // (the resume wrote it again, with the field)
    const auto merge = [&](const std::string& out) {
        return test::run_tool("retro-index", "merge " + (tmp / "s0").string() + " " + (tmp / "s1").string() + " " +
                                                 (tmp / "s2").string() + " --out " + (tmp / out).string() + " --quiet");
    };
    const test::RunResult merged = merge("idx");
    CHECK_MESSAGE(merged.exit_code == 0, merged.err);
    REQUIRE(fs::exists(tmp / "idx" / "manifest.json"));
    // the merged index records the fingerprint the newer shards agree on, though the first shard has none
    const nlohmann::json m = json_read_file((tmp / "idx" / "manifest.json").string());
    CHECK(m["embedder"]["tokenizer_fingerprint"] == json_read_file((tmp / "s1" / "state.json").string())["embedder"]["tokenizer_fingerprint"]);
    {   // two newer shards that disagree are two jobs, even behind an older first shard
        nlohmann::json third = json_read_file((tmp / "s2" / "state.json").string());
        const nlohmann::json kept = third;
        third["embedder"]["tokenizer_fingerprint"] = "1111111111111111";
        test::write_text(tmp / "s2" / "state.json", third.dump(2));
        const test::RunResult two_jobs = merge("idx2");
        CHECK(two_jobs.exit_code == 2);
        CHECK(two_jobs.err.find("s2/state.json: belongs to another job than " + (tmp / "s1").string() +
                                " (embedder.tokenizer_fingerprint differs)") != std::string::npos);
        test::write_text(tmp / "s2" / "state.json", kept.dump(2));
    }
    // another vocabulary is still another job where both record it
    nlohmann::json other = json_read_file((tmp / "s1" / "state.json").string());
    other["embedder"]["tokenizer_fingerprint"] = "0000000000000000";
    test::write_text(tmp / "s1" / "state.json", other.dump(2));
    const test::RunResult refused = shard(1, " --resume");
    CHECK(refused.exit_code == 2);
    CHECK(refused.err.find("embedder.tokenizer_fingerprint") != std::string::npos);
}
