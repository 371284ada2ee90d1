// Verified inputs (docs/tools.md "Verified inputs"): a file changed after its tool wrote it (same shape, other
// bytes: what an edit through numpy or a flipped disk block leaves) is refused by every tool that reads it whole,
// naming the file, unless --no-verify; and a manifest field of the wrong type ends in exit 2 naming the file.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"
#include "core/manifest.h"
#include "core/tool_context.h"
#include "test_cli_pipeline.h"
#include "test_util.h"

using namespace retro;
namespace fs = std::filesystem;

namespace {

using Pipeline = test::CliPipeline;

const Pipeline& pipeline() {
    static Pipeline p("verify");
    static bool built = false;
    if (!built) test::cli_pipeline_build(p, 900, 16, "--knn " + p.knn.string() + " --steps 2 --checkpoint-every 1");
    built = true;
    return p;
}

// XORs one byte of `path` in place: the first data byte of an .npy (the first '\n' ends its header), else the
// last byte of the file (a safetensors file's last weight). The shape and size stay as they were.
void flip_byte(const fs::path& path) {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    REQUIRE(f);
    std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    const std::size_t at = path.extension() == ".npy" ? bytes.find('\n') + 1 : bytes.size() - 1;
    REQUIRE(at < bytes.size());
    f.seekp(static_cast<std::streamoff>(at));
    f.put(static_cast<char>(bytes[at] ^ 1));
}

void expect_changed(const test::RunResult& r, const fs::path& file) {
    INFO("stderr: ", r.err);
    CHECK(r.exit_code == 2);
    CHECK(r.err.find('\n') == r.err.size() - 1);
    CHECK(r.err.find(file.string()) != std::string::npos);
    CHECK(r.err.find("has changed since") != std::string::npos);
    CHECK(r.err.find("--no-verify") != std::string::npos);
}

using test::copy_folder;

std::string train_args(const fs::path& db, const fs::path& knn, const Pipeline& p, const fs::path& out) {
    return "--db " + db.string() + " --knn " + knn.string() + " --config " + p.config.string() + " --out " +
           out.string() + " --batch-size 2 --steps 1 --quiet --threads 1";
}

}  // namespace

TEST_CASE("verified inputs: manifest_verify_outputs holds a folder's files to its manifest") {
    test::TempDir t("verify_core");
    ToolContext ctx;
    ctx.tool = "retro-test";
    test::write_text(t / "a.txt", "alpha");
    test::write_text(t / "b.txt", "beta");
    Manifest m(ctx);
    m.add_output(t.path.string(), "a.txt");
    m.add_output(t.path.string(), "b.txt");
    m.write(t.path.string());
    CHECK_NOTHROW(manifest_verify_outputs(t.path.string(), {"a.txt", "b.txt"}));
    CHECK_NOTHROW(manifest_verify_outputs(t.path.string(), {}));
    test::write_text(t / "b.txt", "betA");   // same size, other bytes
    CHECK_THROWS_WITH_AS(manifest_verify_outputs(t.path.string(), {"a.txt", "b.txt"}),
                         doctest::Contains("b.txt: has changed since retro-test wrote it"), UserError);
    CHECK_NOTHROW(manifest_verify_outputs(t.path.string(), {"a.txt"}));
    CHECK_NOTHROW(manifest_verify_outputs(t.path.string(), {"c.txt"}));   // no record: a folder of other code
    // a folder without a manifest: nothing to hold the files to
    test::TempDir bare("verify_bare");
    test::write_text(bare / "a.txt", "alpha");
    CHECK_NOTHROW(manifest_verify_outputs_if_any(bare.path.string(), {"a.txt"}));
    CHECK_THROWS_AS(manifest_verify_outputs(bare.path.string(), {"a.txt"}), UserError);
}

TEST_CASE("verified inputs: retro-index, retro-knn, retro-train and retro-generate refuse a changed input unless --no-verify") {
    const Pipeline& p = pipeline();
    test::TempDir t("verify_cli");
    const fs::path db = t / "db", index = t / "index", knn = t / "knn", run = t / "run";
    copy_folder(p.db, db);
    copy_folder(p.index, index);
    copy_folder(p.knn, knn);
    copy_folder(p.run, run);

    SUBCASE("the database's tokens") {
        flip_byte(db / "chunks.npy");
        expect_changed(test::run_tool("retro-index", db.string() + " --out " + (t / "ix").string() + " --dim 16 --quiet"),
                       db / "chunks.npy");
        CHECK(!fs::exists(t / "ix"));
        expect_changed(test::run_tool("retro-train", train_args(db, p.knn, p, t / "r")), db / "chunks.npy");
        CHECK(!fs::exists(t / "r" / "manifest.json"));
        expect_changed(test::run_tool("retro-index", db.string() + " --out " + (t / "bm").string() + " --kind bm25 --quiet"),
                       db / "chunks.npy");
        CHECK(test::run_tool("retro-index", db.string() + " --out " + (t / "ix").string() + " --dim 16 --quiet --no-verify")
                  .exit_code == 0);
        // a shard reads only its rows of chunks.npy: hashing all of it would read the database once per shard
        const test::RunResult shard =
            test::run_tool("retro-index", db.string() + " --out " + (t / "s0").string() + " --dim 16 --quiet --shard 0/2");
        CHECK_MESSAGE(shard.exit_code == 0, shard.err);
    }
    SUBCASE("the database's document layout") {
        flip_byte(db / "doc_ids.npy");
        // check_arrays would refuse this row too (chunk 0 in document 1), but as a bad row: the fingerprint comes
        // first and says what happened, and it names changes check_arrays cannot see
        expect_changed(test::run_tool("retro-knn", p.index.string() + " --db " + db.string() + " --out " +
                                                       (t / "k").string() + " --quiet"),
                       db / "doc_ids.npy");
    }
    SUBCASE("the index folder") {
        flip_byte(index / "embeddings.npy");
        expect_changed(test::run_tool("retro-knn", index.string() + " --db " + p.db.string() + " --out " +
                                                       (t / "k").string() + " --exact --quiet"),
                       index / "embeddings.npy");
        CHECK(test::run_tool("retro-knn", index.string() + " --db " + p.db.string() + " --out " + (t / "k").string() +
                                              " --exact --quiet --no-verify")
                  .exit_code == 0);
        std::ofstream(index / "index.faiss", std::ios::binary | std::ios::app) << "x";   // FAISS would read past it
        expect_changed(test::run_tool("retro-knn", index.string() + " --db " + p.db.string() + " --out " +
                                                       (t / "k2").string() + " --quiet"),
                       index / "index.faiss");
        expect_changed(test::run_tool("retro-generate", p.run.string() + " --index " + index.string() + " --db " +
                                                            p.db.string() + " --max-tokens 2 --quiet hello"),
                       index / "index.faiss");
    }
    SUBCASE("the neighbours") {
        flip_byte(knn / "neighbours.npy");
        expect_changed(test::run_tool("retro-train", train_args(p.db, knn, p, t / "r")), knn / "neighbours.npy");
        CHECK(test::run_tool("retro-train", train_args(p.db, knn, p, t / "r") + " --no-verify").exit_code == 0);
    }
    SUBCASE("the run's weights") {
        flip_byte(run / "model.safetensors");
        expect_changed(test::run_tool("retro-generate", run.string() + " --index " + p.index.string() + " --db " +
                                                            p.db.string() + " --max-tokens 2 --quiet hello"),
                       run / "model.safetensors");
        CHECK(test::run_tool("retro-generate", run.string() + " --index " + p.index.string() + " --db " + p.db.string() +
                                                   " --max-tokens 2 --quiet --no-verify hello")
                  .exit_code == 0);
        expect_changed(test::run_tool("retro-train", "eval --run " + run.string() + " --db " + p.db.string() + " --knn " +
                                                         p.knn.string() + " --max-batches 1 --quiet"),
                       run / "model.safetensors");
        // eval --index verifies the run before it searches (a search can take minutes): the weights are named, not
        // the index (here a folder that does not exist)
        expect_changed(test::run_tool("retro-train", "eval --run " + run.string() + " --db " + p.db.string() + " --index " +
                                                         (t / "no-such-index").string() + " --max-batches 1 --quiet"),
                       run / "model.safetensors");
        // --init-from hashes the base anyway: a run folder's manifest holds it to its record (no flag needed)
        const test::RunResult r = test::run_tool("retro-train", train_args(p.db, p.knn, p, t / "r") + " --init-from " + run.string());
        INFO("stderr: ", r.err);
        CHECK(r.exit_code == 2);
        CHECK(r.err.find((run / "model.safetensors").string() + ": has changed since retro-train") != std::string::npos);
    }
    SUBCASE("a checkpoint's files, held to its state.json") {
        fs::remove(run / "manifest.json");
        fs::remove(run / "model.safetensors");
        fs::remove_all(run / "checkpoints" / "step_00000002");   // as if killed after the step-1 checkpoint
        const fs::path ck = run / "checkpoints" / "step_00000001";
        flip_byte(ck / "optimizer.safetensors");
        const std::string resume = train_args(p.db, p.knn, p, run) + " --resume";
        const test::RunResult r = test::run_tool("retro-train", resume);
        expect_changed(r, ck / "optimizer.safetensors");
        CHECK(r.err.find("--resume takes the one before once " + ck.string() + " is deleted") != std::string::npos);
        flip_byte(ck / "model.safetensors");
        expect_changed(test::run_tool("retro-generate", run.string() + " --checkpoint " + ck.string() + " --index " +
                                                            p.index.string() + " --db " + p.db.string() +
                                                            " --max-tokens 2 --quiet hello"),
                       ck / "model.safetensors");
        CHECK(test::run_tool("retro-train", resume + " --no-verify").exit_code == 0);
    }
}

TEST_CASE("verified inputs: a manifest field of the wrong type ends in exit 2 naming the file") {
    const Pipeline& p = pipeline();
    test::TempDir t("verify_json");
    const fs::path db = t / "db";
    copy_folder(p.db, db);
    const fs::path mp = db / "manifest.json";
    nlohmann::json m;
    {
        std::ifstream f(mp);
        m = nlohmann::json::parse(f);
    }
    const nlohmann::json original = m;
    auto write = [&](const nlohmann::json& j) { test::write_text(mp, j.dump(2) + "\n"); };
    auto refused = [&](const test::RunResult& r, const std::string& says) {
        INFO("stderr: ", r.err);
        CHECK(r.exit_code == 2);
        CHECK(r.err.find('\n') == r.err.size() - 1);
        CHECK(r.err.find(mp.string()) != std::string::npos);
        CHECK(r.err.find(says) != std::string::npos);
    };
    const std::string index_cmd = db.string() + " --out " + (t / "ix").string() + " --dim 16 --quiet";

    m["tool"] = 5;   // caught as the manifest is read
    write(m);
    refused(test::run_tool("retro-index", index_cmd), "'tool' is not a string");
    m = original;
    m["outputs"][0]["fingerprint"] = 12;
    write(m);
    refused(test::run_tool("retro-index", index_cmd), "outputs[0].fingerprint is not a string");
    m = original;
    m["parameters"]["chunk_size"] = "4";   // a field one reader reads: named by the files this run read
    write(m);
    const std::string generate = p.run.string() + " --index " + p.index.string() + " --db " + db.string() +
                                 " --max-tokens 2 --quiet --allow-other-db hello";
    refused(test::run_tool("retro-generate", generate), "wrong type");
    write(original);
    CHECK(test::run_tool("retro-generate", generate).exit_code == 0);
}
