// retro-index query: the text of a chunk, asked of a bow, bert, t5 and bm25 index over a tiny
// database, comes back as the first hit (or tied with it); --json and the text output; bad input is
// one line with exit 2.
#include <nlohmann/json.hpp>

#include "core/shell_quote.h"
#include "data/chunk_db.h"
#include "embed/embedder.h"
#include "index/index_query.h"
#include "test_chunk_util.h"
#include "test_util.h"
#include "text/tokenizer.h"

using namespace retro;
namespace fs = std::filesystem;

namespace {

struct QueryDb {
    test::TempDir tmp{"query"};
    fs::path db = tmp / "db";
    QueryDb() {
        auto corpus = test::chunk_test_jsonl(tmp, "c.jsonl", 12000, 600, 7);
        auto r = test::run_tool("retro-chunk", corpus.string() + " --tokenizer " + test::chunk_test_tokenizer() +
                                                   " --chunk-size 16 --seq-len 64 --out " + db.string() + " --quiet");
        REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    }
    fs::path index(const std::string& name, const std::string& flags) const {
        fs::path out = tmp / name;
        auto r = test::run_tool("retro-index", db.string() + " --out " + out.string() + " " + flags + " --quiet");
        REQUIRE_MESSAGE(r.exit_code == 0, r.err);
        return out;
    }
};

// The first chunk of a few documents (it starts a word, so its text encodes back to its ids).
std::vector<std::int64_t> probe_chunks(const ChunkDb& db) {
    std::vector<std::int64_t> out;
    for (std::int64_t d = 1; d < db.doc_count() && out.size() < 4; d += 3) out.push_back(db.doc_first(d));
    return out;
}

}  // namespace

TEST_CASE("index query: a chunk's own text finds that chunk first - bow, bert, t5 and bm25") {
    QueryDb s;
    ChunkDb db(s.db.string());
    Tokenizer tok(test::chunk_test_tokenizer());
    const fs::path golden = test::source_dir() / "tests/reference/golden";
    const std::vector<std::pair<std::string, std::string>> kinds = {
        {"bow", "--embedder bow --dim 64"},
        {"bert", "--embedder bert --model " + (golden / "bert_tiny").string()},
        {"t5", "--embedder t5 --model " + (golden / "t5_tiny/st").string()},
        {"bm25", "--kind bm25"}};
    for (const auto& [name, flags] : kinds) {
        const fs::path idx = s.index(name, flags);
        for (std::int64_t c : probe_chunks(db)) {
            std::vector<std::int32_t> row;
            db.rows(c, c + 1, row);
            IndexQueryOptions o;
            o.index = idx.string();
            REQUIRE(chunk_text(tok, row.data(), db.chunk_size(), o.text));
            o.k = 5;
            const auto hits = index_query_search(o);
            CAPTURE(name);
            CAPTURE(c);
            CAPTURE(o.text);
            REQUIRE(!hits.empty());
            bool first = hits[0].chunk == c;
            for (const auto& h : hits)   // a chunk of the same text (or the same vector) ties with it
                first |= h.chunk == c && h.score >= hits[0].score - 1e-5f;
            CHECK(first);
            CHECK(hits[0].doc == db.doc_of(hits[0].chunk));
            if (name != "bm25") CHECK(hits[0].score == doctest::Approx(1.0).epsilon(name == "bow" ? 0.05 : 1e-4));
            for (std::size_t r = 1; r < hits.size(); ++r) CHECK(hits[r].score <= hits[r - 1].score);
        }
    }
}

TEST_CASE("index query: retro-index query prints text and JSON, and bad input is one line with exit 2") {
    QueryDb s;
    const fs::path idx = s.index("bow", "--embedder bow --dim 64");
    ChunkDb db(s.db.string());
    Tokenizer tok(test::chunk_test_tokenizer());
    std::vector<std::int32_t> row;
    const std::int64_t c = db.doc_first(2);
    db.rows(c, c + 1, row);
    std::string text;
    REQUIRE(chunk_text(tok, row.data(), db.chunk_size(), text));

    auto r = test::run_tool("retro-index", "query " + idx.string() + " " + shell_quote(text) + " --k 3 --json");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    nlohmann::json j = nlohmann::json::parse(r.out);
    CHECK(j["query"] == text);
    CHECK_FALSE(j.contains("query_image"));   // (a text query: before, "query_image": "" beside it)
    CHECK(j["kind"] == "dense");
    REQUIRE(j["results"].size() == 3);
    CHECK(j["results"][0]["rank"] == 1);
    CHECK(j["results"][0]["chunk"] == c);
    CHECK(j["results"][0]["text"] == text);
    {   // `-`: the query from standard input, the same results (it searched the text "-": a new user's pass, session 54)
        const test::RunResult piped = test::run_tool("retro-index", "query " + idx.string() + " - --k 3 --json", text + "\n");
        REQUIRE_MESSAGE(piped.exit_code == 0, piped.err);
        CHECK(nlohmann::json::parse(piped.out) == j);
    }
    r = test::run_tool("retro-index", "query " + idx.string() + " " + shell_quote(text) + " --neighbours 2 --db " + s.db.string());
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    CHECK(r.out.rfind("query: " + text, 0) == 0);
    CHECK(r.out.find("1. chunk " + std::to_string(c) + " ") != std::string::npos);
    CHECK(r.out.find("3. chunk") == std::string::npos);

    const std::vector<std::pair<std::string, std::string>> bad = {
        {"query " + (s.tmp / "nowhere").string() + " 'some words'", "nowhere"},
        {"query " + idx.string() + " '   '", "empty"},
        {"query " + idx.string() + " " + shell_quote("cat \xff dog"), "not valid UTF-8"},
        {"query " + idx.string() + " 'some words' --k 0", "--k"},
        {"query " + idx.string() + " 'some words' --db " + (s.tmp / "nodb").string(), "nodb"},
    };
    for (const auto& [args, names] : bad) {
        r = test::run_tool("retro-index", args);
        CAPTURE(args);
        CAPTURE(r.err);
        CHECK(r.exit_code == 2);
        CHECK(test::line_count(r.err) == 1);
        CHECK(r.err.find(names) != std::string::npos);
        CHECK(r.out.empty());
    }
}

TEST_CASE("index query: fewer results than --k are said on stderr, with why (the database's size, --nprobe)") {
    QueryDb s;
    const ChunkDb db(s.db.string());
    const fs::path ivf = s.index("ivf", "--embedder bow --dim 32 --index IVF4,Flat --nprobe 1");
    auto r = test::run_tool("retro-index", "query " + ivf.string() + " hello --k " + std::to_string(db.chunk_count()) + " --json");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    const auto found = nlohmann::json::parse(r.out)["results"].size();
    REQUIRE(found < static_cast<std::size_t>(db.chunk_count()));   // one list of 4 holds a part of the chunks
    CHECK(r.err.find("warning: found " + std::to_string(found) + " of the " + std::to_string(db.chunk_count()) +
                     " results asked: the inverted lists searched held no more (1 of 4): a larger --nprobe") !=
          std::string::npos);
    // every list: all of them, and no warning
    r = test::run_tool("retro-index", "query " + ivf.string() + " hello --k " + std::to_string(db.chunk_count()) + " --nprobe 4 --json");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    CHECK(nlohmann::json::parse(r.out)["results"].size() == static_cast<std::size_t>(db.chunk_count()));
    CHECK(r.err.find("warning") == std::string::npos);
    // more than the database holds
    r = test::run_tool("retro-index", "query " + ivf.string() + " hello --k " + std::to_string(db.chunk_count() + 5) + " --nprobe 4");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    CHECK(r.err.find("results asked: the database holds " + std::to_string(db.chunk_count()) + " chunks") != std::string::npos);
}
