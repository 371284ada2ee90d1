// retro-knn show: neighbour ids out of range refused naming the file and row, control characters printed as text,
// and a --queries run's query chunks beside their neighbours.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <set>
#include <tuple>

#include "core/cuda_device.h"
#include "core/manifest.h"
#include "core/npy.h"
#include "data/chunk_db.h"
#include "embed/bow_embedder.h"
#include "index/exact_search.h"
#include "index/faiss_index.h"
#include "index/knn_build.h"
#include "test_chunk_util.h"
#include "test_knn_oracle.h"
#include "test_train_fixtures.h"
#include "test_knn_small_db.h"
#include "test_util.h"
#include "text/tokenizer.h"

using namespace retro;
namespace fs = std::filesystem;

using test::knn_oracle;
using test::SmallDb;

TEST_CASE("knn: show refuses neighbour ids outside -1 .. N-1 naming the file and row - and prints nothing") {
    SmallDb s(20000, 5);
    fs::path idx = s.tmp / "index", knn = s.tmp / "knn";
    REQUIRE(test::run_tool("retro-index", s.db.string() + " --out " + idx.string() + " --dim 16 --index Flat --quiet").exit_code == 0);
    REQUIRE(test::run_tool("retro-knn", idx.string() + " --db " + s.db.string() + " --out " + knn.string() + " --neighbours 3 --exact --quiet")
                .exit_code == 0);
    const std::int64_t n = ChunkDb(s.db.string()).chunk_count();
    std::vector<std::int64_t> ids;
    {
        NpyArray nb((knn / "neighbours.npy").string());
        ids.assign(nb.data<std::int64_t>(), nb.data<std::int64_t>() + nb.numel());
    }
    // -1 pads a short row: shown as no neighbour
    ids[5 * 3 + 2] = -1;
    npy_save((knn / "neighbours.npy").string(), {n, 3}, ids.data());
    // the edited file is not the one retro-knn wrote: refused by its fingerprint, unless --no-verify
    auto edited = test::run_tool("retro-knn", "show " + knn.string() + " --db " + s.db.string() + " --chunk 5 --json");
    CHECK(edited.exit_code == 2);
    CHECK(edited.err.find("neighbours.npy") != std::string::npos);
    CHECK(edited.out.empty());
    auto ok = test::run_tool("retro-knn", "show " + knn.string() + " --db " + s.db.string() + " --chunk 5 --json --no-verify");
    REQUIRE_MESSAGE(ok.exit_code == 0, ok.err);
    CHECK(nlohmann::json::parse(ok.out)["neighbours"].size() == 2);
    for (std::int64_t bad : {std::int64_t{100'000'000'000}, std::int64_t{-5}, n}) {
        CAPTURE(bad);
        ids[6 * 3 + 1] = bad;   // row 6, shown second with --count 2: nothing of row 5 is printed either
        npy_save((knn / "neighbours.npy").string(), {n, 3}, ids.data());
        auto r = test::run_tool("retro-knn", "show " + knn.string() + " --db " + s.db.string() + " --chunk 5 --count 2 --no-verify");
        CHECK(r.exit_code == 2);   // 100000000000 used to end in SIGSEGV, -5 to read the file's header
        CHECK_MESSAGE(r.err.find((knn / "neighbours.npy").string() + ": row 6 names chunk " + std::to_string(bad) + " outside [0, " +
                                 std::to_string(n) + ")") != std::string::npos,
                      r.err);
        CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
        CHECK_MESSAGE(r.out.empty(), r.out);
    }
}

TEST_CASE("knn: show prints the chunks' control characters as text, and --json as they are") {
    test::TempDir tmp("knn-esc");
    std::string lines;
    for (int d = 0; d < 12; ++d)
        lines += "{\"text\": \"alert \\u001b[31m red " + std::to_string(d) + " \\u001b[0m the log line of the build\"}\n";
    const fs::path corpus = tmp / "esc.jsonl", db = tmp / "db", idx = tmp / "index", knn = tmp / "knn";
    test::write_text(corpus, lines);
    REQUIRE(test::run_tool("retro-chunk", corpus.string() + " --tokenizer " + test::chunk_test_tokenizer() +
                                              " --chunk-size 16 --seq-len 64 --out " + db.string() + " --quiet").exit_code == 0);
    REQUIRE(test::run_tool("retro-index", db.string() + " --out " + idx.string() + " --dim 16 --index Flat --quiet").exit_code == 0);
    REQUIRE(test::run_tool("retro-knn", idx.string() + " --db " + db.string() + " --out " + knn.string() + " --neighbours 1 --exact --quiet")
                .exit_code == 0);
    const auto shown = test::run_tool("retro-knn", "show " + knn.string() + " --db " + db.string() + " --chunk 0");
    REQUIRE_MESSAGE(shown.exit_code == 0, shown.err);
    CHECK(shown.out.find('\x1b') == std::string::npos);   // the query chunk and its neighbour turned the terminal red
    CHECK_MESSAGE(std::count(shown.out.begin(), shown.out.end(), '\\') == 2, shown.out);   // \x1b in each of the two texts
    const auto json = test::run_tool("retro-knn", "show " + knn.string() + " --db " + db.string() + " --chunk 0 --json");
    REQUIRE(json.exit_code == 0);
    const auto j = nlohmann::json::parse(json.out);
    CHECK(j["text"].get<std::string>().find('\x1b') != std::string::npos);
    CHECK(j["neighbours"][0]["text"].get<std::string>().find('\x1b') != std::string::npos);
}

TEST_CASE("knn: show of a --queries run shows the query database's chunks beside their neighbours in --db") {
    SmallDb s(20000, 7);
    const fs::path corpus = test::chunk_test_jsonl(s.tmp, "q.jsonl", 8000, 600, 8);
    const fs::path qdb = s.tmp / "qdb", idx = s.tmp / "index", knn = s.tmp / "knn";
    REQUIRE(test::run_tool("retro-chunk", corpus.string() + " --tokenizer " + test::chunk_test_tokenizer() +
                                              " --chunk-size 16 --seq-len 64 --out " + qdb.string() + " --quiet").exit_code == 0);
    REQUIRE(test::run_tool("retro-index", s.db.string() + " --out " + idx.string() + " --dim 16 --index Flat --quiet").exit_code == 0);
    auto r = test::run_tool("retro-knn", idx.string() + " --db " + s.db.string() + " --queries " + qdb.string() + " --out " +
                                             knn.string() + " --neighbours 3 --exact --quiet");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    const ChunkDb q(qdb.string()), db(s.db.string());
    REQUIRE(q.chunk_count() != db.chunk_count());
    // --db and --queries left out: the folders the neighbours folder records (before session 67 --db was required and
    // a missing --queries refused with "add --queries QDB")
    const std::string given = " --db " + s.db.string() + " --queries " + qdb.string() + " --chunk 3 --count 2 --json";
    const test::RunResult full = test::run_tool("retro-knn", "show " + knn.string() + given);
    REQUIRE_MESSAGE(full.exit_code == 0, full.err);
    const test::RunResult bare = test::run_tool("retro-knn", "show " + knn.string() + " --chunk 3 --count 2 --json");
    CHECK_MESSAGE(bare.exit_code == 0, bare.err);
    CHECK(bare.out == full.out);
    // a recorded folder that moved: named, and found where it is given
    const fs::path moved = s.tmp / "qdb-moved";
    fs::rename(qdb, moved);
    const test::RunResult gone = test::run_tool("retro-knn", "show " + knn.string() + " --chunk 3");
    CHECK(gone.exit_code == 2);
    CHECK_MESSAGE(gone.err.find(qdb.string() + ": the --queries database " + knn.string() + " was computed for is gone (fix: "
                                "pass --queries with its new place)") != std::string::npos,
                  gone.err);
    CHECK(gone.out.empty());
    CHECK(test::run_tool("retro-knn", "show " + knn.string() + " --queries " + moved.string() + " --chunk 3 --count 2 --json").out ==
          full.out);
    fs::rename(moved, qdb);
    auto wrong = test::run_tool("retro-knn", "show " + knn.string() + " --db " + s.db.string() + " --queries " + s.db.string());
    CHECK(wrong.exit_code == 2);
    CHECK(wrong.err.find("is not the --queries database") != std::string::npos);
    const std::int64_t last = q.chunk_count() - 1;
    auto shown = test::run_tool("retro-knn", "show " + knn.string() + " --db " + s.db.string() + " --queries " + qdb.string() +
                                                 " --chunk " + std::to_string(last) + " --json");
    REQUIRE_MESSAGE(shown.exit_code == 0, shown.err);
    const auto j = nlohmann::json::parse(shown.out);
    CHECK(j.at("chunk") == last);
    CHECK(j.at("doc") == q.doc_of(last));
    const NpyArray nb((knn / "neighbours.npy").string());
    REQUIRE(j.at("neighbours").size() == 3);
    for (int n = 0; n < 3; n++) {
        const std::int64_t id = nb.data<std::int64_t>()[last * 3 + n];
        CHECK(j.at("neighbours")[n].at("chunk") == id);
        CHECK(j.at("neighbours")[n].at("doc") == db.doc_of(id));
    }
    // as text: the row is named a query chunk
    auto text = test::run_tool("retro-knn", "show " + knn.string() + " --db " + s.db.string() + " --queries " + qdb.string() +
                                                " --chunk " + std::to_string(last));
    REQUIRE_MESSAGE(text.exit_code == 0, text.err);
    CHECK(text.out.rfind("query chunk " + std::to_string(last) + " (document", 0) == 0);
    // a run over --db's own chunks given --queries: named
    const fs::path self = s.tmp / "self-knn";
    REQUIRE(test::run_tool("retro-knn", idx.string() + " --db " + s.db.string() + " --out " + self.string() +
                                            " --neighbours 3 --exact --quiet").exit_code == 0);
    auto extra = test::run_tool("retro-knn", "show " + self.string() + " --db " + s.db.string() + " --queries " + qdb.string());
    CHECK(extra.exit_code == 2);
    CHECK(extra.err.find("drop --queries") != std::string::npos);
}
