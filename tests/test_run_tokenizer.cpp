// Runs, databases and weights of different tokenizers are not mixed (data/run_tokenizer.h): retro-train eval on a
// database chunked with another tokenizer than the run's, eval --baseline of such a run, and --init-from such a
// run's weights are refused in one line naming the folder (each exited 0 with numbers that meant nothing), also a run
// stopped before its manifest (its checkpoints' state.json); the same tokenizer passes, and a database that records
// no tokenizer is not held to it.
#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "test_chunk_util.h"
#include "test_train_fixtures.h"
#include "test_util.h"

namespace fs = std::filesystem;
using namespace retro;

namespace {

// A tiny database whose manifest records a tokenizer with `fingerprint` ("" records none).
void tiny_db(const fs::path& dir, const std::string& name, unsigned seed, const std::string& fingerprint) {
    test::write_tiny_db(dir / name, dir / ("knn-" + name), 4, 16, 30, seed);
    if (fingerprint.empty()) return;
    nlohmann::json m = nlohmann::json::parse(test::read_text(dir / name / "manifest.json"));
    m["inputs"] = {{{"role", "tokenizer"}, {"path", (dir / ("tok-" + fingerprint)).string()}, {"fingerprint", fingerprint}}};
    write_file_atomic((dir / name / "manifest.json").string(), m.dump(2));
}

test::RunResult train(const fs::path& dir, const std::string& db, const std::string& out, const std::string& more = "") {
    return test::run_tool("retro-train", "--db " + (dir / db).string() + " --knn " + (dir / ("knn-" + db)).string() + " --config " +
                                             test::config_path() + " --out " + (dir / out).string() +
                                             " --steps 2 --batch-size 2 --threads 1 --quiet" + more);
}

}  // namespace

TEST_CASE("run tokenizer: eval, --baseline and --init-from refuse another tokenizer's database or run") {
    test::TempDir dir("run-tokenizer");
    tiny_db(dir.path, "a", 1, "aaaa1111");
    tiny_db(dir.path, "a2", 2, "aaaa1111");   // another database of the same tokenizer
    tiny_db(dir.path, "b", 3, "bbbb2222");
    tiny_db(dir.path, "none", 4, "");         // a database that records no tokenizer
    for (const char* db : {"a", "b"}) {
        const auto r = train(dir.path, db, std::string("run-") + db);
        REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    }
    const auto eval = [&](const std::string& db, const std::string& more = "") {
        return test::run_tool("retro-train", "eval --run " + (dir / "run-a").string() + " --db " + (dir / db).string() + " --knn " +
                                                 (dir / ("knn-" + db)).string() + " --split all --max-batches 1 --quiet" + more);
    };
    auto r = eval("b");
    CHECK(r.exit_code == 2);
    CHECK(r.err.find((dir / "b").string() + ": uses another tokenizer than the database " + (dir / "run-a").string() +
                     " was trained on (") != std::string::npos);
    CHECK(test::line_count(r.err) == 1);
    r = eval("a", " --baseline " + (dir / "run-b").string());
    CHECK(r.exit_code == 2);
    CHECK(r.err.find((dir / "run-b").string() + ": uses another tokenizer than ") != std::string::npos);
    r = train(dir.path, "a", "fit", " --init-from " + (dir / "run-b").string());
    CHECK(r.exit_code == 2);
    CHECK(r.err.find((dir / "run-b").string() + ": uses another tokenizer than --db ") != std::string::npos);
    CHECK_FALSE(fs::exists(dir / "fit" / "model.safetensors"));
    r = train(dir.path, "a", "fit2", " --init-from " + (dir / "run-b" / "model.safetensors").string());   // its weights file
    CHECK(r.exit_code == 2);
    // a run stopped before its manifest (or still training): its finished checkpoints record the tokenizer
    REQUIRE(train(dir.path, "b", "run-b-stopped", " --checkpoint-every 1").exit_code == 0);
    fs::remove(dir / "run-b-stopped" / "manifest.json");
    for (const fs::path& base : {dir / "run-b-stopped", dir / "run-b-stopped" / "checkpoints" / "step_00000001"}) {
        CAPTURE(base);
        REQUIRE(fs::exists(base));
        r = train(dir.path, "a", "fit4", " --init-from " + base.string());
        CHECK(r.exit_code == 2);
        CHECK(r.err.find(base.string() + ": uses another tokenizer than --db ") != std::string::npos);
    }
    // the same tokenizer, and a database that cannot tell, pass
    for (const char* db : {"a", "a2", "none"}) {
        CAPTURE(db);
        r = eval(db);
        CHECK_MESSAGE(r.exit_code == 0, r.err);
    }
    r = train(dir.path, "a2", "fit3", " --init-from " + (dir / "run-a").string());
    CHECK_MESSAGE(r.exit_code == 0, r.err);
}
