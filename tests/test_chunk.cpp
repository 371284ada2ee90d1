// retro-chunk acceptance tests: a brute-force oracle on a tiny corpus, identical bytes for any thread
// count and for sharded+merged vs unsharded runs, and inspect (text and JSON).
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/manifest.h"
#include "core/npy.h"
#include "data/synthetic_text.h"
#include "test_chunk_util.h"
#include "text/tokenizer.h"

namespace fs = std::filesystem;
using namespace retro::test;

namespace {

// A prefix of pseudo-word text that encodes to exactly `total - 2` ids (so `total` with bos/eos).
std::string text_with_tokens(const retro::Tokenizer& tok, std::size_t total) {
    for (std::uint64_t seed = 1; seed < 200; ++seed) {
        std::string all = retro::synthetic_text(seed, 40 * total + 400);
        std::size_t start = all.find(' ', static_cast<std::size_t>(seed % 50)) + 1;   // a lower-case word
        std::string text = all.substr(start);
        for (std::size_t k = 1; k <= text.size(); ++k) {
            std::string p = text.substr(0, k);
            if (p.back() == ' ' || p.back() == '\n') continue;
            std::size_t n = tok.encode(p).size() + 2;
            if (n == total) return p;
            if (n > total) break;
        }
    }
    FAIL("no text encodes to " << total << " tokens");
    return "";
}

template <typename T>
std::vector<T> load(const fs::path& p) {
    retro::NpyArray a(p.string());
    const T* d = a.data<T>();
    return std::vector<T>(d, d + a.numel());
}

}  // namespace

TEST_CASE("retro-chunk equals a brute-force oracle on a tiny corpus") {
    const int cs = 8, seq_len = 16;
    retro::Tokenizer tok(chunk_test_tokenizer());
    TempDir dir("chunk-oracle");
    fs::create_directories(dir / "corpus");
    // Shorter than a chunk, exactly one chunk, one token more, two chunks, and longer documents.
    std::vector<std::size_t> lengths{3, cs, cs + 1, 2 * cs, 2 * cs + 1, 5 * cs - 1, 4, 40};
    std::vector<std::string> texts;
    for (std::size_t i = 0; i < lengths.size(); ++i) {
        texts.push_back(text_with_tokens(tok, lengths[i]));
        write_text(dir / "corpus" / ("d" + std::to_string(10 + i) + ".txt"), texts.back());
    }
    write_text(dir / "corpus" / "d99.txt", "  \n");   // empty: skipped and counted

    // The reference: ten lines, one document at a time.
    std::vector<std::int32_t> rows;
    std::vector<std::int64_t> doc_ids, offsets, seqs;
    for (std::size_t d = 0; d < texts.size(); ++d) {
        std::vector<int> ids = tok.encode(texts[d]);
        ids.insert(ids.begin(), 2), ids.push_back(3);
        std::int64_t first = static_cast<std::int64_t>(rows.size()) / cs;
        while (ids.size() % cs) ids.push_back(0);
        rows.insert(rows.end(), ids.begin(), ids.end());
        std::int64_t end = static_cast<std::int64_t>(rows.size()) / cs;
        for (std::int64_t r = first; r < end; ++r) doc_ids.push_back(static_cast<std::int64_t>(d));
        offsets.push_back(first);
        for (std::int64_t r = first; r < end; r += seq_len / cs) seqs.push_back(r);
    }
    offsets.push_back(static_cast<std::int64_t>(rows.size()) / cs);

    auto r = run_tool("retro-chunk", (dir / "corpus").string() + " --tokenizer " + chunk_test_tokenizer() +
                                         " --out " + (dir / "db").string() +
                                         " --chunk-size 8 --seq-len 16 --block-docs 3 --threads 2 --quiet");
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    retro::NpyArray chunks((dir / "db" / "chunks.npy").string());
    CHECK(chunks.dtype() == retro::DType::U16);
    REQUIRE(chunks.shape() == std::vector<std::int64_t>{static_cast<std::int64_t>(rows.size()) / cs, cs});
    std::vector<std::uint16_t> got = load<std::uint16_t>(dir / "db" / "chunks.npy");
    CHECK(std::vector<std::int32_t>(got.begin(), got.end()) == rows);
    CHECK(load<std::int64_t>(dir / "db" / "doc_ids.npy") == doc_ids);
    CHECK(load<std::int64_t>(dir / "db" / "doc_offsets.npy") == offsets);
    CHECK(load<std::int64_t>(dir / "db" / "seq_starts.npy") == seqs);
    for (std::size_t c = 0; c < got.size(); c += cs) {   // no chunk holds only padding
        bool all_pad = true;
        for (int k = 0; k < cs; ++k) all_pad = all_pad && got[c + k] == 0;
        CHECK_FALSE(all_pad);
    }
    auto m = retro::manifest_read((dir / "db").string());
    CHECK(m["corpus"]["empty_skipped"] == 1);
    CHECK(m["stats"]["documents"] == texts.size());
    std::string sources = read_text(dir / "db" / "sources.jsonl");
    CHECK(line_count(sources) == static_cast<int>(texts.size()));
    CHECK(sources.find("d10.txt") != std::string::npos);
    CHECK(sources.find("d99.txt") == std::string::npos);
}

TEST_CASE("retro-chunk writes identical bytes for any thread count") {
    TempDir dir("chunk-threads");
    fs::path corpus = chunk_test_jsonl(dir, "c.jsonl", 400'000, 300);
    std::string common = corpus.string() + " --tokenizer " + chunk_test_tokenizer() + " --block-docs 50 --quiet --out ";
    for (int t : {1, 2, 3}) {
        auto r = run_tool("retro-chunk", common + (dir / ("db" + std::to_string(t))).string() +
                                             " --threads " + std::to_string(t));
        INFO(r.err);
        REQUIRE(r.exit_code == 0);
    }
    chunk_check_same_bytes(dir / "db1", dir / "db2");
    chunk_check_same_bytes(dir / "db1", dir / "db3");
}

TEST_CASE("retro-chunk sharded and merged equals unsharded") {
    TempDir dir("chunk-shard");
    fs::path corpus = chunk_test_jsonl(dir, "c.jsonl", 300'000, 300);
    fs::path half = chunk_test_jsonl(dir, "d.jsonl", 20'000, 300, 2);
    std::string common = corpus.string() + " " + half.string() + " --tokenizer " + chunk_test_tokenizer() +
                         " --block-docs 37 --block-bytes 9000 --quiet";
    auto r = run_tool("retro-chunk", common + " --out " + (dir / "whole").string());
    REQUIRE(r.exit_code == 0);
    for (int n : {3, 1}) {
        std::string shards;
        for (int i = n - 1; i >= 0; --i) {   // merge takes them in any order
            fs::path out = dir / ("s" + std::to_string(n) + "." + std::to_string(i));
            r = run_tool("retro-chunk", common + " --shard " + std::to_string(i) + "/" + std::to_string(n) +
                                            " --out " + out.string());
            INFO(r.err);
            REQUIRE(r.exit_code == 0);
            shards += " " + out.string();
        }
        fs::path merged = dir / ("merged" + std::to_string(n));
        r = run_tool("retro-chunk", "merge" + shards + " --out " + merged.string() + " --quiet");
        INFO(r.err);
        REQUIRE(r.exit_code == 0);
        chunk_check_same_bytes(dir / "whole", merged);
    }
    // a shard is not a whole database: index (and knn, train, through ChunkDb) refuse it, as they refuse an index's
    // shard (they indexed a third of the corpus, exit 0: a helper's pass, session 54); inspect names it
    const RunResult one_shard = run_tool("retro-index", (dir / "s3.1").string() + " --out " + (dir / "ix").string());
    CHECK(one_shard.exit_code == 2);
    CHECK(one_shard.err.find("the folder is shard 1/3 of a sharded retro-chunk run, not a whole database") != std::string::npos);
    CHECK(one_shard.err.find("retro-chunk merge") != std::string::npos);
    CHECK_FALSE(fs::exists(dir / "ix"));
    const RunResult inspected = run_tool("retro-chunk", "inspect " + (dir / "s3.1").string());
    CHECK_MESSAGE(inspected.exit_code == 0, inspected.err);
    CHECK(inspected.out.find("(shard 1/3 of a sharded run: join with retro-chunk merge)") != std::string::npos);
    // ... but a shard's chunks are queries as good as any (retro-knn --queries, knn show --queries)
    REQUIRE(run_tool("retro-index", (dir / "whole").string() + " --out " + (dir / "wi").string() + " --dim 8 --quiet").exit_code == 0);
    const RunResult queried = run_tool("retro-knn", (dir / "wi").string() + " --db " + (dir / "whole").string() + " --queries " +
                                                        (dir / "s3.1").string() + " --out " + (dir / "qk").string() + " --quiet");
    CHECK_MESSAGE(queried.exit_code == 0, queried.err);
    const RunResult shown = run_tool("retro-knn", "show " + (dir / "qk").string() + " --db " + (dir / "whole").string() +
                                                      " --queries " + (dir / "s3.1").string() + " --chunk 0");
    CHECK_MESSAGE(shown.exit_code == 0, shown.err);
    // More shards than blocks: the surplus shards are empty and the merge still matches.
    fs::path tiny = chunk_test_jsonl(dir, "tiny.jsonl", 3'000, 300, 3);
    std::string tcommon = tiny.string() + " --tokenizer " + chunk_test_tokenizer() + " --block-docs 4 --quiet";
    REQUIRE(run_tool("retro-chunk", tcommon + " --out " + (dir / "tw").string()).exit_code == 0);
    std::string shards;
    for (int i = 0; i < 6; ++i) {
        fs::path out = dir / ("t." + std::to_string(i));
        REQUIRE(run_tool("retro-chunk", tcommon + " --shard " + std::to_string(i) + "/6 --out " + out.string()).exit_code == 0);
        shards += " " + out.string();
    }
    REQUIRE(run_tool("retro-chunk", "merge" + shards + " --out " + (dir / "tm").string()).exit_code == 0);
    chunk_check_same_bytes(dir / "tw", dir / "tm");
    // ... and each shard says so (it said nothing: "0 documents, 0 chunks"; a walk-through, session 58)
    const std::string loud = tiny.string() + " --tokenizer " + chunk_test_tokenizer() + " --block-docs 4";
    const RunResult empty = run_tool("retro-chunk", loud + " --shard 5/6 --out " + (dir / "t5b").string());
    CHECK(empty.exit_code == 0);
    CHECK(empty.err.find("input block(s) of --block-docs 4 / --block-bytes 4194304, fewer than the 6 shards: this shard "
                         "holds no document; lower them") != std::string::npos);
    const RunResult full = run_tool("retro-chunk", loud + " --shard 0/6 --out " + (dir / "t0b").string());
    CHECK(full.err.find("fewer than the 6 shards: some shards hold no document") != std::string::npos);
    CHECK(run_tool("retro-chunk", loud + " --shard 0/2 --out " + (dir / "t0c").string()).err.find("warning") == std::string::npos);
}

TEST_CASE("retro-chunk --config takes the chunk size and sequence length of the model config to train") {
    TempDir dir("chunk-config");
    const fs::path corpus = chunk_test_jsonl(dir, "c.jsonl", 3'000, 300, 4);
    const std::string common = corpus.string() + " --tokenizer " + chunk_test_tokenizer() + " --quiet";
    REQUIRE(run_tool("retro-chunk", common + " --chunk-size 4 --seq-len 16 --out " + (dir / "sizes").string()).exit_code == 0);
    const RunResult named = run_tool("retro-chunk", common + " --config tiny --out " + (dir / "named").string());
    REQUIRE_MESSAGE(named.exit_code == 0, named.err);   // examples/configs/tiny.json: chunk_size 4, max_seq_len 16
    chunk_check_same_bytes(dir / "sizes", dir / "named");
    CHECK(run_tool("retro-chunk", common + " --config tiny --chunk-size 4 --out " + (dir / "same").string()).exit_code == 0);
    const RunResult differs = run_tool("retro-chunk", common + " --config tiny --chunk-size 8 --out " + (dir / "x").string());
    CHECK(differs.exit_code == 2);
    CHECK(differs.err.find("--chunk-size: 8 is not ") != std::string::npos);
    CHECK(differs.err.find("tiny.json's chunk_size 4 (fix: drop --chunk-size: --config sets it)") != std::string::npos);
    const RunResult seq = run_tool("retro-chunk", common + " --config tiny --seq-len 20 --out " + (dir / "y").string());
    CHECK(seq.err.find("--seq-len: 20 is past ") != std::string::npos);
    REQUIRE(run_tool("retro-chunk", common + " --chunk-size 4 --seq-len 8 --out " + (dir / "short").string()).exit_code == 0);
    REQUIRE(run_tool("retro-chunk", common + " --config tiny --seq-len 8 --out " + (dir / "short-named").string()).exit_code == 0);
    chunk_check_same_bytes(dir / "short", dir / "short-named");   // a shorter sequence than max_seq_len trains too
    CHECK(run_tool("retro-chunk", common + " --config nosuch --out " + (dir / "z").string()).err.find("nosuch: cannot open model config") !=
          std::string::npos);
    CHECK_FALSE(fs::exists(dir / "x"));
}

TEST_CASE("retro-chunk inspect prints chunks - documents and stats") {
    retro::Tokenizer tok(chunk_test_tokenizer());
    TempDir dir("chunk-inspect");
    fs::create_directories(dir / "corpus");
    std::string long_text = retro::synthetic_text(5, 1500), short_text = "Kamiro telan.";
    write_text(dir / "corpus" / "a.txt", short_text);
    write_text(dir / "corpus" / "b.txt", long_text);
    fs::path db = dir / "db";
    REQUIRE(run_tool("retro-chunk", (dir / "corpus").string() + " --tokenizer " + chunk_test_tokenizer() + " --out " +
                                        db.string() + " --chunk-size 16 --seq-len 64 --quiet").exit_code == 0);
    auto r = run_tool("retro-chunk", "inspect " + db.string() + " --chunk 1");
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(r.out.find("document 1, chunk 0 of") != std::string::npos);
    CHECK(r.out.find("b.txt") != std::string::npos);

    r = run_tool("retro-chunk", "inspect " + db.string() + " --chunk 2 --json");
    REQUIRE(r.exit_code == 0);
    auto j = nlohmann::json::parse(r.out);
    CHECK(j["doc"] == 1);
    CHECK(j["chunk_in_doc"] == 1);
    CHECK(j["token_start"] == 16);
    std::vector<int> ids = j["ids"].get<std::vector<int>>();
    CHECK(j["text"] == tok.decode(ids));

    r = run_tool("retro-chunk", "inspect " + db.string() + " --doc 1 --json");
    REQUIRE(r.exit_code == 0);
    j = nlohmann::json::parse(r.out);
    CHECK(j["chunk_count"] == static_cast<int>((tok.encode(long_text).size() + 2 + 15) / 16));
    if (tok.decode(tok.encode(long_text)) == long_text) CHECK(j["text"] == long_text);

    r = run_tool("retro-chunk", "inspect " + db.string() + " --doc 0");
    REQUIRE(r.exit_code == 0);
    CHECK(r.out.find(short_text) != std::string::npos);

    r = run_tool("retro-chunk", "inspect " + db.string() + " --stats --json");
    REQUIRE(r.exit_code == 0);
    j = nlohmann::json::parse(r.out);
    auto m = retro::manifest_read(db.string());
    CHECK(j["documents"] == 2);
    CHECK(j["chunks"] == m["stats"]["chunks"]);
    CHECK(j["tokens"] == m["stats"]["tokens"]);
    CHECK(j["tokens_per_chunk"]["max"] == 16);
    r = run_tool("retro-chunk", "inspect " + db.string() + " --stats");
    REQUIRE(r.exit_code == 0);
    CHECK(r.out.find("padding fraction") != std::string::npos);

    r = run_tool("retro-chunk", "inspect " + db.string() + " --chunk 100000");
    CHECK(r.exit_code == 2);
    CHECK(line_count(r.err) == 1);
    CHECK(r.err.find("--chunk: 100000 is outside") != std::string::npos);
}

TEST_CASE("retro-chunk sources.jsonl gives each document's 1-based jsonl line and the byte offset where that line starts") {
    // docs/formats.md: "line": the 1-based jsonl line, "byte_offset": the offset of that line in the (decompressed)
    // file, "doc": the document's number. The expected values are counted here from the lines as written.
    TempDir dir("chunk-sources-lines");
    const std::vector<std::string> lines = {
        R"({"text": "Kamiro telan vesu."})",
        R"({"text": "   "})",   // blank text: skipped, but its line still counts
        R"({"text": "Orin bada selu tam."})",
        R"({"id": 7, "text": "Velo mara kint osu pelan."})",
    };
    std::string file;
    std::vector<std::int64_t> starts;
    for (const auto& l : lines) {
        starts.push_back(static_cast<std::int64_t>(file.size()));
        file += l + "\n";
    }
    const fs::path corpus = dir / "c.jsonl";
    write_text(corpus, file);
    const fs::path db = dir / "db";
    const RunResult r = run_tool("retro-chunk", corpus.string() + " --tokenizer " + chunk_test_tokenizer() +
                                                    " --chunk-size 16 --seq-len 64 --out " + db.string() + " --quiet");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    std::vector<nlohmann::json> got;
    {
        std::istringstream in(read_text(db / "sources.jsonl"));
        for (std::string l; std::getline(in, l);)
            if (!l.empty()) got.push_back(nlohmann::json::parse(l));
    }
    REQUIRE(got.size() == 3);
    const std::int64_t want_line[3] = {1, 3, 4};
    for (int d = 0; d < 3; ++d) {
        CAPTURE(d);
        CHECK(got[d]["doc"].get<std::int64_t>() == d);
        CHECK(got[d]["line"].get<std::int64_t>() == want_line[d]);
        CHECK(got[d]["byte_offset"].get<std::int64_t>() == starts[static_cast<std::size_t>(want_line[d] - 1)]);
    }
    CHECK(got[1]["byte_offset"].get<std::int64_t>() == 47);   // by hand: 30 + 1 + 15 + 1
}

// docs/chunk.md's defaults: --chunk-size 64, --seq-len 2048 (a new sequence every 2048 / 64 = 32 chunks inside a
// document). A run without either, against the layout worked out here from the tokenizer's own count.
TEST_CASE("retro-chunk without --chunk-size or --seq-len chunks by 64 and starts a sequence every 32 chunks") {
    retro::Tokenizer tok(chunk_test_tokenizer());
    TempDir dir("chunk-defaults");
    fs::create_directories(dir / "corpus");
    const std::string text = retro::synthetic_text(7, 40000);
    write_text(dir / "corpus" / "long.txt", text);
    const std::int64_t ids = static_cast<std::int64_t>(tok.encode(text).size()) + 2;   // bos, eos
    REQUIRE(ids > 3 * 2048);   // more than three sequences of the default length
    const std::int64_t rows = (ids + 63) / 64;
    std::vector<std::int64_t> seqs;
    for (std::int64_t r = 0; r < rows; r += 32) seqs.push_back(r);
    auto r = run_tool("retro-chunk", (dir / "corpus").string() + " --tokenizer " + chunk_test_tokenizer() + " --out " +
                                         (dir / "db").string() + " --quiet");
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    retro::NpyArray chunks((dir / "db" / "chunks.npy").string());
    CHECK(chunks.shape() == std::vector<std::int64_t>{rows, 64});
    CHECK(load<std::int64_t>(dir / "db" / "seq_starts.npy") == seqs);
}
