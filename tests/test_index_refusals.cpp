// retro-index and retro-knn refusals that must leave nothing behind: a merge refused for a shard's missing blocks
// leaves no --out folder (the corrected merge then ran into "already exists"), and a --resume refused as another job
// writes nothing into the folder (bow's idf.npy was written first, and later listed by the other job's manifest).
#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/manifest.h"
#include "test_chunk_util.h"
#include "test_cli_pipeline.h"
#include "test_util.h"

using namespace retro;
namespace fs = std::filesystem;

TEST_CASE("index refusals: a refused merge leaves no folder, a refused --resume writes nothing") {
    test::TempDir tmp("index-refusals");
    const fs::path db = test::chunk_test_db(tmp, 11);
    const auto index_shard = [&](int i) {
        return test::run_tool("retro-index", db.string() + " --out " + (tmp / ("s" + std::to_string(i))).string() +
                                                 " --block 8 --shard " + std::to_string(i) + "/2 --quiet");
    };
    REQUIRE(index_shard(0).exit_code == 0);
    // the merge without shard 1: refused, no folder
    const auto merge = [&](const std::string& shards) {
        return test::run_tool("retro-index", "merge " + shards + " --out " + (tmp / "idx").string() + " --quiet");
    };
    const test::RunResult partial = merge((tmp / "s0").string());
    CHECK(partial.exit_code == 2);
    CHECK_FALSE(fs::exists(tmp / "idx"));
    REQUIRE(index_shard(1).exit_code == 0);
    const test::RunResult whole = merge((tmp / "s0").string() + " " + (tmp / "s1").string());
    CHECK_MESSAGE(whole.exit_code == 0, whole.err);
    CHECK(fs::exists(tmp / "idx" / "manifest.json"));

    // retro-knn's merge the same
    const auto knn_shard = [&](int i) {
        return test::run_tool("retro-knn", (tmp / "idx").string() + " --db " + db.string() + " --out " +
                                               (tmp / ("k" + std::to_string(i))).string() + " --block 8 --shard " +
                                               std::to_string(i) + "/2 --quiet");
    };
    const test::RunResult k0 = knn_shard(0);
    REQUIRE_MESSAGE(k0.exit_code == 0, k0.err);
    const test::RunResult knn_partial =
        test::run_tool("retro-knn", "merge " + (tmp / "k0").string() + " --out " + (tmp / "nb").string() + " --quiet");
    CHECK(knn_partial.exit_code == 2);
    CHECK_FALSE(fs::exists(tmp / "nb"));

    // a bert job stopped early, resumed as bow: refused, and no idf.npy written into the bert job's folder
    const fs::path model = test::source_dir() / "tests" / "reference" / "golden" / "bert_tiny";
    const test::RunResult bert = test::run_tool("retro-index", db.string() + " --embedder bert --model " + model.string() +
                                                                   " --out " + (tmp / "b").string() + " --shard 0/2 --quiet");
    REQUIRE(bert.exit_code == 0);
    const test::RunResult as_bow =
        test::run_tool("retro-index", db.string() + " --out " + (tmp / "b").string() + " --shard 0/2 --resume --quiet");
    CHECK(as_bow.exit_code == 2);
    CHECK_MESSAGE(as_bow.err.find("records another job: --embedder is bow, the folder's bert") != std::string::npos, as_bow.err);
    CHECK_FALSE(fs::exists(tmp / "b" / "idf.npy"));
    // an unfinished shard resumed with another index: refused, as a finished folder refuses it (it was accepted)
    const test::RunResult other_index = test::run_tool("retro-index", db.string() + " --out " + (tmp / "s1").string() +
                                                                           " --block 8 --shard 1/2 --resume --index HNSW16 --quiet");
    CHECK(other_index.exit_code == 2);
    CHECK_MESSAGE(other_index.err.find("records another job: factory is \"HNSW16\"") != std::string::npos, other_index.err);
}

TEST_CASE("index refusals: options of another embedder are refused, not ignored") {
    test::TempDir tmp("index-refusals-options");
    const fs::path db = test::chunk_test_db(tmp, 12);
    const std::string model = (test::source_dir() / "tests" / "reference" / "golden" / "bert_tiny").string();
    const std::vector<std::pair<std::string, std::string>> cases = {
        {" --model " + model, "--model: does not apply to --embedder bow"},
        {" --max-length 64", "--max-length: does not apply to --embedder bow"},
        {" --batch 8", "--batch: does not apply to --embedder bow"},
        {" --tokenizer /nonexistent", "--tokenizer: does not apply to --embedder bow"},   // was ignored, even missing
        {" --embedder bert --model " + model + " --dim 64", "--dim: applies to --embedder bow only"},
    };
    for (const auto& [args, why] : cases) {
        const test::RunResult r = test::run_tool("retro-index", db.string() + " --out " + (tmp / "i").string() + args);
        CAPTURE(args);
        CHECK(r.exit_code == 2);
        CHECK_MESSAGE(r.err.find(why) != std::string::npos, r.err);
        CHECK_FALSE(fs::exists(tmp / "i"));
    }
}

TEST_CASE("index refusals: the folder an interrupted merge or bm25 build leaves is known as retro-index's and not resumed") {
    // a helper's pass (session 52): Ctrl-C in `retro-index merge` or a --kind bm25 build left parts/ (and the merge's
    // embeddings.npy) with no state.json: retro-tokenizer wrote into it, a dense --resume took it, retro-knn called it
    // "not made by a RetroKit tool", and the bm25 build's note said "--resume". Both now mark the folder at their
    // start; here the folder is made as Ctrl-C leaves it (the mark, parts/), and then each consumer is asked
    test::TempDir tmp("index-unresumable");
    const fs::path db = test::chunk_test_db(tmp, 12);
    for (const std::string run : {"a merge", "a --kind bm25 build"}) {
        CAPTURE(run);
        const fs::path out = tmp / (run == "a merge" ? "merged" : "bm");
        fs::create_directories(out / "parts");
        test::write_text(out / "state.json", nlohmann::json{{"tool", "retro-index"}, {"resumable", false}, {"run", run}}.dump());
        const test::RunResult resumed = test::run_tool("retro-index", db.string() + " --out " + out.string() + " --resume --quiet");
        CHECK(resumed.exit_code == 2);
        CHECK_MESSAGE(resumed.err.find("holds an interrupted retro-index run that cannot be resumed (" + run + ")") !=
                          std::string::npos,
                      resumed.err);
        // the same command without --resume: told to use --force only (--resume was offered, then refused)
        const test::RunResult again = test::run_tool("retro-index", db.string() + " --out " + out.string() + " --quiet");
        CHECK(again.exit_code == 2);
        CHECK_MESSAGE(again.err.find("holds an interrupted retro-index run that cannot be resumed (fix: pass --force to make it "
                                     "again)") != std::string::npos,
                      again.err);
        const test::RunResult tok = test::run_tool("retro-tokenizer", "train " + db.string() + " --out " + out.string());
        CHECK(tok.exit_code == 2);
        CHECK_MESSAGE(tok.err.find("holds an unfinished retro-index run, not retro-tokenizer's output (fix: choose another "
                                   "--out, or run that retro-index command again with --force)") != std::string::npos,
                      tok.err);
        const test::RunResult knn = test::run_tool("retro-knn", out.string() + " --db " + db.string() + " --out " +
                                                                   (tmp / "k").string() + " --quiet");
        CHECK(knn.exit_code == 2);
        CHECK_MESSAGE(knn.err.find("unfinished retro-index run (stopped before its end) (fix: run the same retro-index "
                                   "command again with --force") != std::string::npos,
                      knn.err);
        CHECK_FALSE(fs::exists(out / "manifest.json"));
    }
    // the bm25 build itself: --resume builds again (nothing to resume), and the finished folder keeps no mark
    const test::RunResult bm = test::run_tool("retro-index", db.string() + " --out " + (tmp / "bm").string() + " --kind bm25 --resume --quiet");
    CHECK_MESSAGE(bm.exit_code == 0, bm.err);
    CHECK(fs::exists(tmp / "bm" / "manifest.json"));
    CHECK_FALSE(fs::exists(tmp / "bm" / "state.json"));
}

TEST_CASE("index refusals: shards searched another way are not merged - --ef-search, --faiss-search") {
    // a helper's pass (session 54): retro-index merge took the first-named shard's --ef-search / --nprobe (the merged
    // index changed with the order of the shards), and retro-knn recorded no --faiss-search (a shard or a --resume of
    // the other kind was merged into neighbours neither search gives)
    test::TempDir tmp("index-search-kind");
    const fs::path db = test::chunk_test_db(tmp, 11);
    const auto index_shard = [&](const std::string& name, int i, const std::string& extra) {
        return test::run_tool("retro-index", db.string() + " --out " + (tmp / name).string() + " --index HNSW8 --block 8 --shard " +
                                                 std::to_string(i) + "/2 --quiet" + extra);
    };
    REQUIRE(index_shard("s0", 0, " --ef-search 16").exit_code == 0);
    REQUIRE(index_shard("s1", 1, " --ef-search 16").exit_code == 0);
    REQUIRE(index_shard("s1e", 1, " --ef-search 32").exit_code == 0);
    const test::RunResult mixed = test::run_tool("retro-index", "merge " + (tmp / "s0").string() + " " + (tmp / "s1e").string() +
                                                                    " --out " + (tmp / "mixed").string());
    test::expect_refused(mixed, {"s1e/state.json: belongs to another job than", "ef_search is 32, the first shard's 16"});
    CHECK_FALSE(fs::exists(tmp / "mixed"));
    const test::RunResult whole = test::run_tool("retro-index", "merge " + (tmp / "s0").string() + " " + (tmp / "s1").string() +
                                                                    " --out " + (tmp / "idx").string() + " --quiet");
    REQUIRE_MESSAGE(whole.exit_code == 0, whole.err);

    const auto knn_shard = [&](const std::string& name, int i, const std::string& extra) {
        return test::run_tool("retro-knn", (tmp / "idx").string() + " --db " + db.string() + " --out " + (tmp / name).string() +
                                               " --block 8 --shard " + std::to_string(i) + "/2 --quiet" + extra);
    };
    REQUIRE(knn_shard("k0", 0, "").exit_code == 0);
    REQUIRE(knn_shard("k1f", 1, " --faiss-search").exit_code == 0);
    const test::RunResult kmixed = test::run_tool("retro-knn", "merge " + (tmp / "k0").string() + " " + (tmp / "k1f").string() +
                                                                   " --out " + (tmp / "km").string());
    test::expect_refused(kmixed, {"faiss_search is true, the first shard's"});
    // a --resume of the other kind is refused too
    test::expect_refused(knn_shard("k0", 0, " --faiss-search --resume"), {"faiss_search"});
}

TEST_CASE("index refusals: --force removes nothing before the embedder's own refusals, a finished BM25 index is not rebuilt by --resume") {
    // a helper's pass (session 54): `--dim 0 --force` (or a t5/clip --model that is no model) deleted a finished index,
    // then refused; `--kind bm25 --resume` rebuilt a finished index with other parameters, as --force would
    test::TempDir tmp("index-force-late");
    const fs::path db = test::chunk_test_db(tmp, 12), idx = tmp / "idx", bm25 = tmp / "bm25";
    REQUIRE(test::run_tool("retro-index", db.string() + " --out " + idx.string() + " --dim 16 --quiet").exit_code == 0);
    const std::string before = test::read_text(idx / "manifest.json");
    test::expect_refused(test::run_tool("retro-index", db.string() + " --out " + idx.string() + " --dim 0 --force"),
                         {"--dim: must be positive"});
    test::expect_refused(test::run_tool("retro-index", db.string() + " --out " + idx.string() + " --embedder t5 --model " +
                                                           tmp.path.string() + " --force"),
                         {"config.json: missing"});
    CHECK(test::read_text(idx / "manifest.json") == before);
    CHECK(fs::exists(idx / "index.faiss"));
    CHECK(fs::exists(idx / "embeddings.npy"));
    // the default factory named: resumed where given by its name, a refusal names it (it said `the folder's ""`)
    const std::string built = nlohmann::json::parse(before)["index"]["factory"].get<std::string>();
    const test::RunResult named = test::run_tool("retro-index", db.string() + " --out " + idx.string() + " --dim 16 --resume --index " + built);
    CHECK_MESSAGE(named.exit_code == 0, named.err);
    CHECK(named.err.find("is already complete") != std::string::npos);
    test::expect_refused(test::run_tool("retro-index", db.string() + " --out " + idx.string() + " --dim 16 --resume --index HNSW8"),
                         {"parameters.factory is \"HNSW8\", the folder's \"" + built + "\""});

    REQUIRE(test::run_tool("retro-index", db.string() + " --out " + bm25.string() + " --kind bm25 --quiet").exit_code == 0);
    const std::string bm25_before = test::read_text(bm25 / "manifest.json");
    const test::RunResult same = test::run_tool("retro-index", db.string() + " --out " + bm25.string() + " --kind bm25 --resume");
    CHECK_MESSAGE(same.exit_code == 0, same.err);
    CHECK(same.err.find("is already complete") != std::string::npos);
    test::expect_refused(test::run_tool("retro-index", db.string() + " --out " + bm25.string() + " --kind bm25 --resume --bm25-k1 2"),
                         {"already holds a complete index of another job: parameters.k1 is 2.0, the folder's"});
    CHECK(test::read_text(bm25 / "manifest.json") == bm25_before);
    // the other kind of index, or another tool's folder, named as such (a review of session 54's diff)
    test::expect_refused(test::run_tool("retro-index", db.string() + " --out " + idx.string() + " --kind bm25 --resume"),
                         {"already holds a complete index of another job: it is a dense index"});
    test::expect_refused(test::run_tool("retro-index", db.string() + " --out " + bm25.string() + " --dim 16 --resume"),
                         {"already holds a complete index of another job: it is a BM25 index (--kind bm25)"});
    test::expect_refused(test::run_tool("retro-index", db.string() + " --out " + db.string() + " --kind bm25 --resume"),
                         {"the database"});

    // BM25 neighbours of queries chunked with another tokenizer: refused as the dense search refuses them (Xapian scored
    // their ids as the database's terms), and --extra, which a BM25 search has no use for
    const fs::path corpus = tmp / "q.txt", tok2 = tmp / "tok2", qdb = tmp / "qdb";
    std::string text;
    for (int i = 0; i < 200; i++) text += "query words " + std::to_string(i * 7919 % 1000) + " and some more text\n";
    test::write_text(corpus, text);
    REQUIRE(test::run_tool("retro-tokenizer", "train " + corpus.string() + " --out " + tok2.string() + " --vocab-size 300 --quiet")
                .exit_code == 0);
    REQUIRE(test::run_tool("retro-chunk", corpus.string() + " --tokenizer " + tok2.string() + " --out " + qdb.string() + " --quiet")
                .exit_code == 0);
    test::expect_refused(test::run_tool("retro-knn", bm25.string() + " --db " + db.string() + " --queries " + qdb.string() + " --out " +
                                                         (tmp / "k").string()),
                         {"was chunked with another tokenizer than --db"});
    CHECK_FALSE(fs::exists(tmp / "k"));
    test::expect_refused(test::run_tool("retro-knn", bm25.string() + " --db " + db.string() + " --extra 3 --out " + (tmp / "k").string()),
                         {"--extra: applies to FAISS indices' searches, not to a bm25 index"});
}
