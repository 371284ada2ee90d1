// BM25 (lexical) retrieval: retro-index --kind bm25 + retro-knn against a brute-force BM25 oracle written
// from the formula in docs/index.md (Xapian's BM25Weight with k2 = 0), ties by chunk id, the same-document
// exclusion, shards + merge, the generation retriever, and bad input (one line, exit 2, nothing complete).
#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <vector>

#include "core/error.h"
#include "core/manifest.h"
#include "core/npy.h"
#include "data/chunk_db.h"
#include "generate/chunk_retriever.h"
#include "index/bm25_params.h"
#include "index/bm25_postings.h"
#include "index/bm25_search.h"
#include "test_bm25_oracle.h"
#include "test_chunk_util.h"
#include "test_util.h"

using namespace retro;
namespace fs = std::filesystem;
using test::Bm25Oracle;
using test::Bm25OracleParams;

namespace {

// A database of ~50 documents (a few hundred chunks of 16 tokens) in which three documents appear three
// times each, so their chunks tie exactly with chunks of other documents (the tie rule is exercised).
struct Bm25Db {
    test::TempDir tmp{"bm25"};
    fs::path db;
    explicit Bm25Db(std::uint64_t seed = 1) {
        auto corpus = test::chunk_test_jsonl(tmp, "c.jsonl", 30000, 600, seed);
        std::vector<std::string> lines;
        {
            std::ifstream in(corpus);
            for (std::string l; std::getline(in, l);) lines.push_back(l);
        }
        {
            std::ofstream out(corpus, std::ios::app);
            for (int copy = 0; copy < 2; ++copy)
                for (int d = 0; d < 3; ++d) out << lines[static_cast<std::size_t>(d)] << "\n";
        }
        db = tmp / "db";
        auto r = test::run_tool("retro-chunk", corpus.string() + " --tokenizer " + test::chunk_test_tokenizer() +
                                                   " --chunk-size 16 --seq-len 64 --out " + db.string() + " --quiet");
        REQUIRE_MESSAGE(r.exit_code == 0, r.err);
        ChunkDb cdb(db.string());
        REQUIRE(cdb.doc_count() >= 30);
        REQUIRE(cdb.chunk_count() >= 200);
    }
};

// Checks retro-knn's output in `knn` against the oracle for every chunk; returns the rows whose expected
// top k holds an exact tie.
int check_against_oracle(const ChunkDb& db, const Bm25Oracle& oracle, const fs::path& knn, int k) {
    NpyArray ids((knn / "neighbours.npy").string()), sc((knn / "distances.npy").string());
    const std::int64_t n = db.chunk_count();
    REQUIRE(ids.shape() == std::vector<std::int64_t>{n, k});
    REQUIRE(sc.shape() == std::vector<std::int64_t>{n, k});
    std::vector<std::int64_t> docs(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) docs[static_cast<std::size_t>(i)] = db.doc_of(i);
    std::vector<std::int32_t> rows;
    db.rows(0, n, rows);
    int tie_rows = 0;
    for (std::int64_t i = 0; i < n; ++i) {
        const auto q = Bm25Oracle::counts(rows.data() + i * db.chunk_size(), db.chunk_size());
        const auto want = oracle.top(q, k, &docs, docs[static_cast<std::size_t>(i)]);
        for (int r = 0; r < k; ++r) {
            const std::int64_t got = ids.data<std::int64_t>()[i * k + r];
            const float got_sc = sc.data<float>()[i * k + r];
            INFO("chunk " << i << " rank " << r);
            if (got >= 0) CHECK(docs[static_cast<std::size_t>(got)] != docs[static_cast<std::size_t>(i)]);
            if (r >= static_cast<int>(want.size())) {
                CHECK(got == -1);
                CHECK(std::isinf(got_sc));
                continue;
            }
            CHECK(got == want[static_cast<std::size_t>(r)].second);
            CHECK(got_sc == doctest::Approx(want[static_cast<std::size_t>(r)].first).epsilon(1e-5));
            if (r > 0 && want[static_cast<std::size_t>(r)].first == want[static_cast<std::size_t>(r) - 1].first) ++tie_rows;
        }
    }
    return tie_rows;
}

}  // namespace

TEST_CASE("bm25: retro-knn equals a brute-force BM25 oracle - ties by chunk id - never the query's document") {
    Bm25Db s;
    fs::path idx = s.tmp / "bm25", knn = s.tmp / "knn";
    auto r = test::run_tool("retro-index", s.db.string() + " --out " + idx.string() + " --kind bm25 --quiet");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    auto m = manifest_read(idx.string());
    CHECK(m["kind"] == "bm25");
    CHECK(m["bm25"]["k1"] == 1.0);
    CHECK(m["bm25"]["k2"] == 0.0);
    CHECK(m["bm25"]["b"] == 0.5);
    CHECK(manifest_input(m, "db", "fingerprint") == folder_fingerprint(manifest_read(s.db.string())));
    CHECK(fs::exists(idx / "bm25.glass"));
    CHECK(!fs::exists(idx / "parts"));
    r = test::run_tool("retro-knn", idx.string() + " --db " + s.db.string() + " --out " + knn.string() +
                                        " --neighbours 4 --threads 2 --block 100 --quiet");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    ChunkDb db(s.db.string());
    const int ties = check_against_oracle(db, Bm25Oracle(db, {}), knn, 4);
    CHECK(ties > 0);   // the duplicated documents tie exactly: ordered by chunk id
    auto km = manifest_read(knn.string());
    CHECK(km["parameters"]["kind"] == "bm25");
    CHECK(km["parameters"]["same_document_filter"] == true);
    CHECK(manifest_input(km, "index", "fingerprint") == folder_fingerprint(m));
    CHECK(!fs::exists(knn / "state.json"));

    // other parameters reach the search (and change the scores)
    fs::path idx2 = s.tmp / "bm25b", knn2 = s.tmp / "knn2";
    r = test::run_tool("retro-index", s.db.string() + " --out " + idx2.string() +
                                          " --kind bm25 --bm25-k1 1.6 --bm25-b 0.9 --bm25-k3 0 --bm25-min-normlen 0.2 --quiet");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    r = test::run_tool("retro-knn", idx2.string() + " --db " + s.db.string() + " --out " + knn2.string() + " --neighbours 3 --quiet");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    Bm25OracleParams p2;
    p2.k1 = 1.6, p2.b = 0.9, p2.k3 = 0, p2.min_normlen = 0.2;
    check_against_oracle(db, Bm25Oracle(db, p2), knn2, 3);
    CHECK(test::read_text(knn / "distances.npy") != test::read_text(knn2 / "distances.npy"));
}

TEST_CASE("bm25: sharded + merged and resumed retro-knn runs equal one straight run - byte for byte") {
    Bm25Db s(2);
    fs::path idx = s.tmp / "bm25";
    REQUIRE(test::run_tool("retro-index", s.db.string() + " --out " + idx.string() + " --kind bm25 --quiet").exit_code == 0);
    std::string base = idx.string() + " --db " + s.db.string() + " --neighbours 2 --block 64 --quiet";
    REQUIRE(test::run_tool("retro-knn", base + " --out " + (s.tmp / "k").string()).exit_code == 0);
    REQUIRE(test::run_tool("retro-knn", base + " --out " + (s.tmp / "k0").string() + " --shard 0/2 --threads 1").exit_code == 0);
    REQUIRE(test::run_tool("retro-knn", base + " --out " + (s.tmp / "k1").string() + " --shard 1/2").exit_code == 0);
    CHECK(!fs::exists(s.tmp / "k0/manifest.json"));
    auto r = test::run_tool("retro-knn", "merge " + (s.tmp / "k0").string() + " " + (s.tmp / "k1").string() + " --out " +
                                             (s.tmp / "km").string() + " --quiet");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    fs::copy(s.tmp / "k0", s.tmp / "kr", fs::copy_options::recursive);   // what a killed run leaves
    r = test::run_tool("retro-knn", base + " --out " + (s.tmp / "kr").string() + " --resume");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    for (const char* f : {"neighbours.npy", "distances.npy"}) {
        CHECK(test::read_text(s.tmp / "k" / f) == test::read_text(s.tmp / "km" / f));
        CHECK(test::read_text(s.tmp / "k" / f) == test::read_text(s.tmp / "kr" / f));
    }
    auto again = test::run_tool("retro-index", s.db.string() + " --out " + idx.string() + " --kind bm25");
    CHECK(again.exit_code == 2);
    CHECK(again.err.find("already exists: it holds a finished index") != std::string::npos);
    r = test::run_tool("retro-index", s.db.string() + " --out " + idx.string() + " --kind bm25 --force --quiet");
    CHECK_MESSAGE(r.exit_code == 0, r.err);
}

TEST_CASE("bm25: the generation retriever searches a bm25 folder by the chunk's tokens - no document filter") {
    Bm25Db s(3);
    fs::path idx = s.tmp / "bm25";
    REQUIRE(test::run_tool("retro-index", s.db.string() + " --out " + idx.string() + " --kind bm25 --quiet").exit_code == 0);
    RetrieverOptions ro;
    ro.index = idx.string();
    ro.db = s.db.string();
    ro.k = 3;
    ChunkRetriever retriever(ro, nullptr);
    CHECK(retriever.embedder_name() == "bm25");
    const ChunkDb& db = retriever.db();
    const Bm25Oracle oracle(db, {});
    const int cs = db.chunk_size();
    std::vector<std::int32_t> chunks;
    const std::vector<std::int64_t> rows = {0, 7, db.chunk_count() / 2, db.chunk_count() - 1};
    for (auto r : rows) db.rows(r, r + 1, chunks);
    std::vector<std::int32_t> tokens(rows.size() * 3 * 2 * cs);
    std::vector<Retrieval> found;
    retriever.retrieve(chunks.data(), static_cast<std::int64_t>(rows.size()), tokens.data(), found);
    REQUIRE(found.size() == rows.size());
    std::vector<std::int32_t> want_tokens(2 * cs);
    for (std::size_t i = 0; i < rows.size(); ++i) {
        const auto want = oracle.top(Bm25Oracle::counts(chunks.data() + i * cs, cs), 3, nullptr, -1);
        REQUIRE(want.size() == 3);
        for (int j = 0; j < 3; ++j) {
            CHECK(found[i].ids[j] == want[j].second);
            CHECK(found[i].scores[j] == doctest::Approx(want[j].first).epsilon(1e-5));
            db.neighbour_tokens(want[j].second, want_tokens.data());
            CHECK(std::equal(want_tokens.begin(), want_tokens.end(), tokens.begin() + (i * 3 + j) * 2 * cs));
        }
    }
}

TEST_CASE("bm25: bad input ends with exit 2 - one line - nothing complete-looking") {
    Bm25Db s(4);
    Bm25Db other(5);
    fs::path idx = s.tmp / "bm25";
    REQUIRE(test::run_tool("retro-index", s.db.string() + " --out " + idx.string() + " --kind bm25 --quiet").exit_code == 0);
    auto expect_bad = [](const test::RunResult& r, const std::string& what, const fs::path& out) {
        CHECK(r.exit_code == 2);
        CHECK_MESSAGE(r.err.find(what) != std::string::npos, r.err);
        CHECK(test::line_count(r.err) == 1);
        CHECK(!fs::exists(out / "manifest.json"));
        CHECK(!fs::exists(out / "neighbours.npy"));
    };
    const std::string db = " --db " + s.db.string() + " --out ";
    // the bm25 folder was built from another database
    expect_bad(test::run_tool("retro-knn", idx.string() + " --db " + other.db.string() + " --out " + (s.tmp / "k1").string()),
               "is not the database", s.tmp / "k1");
    // a corrupt Xapian file (past the fingerprint check, as with --no-verify or a folder of other code)
    fs::copy(idx, s.tmp / "corrupt", fs::copy_options::recursive);
    test::write_text(s.tmp / "corrupt/bm25.glass", "not a xapian database");
    expect_bad(test::run_tool("retro-knn", (s.tmp / "corrupt").string() + db + (s.tmp / "k2").string() + " --no-verify"),
               "corrupt or unreadable Xapian database", s.tmp / "k2");
    // flags of the dense search
    expect_bad(test::run_tool("retro-knn", idx.string() + db + (s.tmp / "k3").string() + " --measure-recall 100"),
               "--measure-recall: does not apply to a bm25 index", s.tmp / "k3");
    expect_bad(test::run_tool("retro-knn", idx.string() + db + (s.tmp / "k4").string() + " --exact"),
               "--exact: does not apply to a bm25 index", s.tmp / "k4");
    expect_bad(test::run_tool("retro-index", s.db.string() + " --out " + (s.tmp / "i1").string() + " --kind bm25 --shard 0/2"),
               "--shard: does not apply to --kind bm25", s.tmp / "i1");
    expect_bad(test::run_tool("retro-index", s.db.string() + " --out " + (s.tmp / "i2").string() + " --kind bm25 --bm25-b 1.5"),
               "--bm25-b: must be between 0 and 1", s.tmp / "i2");
    expect_bad(test::run_tool("retro-index", s.db.string() + " --out " + (s.tmp / "i3").string() + " --bm25-k1 2"),
               "--bm25-k1: applies to --kind bm25 only", s.tmp / "i3");
    // the generation retriever refuses the wrong database too
    RetrieverOptions ro;
    ro.index = idx.string();
    ro.db = other.db.string();
    CHECK_THROWS_WITH_AS(ChunkRetriever(ro, nullptr), doctest::Contains("is not the database"), UserError);
}

TEST_CASE("bm25: the in-memory postings search equals the oracle for every chunk and parameter set") {
    // Bm25PostingsSearcher (retro-knn's default) against the brute-force oracle, every chunk as the query: with and
    // without the document filter, k from 1 to more than any query matches, queries with terms no chunk holds or with
    // no term at all, and parameter sets where the length or the counts drop out (b = 0, k1 = 0, k3 = 0). Xapian's
    // matcher (Bm25Searcher) beside it: its scores agree; its top k does not always (below).
    Bm25Db s(6);
    ChunkDb db(s.db.string());
    const std::int64_t n = db.chunk_count();
    const int cs = db.chunk_size();
    std::vector<std::int32_t> rows;
    db.rows(0, n, rows);
    std::vector<std::int64_t> docs(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) docs[static_cast<std::size_t>(i)] = db.doc_of(i);
    // extra queries: terms no chunk holds, pad/bos/eos only, one repeated term
    std::vector<std::vector<std::int32_t>> extra = {std::vector<std::int32_t>(static_cast<std::size_t>(cs), 99999),
                                                    std::vector<std::int32_t>(static_cast<std::size_t>(cs), 0),
                                                    std::vector<std::int32_t>(static_cast<std::size_t>(cs), rows[5])};
    extra[0][3] = rows[7];   // one known term among unknown ones
    extra[1][1] = 2, extra[1][2] = 3;
    struct Case {
        std::string flags;
        Bm25Params p;
    };
    std::vector<Case> cases(5);
    cases[1].flags = " --bm25-b 0", cases[1].p.b = 0;
    cases[2].flags = " --bm25-k1 0", cases[2].p.k1 = 0;
    cases[3].flags = " --bm25-k3 0 --bm25-min-normlen 0", cases[3].p.k3 = 0, cases[3].p.min_normlen = 0;
    cases[4].flags = " --bm25-k1 2.5 --bm25-b 1 --bm25-k3 7 --bm25-min-normlen 0.9";
    cases[4].p.k1 = 2.5, cases[4].p.b = 1, cases[4].p.k3 = 7, cases[4].p.min_normlen = 0.9;
    int rows_with_ties = 0, xapian_rows = 0, xapian_differs = 0;
    for (std::size_t ci = 0; ci < cases.size(); ++ci) {
        const Case& c = cases[ci];
        CAPTURE(c.flags);
        const fs::path idx = s.tmp / ("bm25-" + std::to_string(ci));
        auto r = test::run_tool("retro-index", s.db.string() + " --out " + idx.string() + " --kind bm25 --quiet" + c.flags);
        REQUIRE_MESSAGE(r.exit_code == 0, r.err);
        const std::string file = (idx / kBm25DbFile).string();
        Bm25OracleParams op;
        op.k1 = c.p.k1, op.b = c.p.b, op.k3 = c.p.k3, op.min_normlen = c.p.min_normlen;
        const Bm25Oracle oracle(db, op);
        Bm25Searcher xapian(file, c.p, n);
        Bm25Postings postings(file, c.p, n);
        Bm25PostingsSearcher fast(postings);
        CHECK(postings.chunks() == n);
        for (const int k : {1, 4, 100000}) {
            std::vector<std::int64_t> got_ids(static_cast<std::size_t>(k)), x_ids(got_ids.size());
            std::vector<float> got_sc(got_ids.size()), x_sc(got_ids.size());
            const std::int64_t queries = k == 100000 ? 12 : n;   // the long rows on a few queries
            for (std::int64_t q = 0; q < queries + static_cast<std::int64_t>(extra.size()); ++q) {
                const std::int32_t* tokens = q < queries ? rows.data() + q * cs : extra[static_cast<std::size_t>(q - queries)].data();
                const auto qc = Bm25Oracle::counts(tokens, cs);
                for (const bool filter : {true, false}) {
                    const std::int64_t skip = filter ? docs[static_cast<std::size_t>(q % n)] : -1;
                    const auto want = oracle.top(qc, k, filter ? &docs : nullptr, skip);
                    fast.search(tokens, cs, k, filter ? docs.data() : nullptr, skip, got_ids.data(), got_sc.data());
                    INFO("query " << q << " k " << k << " filter " << filter);
                    for (int j = 0; j < k; ++j) {
                        const auto jj = static_cast<std::size_t>(j);
                        if (j >= static_cast<int>(want.size())) {
                            REQUIRE(got_ids[jj] == -1);
                            CHECK(std::isinf(got_sc[jj]));
                            continue;
                        }
                        REQUIRE(got_ids[jj] == want[jj].second);
                        CHECK(got_sc[jj] == doctest::Approx(want[jj].first).epsilon(1e-6));
                        if (j > 0 && want[jj].first == want[jj - 1].first) ++rows_with_ties;
                    }
                    if (k == 4) {   // Xapian's top 4 of the same query
                        xapian.search(tokens, cs, k, filter ? docs.data() : nullptr, skip, x_ids.data(), x_sc.data());
                        ++xapian_rows;
                        xapian_differs += x_ids != got_ids;
                        for (int j = 0; j < k; ++j)
                            if (x_ids[static_cast<std::size_t>(j)] == got_ids[static_cast<std::size_t>(j)] && x_ids[static_cast<std::size_t>(j)] >= 0)
                                CHECK(x_sc[static_cast<std::size_t>(j)] == doctest::Approx(got_sc[static_cast<std::size_t>(j)]).epsilon(1e-6));
                    }
                }
            }
        }
    }
    CHECK(rows_with_ties > 0);   // the duplicated documents: ties ordered by chunk id
    // Xapian's matcher prunes candidates by weight bounds and, where several chunks tie at the k-th place, can skip
    // one that belongs in the top k (k1 = 0: every score a sum of term weights, ties everywhere); see docs/index.md
    MESSAGE("Xapian's top 4 differs from the oracle's on " << xapian_differs << " of " << xapian_rows << " rows");
}

TEST_CASE("bm25: retro-knn's postings and Xapian paths write the same files, and the postings give way where memory is short") {
    Bm25Db s(7);
    const fs::path idx = s.tmp / "bm25";
    REQUIRE(test::run_tool("retro-index", s.db.string() + " --out " + idx.string() + " --kind bm25 --quiet").exit_code == 0);
    const std::string base = idx.string() + " --db " + s.db.string() + " --neighbours 3 --block 50 --out ";
    test::RunResult fast, slow, squeezed, refused, bad;
    fast = test::run_tool("retro-knn", base + (s.tmp / "fast").string());
    {
        test::ScopedEnv xapian("RETRO_BM25_SEARCH", std::string("xapian"));
        slow = test::run_tool("retro-knn", base + (s.tmp / "slow").string());
    }
    {
        test::ScopedEnv tiny("RETRO_MEMORY_LIMIT", std::string("50000"));
        squeezed = test::run_tool("retro-knn", base + (s.tmp / "squeezed").string());
        test::ScopedEnv forced("RETRO_BM25_SEARCH", std::string("postings"));
        refused = test::run_tool("retro-knn", base + (s.tmp / "refused").string());
    }
    {
        test::ScopedEnv typo("RETRO_BM25_SEARCH", std::string("fast"));
        bad = test::run_tool("retro-knn", base + (s.tmp / "bad").string());
    }
    REQUIRE_MESSAGE(fast.exit_code == 0, fast.err);
    REQUIRE_MESSAGE(slow.exit_code == 0, slow.err);
    REQUIRE_MESSAGE(squeezed.exit_code == 0, squeezed.err);
    CHECK(fast.err.find("postings in memory") != std::string::npos);
    CHECK(slow.err.find("Xapian BM25Weight, ") != std::string::npos);
    CHECK(squeezed.err.find("more than half the memory available") != std::string::npos);
    for (const char* f : {"neighbours.npy", "distances.npy"}) {
        CHECK(test::read_text(s.tmp / "fast" / f) == test::read_text(s.tmp / "slow" / f));
        CHECK(test::read_text(s.tmp / "fast" / f) == test::read_text(s.tmp / "squeezed" / f));
    }
    CHECK(refused.exit_code == 2);
    CHECK(refused.err.find("RETRO_BM25_SEARCH=postings: the bm25 index's postings in memory needs about") != std::string::npos);
    CHECK(!fs::exists(s.tmp / "refused" / "manifest.json"));
    CHECK(bad.exit_code == 2);
    CHECK(bad.err.find("RETRO_BM25_SEARCH: is 'fast'; expected xapian or postings") != std::string::npos);
}

TEST_CASE("bm25: a database of more than 4096 chunks is indexed chunk for chunk past the build's first block of rows") {
    // bm25_index_build reads the database 4,096 rows at a time: every other case's database is smaller. Chunks of 4
    // tokens, ~6,000 of them; the postings search of the chunks around and past row 4,096 against the oracle
    test::TempDir tmp("bm25-blocks");
    const auto corpus = test::chunk_test_jsonl(tmp, "c.jsonl", 200000, 600, 9);
    const fs::path dbdir = tmp / "db", idx = tmp / "bm25";
    auto r = test::run_tool("retro-chunk", corpus.string() + " --tokenizer " + test::chunk_test_tokenizer() +
                                               " --chunk-size 4 --seq-len 16 --out " + dbdir.string() + " --quiet");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    ChunkDb db(dbdir.string());
    const std::int64_t n = db.chunk_count();
    const int cs = db.chunk_size();
    REQUIRE(n > 4096 + 1000);
    r = test::run_tool("retro-index", dbdir.string() + " --out " + idx.string() + " --kind bm25 --quiet");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    std::vector<std::int32_t> rows;
    db.rows(0, n, rows);
    const Bm25Params p;
    Bm25OracleParams op;
    op.k1 = p.k1, op.b = p.b, op.k3 = p.k3, op.min_normlen = p.min_normlen;
    const Bm25Oracle oracle(db, op);
    Bm25Postings postings((idx / kBm25DbFile).string(), p, n);
    Bm25PostingsSearcher fast(postings);
    const int k = 4;
    std::vector<std::int64_t> ids(static_cast<std::size_t>(k));
    std::vector<float> sc(ids.size());
    std::int64_t checked = 0;
    for (std::int64_t q = 4090; q < n; q += (q < 4200 ? 1 : 97)) {
        const auto want = oracle.top(Bm25Oracle::counts(rows.data() + q * cs, cs), k, nullptr, -1);
        fast.search(rows.data() + q * cs, cs, k, nullptr, -1, ids.data(), sc.data());
        INFO("query " << q);
        for (std::size_t j = 0; j < want.size(); ++j) {
            CHECK(ids[j] == want[j].second);
            CHECK(sc[j] == doctest::Approx(want[j].first).epsilon(1e-6));
        }
        ++checked;
    }
    CHECK(checked > 110);
}
