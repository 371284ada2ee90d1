// retro-chunk bad input: each case checks the exit code, the one-line message and that nothing
// complete-looking is left; replaced UTF-8 and skipped empty documents are counted, not fatal. A database
// whose doc_ids, doc_offsets or seq_starts hold values out of range is refused naming the file and row.
#include <sentencepiece_trainer.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "core/manifest.h"
#include "core/npy.h"
#include "core/shell_quote.h"
#include "data/chunk_db.h"
#include "data/synthetic_text.h"
#include "test_chunk_util.h"

namespace fs = std::filesystem;
using namespace retro::test;

namespace {

struct Case {
    TempDir dir{"chunk-err"};
    std::string tok = chunk_test_tokenizer();
    fs::path db = dir / "db";
    RunResult run(const std::string& inputs, const std::string& extra = "") {
        return run_tool("retro-chunk", inputs + " --tokenizer " + tok + " --out " + db.string() + " --quiet " + extra);
    }
};

void check_user_error(const RunResult& r, const std::string& message) {
    INFO(r.err);
    CHECK(r.exit_code == 2);
    CHECK(line_count(r.err) == 1);
    CHECK(r.err.find(message) != std::string::npos);
}

// Overwrites element `row` of an i64 .npy file in place (its header says where the data starts).
void npy_set_i64(const fs::path& p, std::int64_t row, std::int64_t value) {
    std::string bytes = read_text(p);
    const retro::NpyHeader h = retro::npy_parse(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size(), p.string());
    REQUIRE(h.dtype == retro::DType::I64);
    REQUIRE(row < h.numel());
    std::memcpy(bytes.data() + h.data_offset + static_cast<std::size_t>(row) * 8, &value, 8);
    write_text(p, bytes);
}

// The UserError message of ChunkDb(dir).check_arrays(), or "" when it passes.
std::string check_arrays_error(const fs::path& dir) {
    try {
        retro::ChunkDb(dir.string()).check_arrays();
    } catch (const retro::UserError& e) {
        return e.what();
    }
    return "";
}

}  // namespace

TEST_CASE("retro-chunk reports a malformed jsonl line with file and line number") {
    Case c;
    fs::path p = c.dir / "bad.jsonl";
    write_text(p, "{\"text\": \"Kamiro tel.\"}\n{\"text\": \"Sulan vi.\"}\n{\"text\": oops}\n{\"text\": \"Ta.\"}\n");
    check_user_error(c.run(p.string()), p.string() + ":3: malformed JSON at column 10: syntax error");
    chunk_check_nothing_complete(c.db);
    // the parser's reason: a lone surrogate escape (which Python's json takes) is named as such
    write_text(p, "{\"text\": \"lone \\ud800 surrogate\"}\n");
    check_user_error(c.run(p.string()), "surrogate");
    chunk_check_nothing_complete(c.db);
    write_text(p, "{\"text\": \"Kamiro tel.\"}\n{\"body\": \"Sulan vi.\"}\n");
    check_user_error(c.run(p.string(), "--force"), p.string() + ":2: has no key 'text'");
    chunk_check_nothing_complete(c.db);
    auto r = c.run(p.string(), "--force --on-error skip");
    REQUIRE(r.exit_code == 0);
    CHECK(retro::manifest_read(c.db.string())["corpus"]["malformed_skipped"] == 1);
}

TEST_CASE("retro-chunk replaces and counts invalid UTF-8 - skips and counts empty documents") {
    Case c;
    fs::create_directories(c.dir / "corpus");
    write_text(c.dir / "corpus" / "a.txt", "Kamiro \xff tel \xc3 lan.");
    write_text(c.dir / "corpus" / "b.txt", "");
    write_text(c.dir / "corpus" / "c.txt", " \n\t\n");
    fs::path j = c.dir / "d.jsonl";
    write_text(j, "{\"text\": \"Sulan vi.\"}\n\n   \n{\"text\": \"\"}\n{\"text\": \"Ta ro.\"}\n");
    auto r = c.run((c.dir / "corpus").string() + " " + j.string());
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    auto m = retro::manifest_read(c.db.string());
    CHECK(m["corpus"]["invalid_utf8_replaced"] == 2);
    CHECK(m["corpus"]["empty_skipped"] == 5);
    CHECK(m["stats"]["documents"] == 3);
    r = run_tool("retro-chunk", "inspect " + c.db.string() + " --doc 0 --json");
    REQUIRE(r.exit_code == 0);
    CHECK(nlohmann::json::parse(r.out)["text"] == "Kamiro \xef\xbf\xbd tel \xef\xbf\xbd lan.");
}

TEST_CASE("retro-chunk reads a file reached twice once, with a warning - and warns of JSON Lines in a .json file") {
    Case c;
    fs::create_directories(c.dir / "corpus" / "sub");
    write_text(c.dir / "corpus" / "a.txt", "Kamiro tel sulan.");
    write_text(c.dir / "corpus" / "sub" / "b.txt", "Vi ta ro.");
    fs::create_symlink(c.dir / "corpus" / "a.txt", c.dir / "link.txt");
    // the folder, a file in it again, the same file through a link, and a folder inside the first
    auto r = run_tool("retro-chunk", (c.dir / "corpus").string() + " " + (c.dir / "corpus" / "a.txt").string() + " " +
                                         (c.dir / "link.txt").string() + " " + (c.dir / "corpus" / "sub").string() +
                                         " --tokenizer " + c.tok + " --out " + c.db.string());
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(retro::manifest_read(c.db.string())["corpus"]["documents"] == 2);   // it was 5: copies as documents of their own
    CHECK(r.err.find((c.dir / "link.txt").string() + ": the same file as " + (c.dir / "corpus" / "a.txt").string() + ", read once") !=
          std::string::npos);
    CHECK(r.err.find((c.dir / "corpus" / "sub" / "b.txt").string() + ": given twice, read once") != std::string::npos);
    write_text(c.dir / "data.json", "{\"text\": \"Kamiro tel.\"}\n");
    r = run_tool("retro-chunk", (c.dir / "data.json").string() + " --tokenizer " + c.tok + " --out " + (c.dir / "db2").string());
    CHECK(r.exit_code == 0);
    CHECK(r.err.find("data.json: read as plain text, one document") != std::string::npos);
}

TEST_CASE("retro-chunk inspect names chunks.npy for a token id outside the vocabulary, not the tokenizer") {
    Case c;
    const fs::path p = c.dir / "a.jsonl";
    write_text(p, "{\"text\": \"Kamiro tel sulan vi ta ro.\"}\n");
    REQUIRE(c.run(p.string()).exit_code == 0);
    const fs::path chunks = c.db / "chunks.npy";
    std::string bytes = read_text(chunks);
    const retro::NpyHeader h = retro::npy_parse(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size(), chunks.string());
    REQUIRE(h.dtype == retro::DType::U16);
    const std::uint16_t big = 65000;
    std::memcpy(bytes.data() + h.data_offset + 2, &big, 2);   // row 0, the token after bos
    write_text(chunks, bytes);
    for (const char* what : {"--chunk 0", "--doc 0"}) {
        CAPTURE(what);
        check_user_error(run_tool("retro-chunk", "inspect " + c.db.string() + " " + what),
                         chunks.string() + ": row 0 holds token id 65000, outside the tokenizer's vocabulary");
    }
}

TEST_CASE("retro-chunk inspect prints a chunk's control characters as text, and --json as they are") {
    Case c;
    const fs::path p = c.dir / "esc.jsonl";
    write_text(p, "{\"text\": \"red \\u001b[31mALERT\\u001b[0m done\"}\n");
    REQUIRE(c.run(p.string()).exit_code == 0);
    const auto shown = run_tool("retro-chunk", "inspect " + c.db.string() + " --chunk 0");
    REQUIRE(shown.exit_code == 0);
    CHECK(shown.out.find('\x1b') == std::string::npos);   // it switched the terminal to red
    CHECK(shown.out.find("\\x1b[3") != std::string::npos);
    const auto json = run_tool("retro-chunk", "inspect " + c.db.string() + " --chunk 0 --json");
    REQUIRE(json.exit_code == 0);
    CHECK(nlohmann::json::parse(json.out)["text"].get<std::string>().find('\x1b') != std::string::npos);

    // a file name's escape code and newline: escaped in the one-line source field, and in an error naming the path
    const fs::path named = c.dir / "corpus" / "red\x1b[31m\nname.jsonl";
    fs::create_directories(named.parent_path());
    fs::copy_file(p, named);
    REQUIRE(run_tool("retro-chunk", retro::shell_quote(named.parent_path().string()) + " --glob '*.jsonl' --tokenizer " + c.tok +
                                        " --out " + (c.dir / "db2").string() + " --quiet").exit_code == 0);
    const auto doc = run_tool("retro-chunk", "inspect " + (c.dir / "db2").string() + " --doc 0");
    REQUIRE(doc.exit_code == 0);
    CHECK(doc.out.find('\x1b') == std::string::npos);
    CHECK(doc.out.find("red\\x1b[31m\\x0aname.jsonl") != std::string::npos);
    const auto missing = run_tool("retro-chunk", "inspect " + retro::shell_quote((c.dir / "no\x1b[31mdb").string()));
    CHECK(missing.exit_code == 2);
    CHECK(missing.err.find('\x1b') == std::string::npos);
    CHECK(missing.err.find("no\\x1b[31mdb") != std::string::npos);
    // a newline in a name does not split the error's one line
    const auto split = run_tool("retro-chunk", "inspect " + retro::shell_quote((c.dir / "no\ndb").string()));
    CHECK(split.exit_code == 2);
    CHECK(line_count(split.err) == 1);
    CHECK(split.err.find("no\\x0adb") != std::string::npos);
}

TEST_CASE("retro-chunk refuses a corpus with no document") {
    Case c;
    fs::path p = c.dir / "empty.jsonl";
    write_text(p, "\n{\"text\": \" \"}\n");
    check_user_error(c.run(p.string()), "holds no non-empty document");
    chunk_check_nothing_complete(c.db);
}

TEST_CASE("retro-chunk refuses an existing output folder unless --force or --resume") {
    Case c;
    fs::path p = c.dir / "c.jsonl";
    retro::synthetic_jsonl_write(p.string(), 3, 5'000, 300);
    REQUIRE(c.run(p.string()).exit_code == 0);
    std::string before = read_text(c.db / "chunks.npy");
    check_user_error(c.run(p.string(), "--chunk-size 32"), c.db.string() + ": already exists and is not empty: it holds a finished database");
    CHECK(read_text(c.db / "chunks.npy") == before);
    fs::create_directories(c.dir / "other");   // a folder of something else: --resume is offered
    write_text(c.dir / "other/notes.txt", "x");
    check_user_error(c.run(p.string(), "--out " + (c.dir / "other").string()), "pass --force to replace it, --resume to continue a killed run");
    REQUIRE(c.run(p.string(), "--chunk-size 32 --force").exit_code == 0);
    CHECK(read_text(c.db / "chunks.npy") != before);
}

TEST_CASE("retro-chunk refuses a tokenizer with other special ids - with the reason") {
    Case c;
    fs::path p = c.dir / "c.jsonl";
    retro::synthetic_jsonl_write(p.string(), 3, 20'000, 300);
    fs::path txt = c.dir / "train.txt";
    write_text(txt, retro::synthetic_text(8, 50'000));
    auto status = sentencepiece::SentencePieceTrainer::Train("--input=" + txt.string() + " --model_prefix=" +
                                                             (c.dir / "spm").string() +
                                                             " --vocab_size=200 --minloglevel=2");
    REQUIRE(status.ok());
    c.tok = (c.dir / "spm.model").string();   // sentencepiece defaults: unk=0 bos=1 eos=2 pad=-1
    check_user_error(c.run(p.string()), "special ids must be pad=0 unk=1 bos=2 eos=3, but pad=-1");
    chunk_check_nothing_complete(c.db);
}

TEST_CASE("retro-chunk refuses impossible flags") {
    Case c;
    fs::path p = c.dir / "c.jsonl";
    retro::synthetic_jsonl_write(p.string(), 3, 2'000, 300);
    check_user_error(c.run(p.string(), "--seq-len 100"), "--seq-len: must be a positive multiple of --chunk-size (64)");
    check_user_error(c.run(p.string(), "--shard 2/2"), "--shard: '2/2' is not i/n with 0 <= i < n");
    // numbers past an int wrapped (4294967297/4294967298 ran as shard 1/2), blanks and signs were taken
    for (const char* bad : {"4294967297/4294967298", "' 1/3'", "1/+3", "-0/2", "1/3x", "/3", "1/"})
        check_user_error(c.run(p.string(), std::string("--shard ") + bad), "is not i/n with 0 <= i < n");
    check_user_error(c.run((c.dir / "missing").string()), "missing: no such file or folder");
    chunk_check_nothing_complete(c.db);
}

TEST_CASE("retro-chunk merge refuses missing or mismatched shards") {
    Case c;
    fs::path p = c.dir / "c.jsonl";
    retro::synthetic_jsonl_write(p.string(), 3, 20'000, 300);
    std::string common = p.string() + " --tokenizer " + c.tok + " --quiet";
    for (int i = 0; i < 3; ++i)
        REQUIRE(run_tool("retro-chunk", common + " --block-docs 5 --shard " + std::to_string(i) + "/3 --out " +
                                            (c.dir / ("s" + std::to_string(i))).string()).exit_code == 0);
    REQUIRE(run_tool("retro-chunk", common + " --block-docs 6 --shard 2/3 --out " + (c.dir / "x2").string()).exit_code == 0);
    std::string s0 = (c.dir / "s0").string(), s1 = (c.dir / "s1").string(), s2 = (c.dir / "s2").string();
    // the missing shard named, as retro-index and retro-knn name it (it said "s0: is shard 0 of 3, but 2 shards were given")
    check_user_error(run_tool("retro-chunk", "merge " + s0 + " " + s1 + " --out " + c.db.string()),
                     "shard 2/3: is missing: the folders given hold 2 of the 3 shards");
    check_user_error(run_tool("retro-chunk", "merge " + s0 + " " + s1 + " " + s1 + " --out " + c.db.string()),
                     s1 + ": is given twice");   // it said "shard 2 is missing or given twice"
    // a folder that is not there is named, before the count (it said "s0: is shard 0 of 3, but 4 shards were given")
    check_user_error(run_tool("retro-chunk", "merge " + s0 + " " + s1 + " " + s2 + " " + (c.dir / "nope").string() + " --out " +
                                                 c.db.string()),
                     (c.dir / "nope").string() + ": no such folder");
    // shards of runs of two counts named as such (it named a shard of the other run "missing")
    REQUIRE(run_tool("retro-chunk", common + " --block-docs 5 --shard 1/2 --out " + (c.dir / "y1").string()).exit_code == 0);
    check_user_error(run_tool("retro-chunk", "merge " + s0 + " " + (c.dir / "y1").string() + " --out " + c.db.string()),
                     "is shard 1 of 2, " + s0 + " of 3: shards of two runs");
    // ... and what differs (a helper's pass, session 54)
    check_user_error(run_tool("retro-chunk", "merge " + s0 + " " + s1 + " " + (c.dir / "x2").string() + " --out " + c.db.string()),
                     "was made from other inputs, tokenizer or parameters than " + s0 + ": parameters.block_docs is 6, the first shard's 5");
    chunk_check_nothing_complete(c.db);
    // a shard run through a linked folder is the same job (its corpus path differs, not its files): merged
    fs::create_directories(c.dir / "link");
    fs::create_directory_symlink(c.dir.path, c.dir / "link" / "d");
    REQUIRE(run_tool("retro-chunk", (c.dir / "link" / "d" / "c.jsonl").string() + " --tokenizer " + c.tok +
                                        " --quiet --block-docs 5 --shard 2/3 --out " + (c.dir / "l2").string())
                .exit_code == 0);
    const RunResult linked = run_tool("retro-chunk", "merge " + s0 + " " + s1 + " " + (c.dir / "l2").string() + " --out " +
                                                         (c.dir / "merged").string() + " --quiet");
    CHECK_MESSAGE(linked.exit_code == 0, linked.err);
    // a merge that fails part-way (a shard's sources.jsonl cut short, read with --no-verify) leaves no folder
    fs::create_directories(c.dir / "cut");
    for (const auto& e : fs::directory_iterator(c.dir / "s1")) fs::copy(e.path(), c.dir / "cut" / e.path().filename());
    {
        std::string src = read_text(c.dir / "cut" / "sources.jsonl");
        src = src.substr(0, src.rfind('\n', src.size() - 2) + 1);   // its last line gone
        write_text(c.dir / "cut" / "sources.jsonl", src);
    }
    const RunResult cut = run_tool("retro-chunk", "merge --no-verify " + s0 + " " + (c.dir / "cut").string() + " " + s2 +
                                                      " --out " + (c.dir / "cutm").string());
    CHECK(cut.exit_code == 2);
    CHECK_FALSE(fs::exists(c.dir / "cutm"));
}

TEST_CASE("chunk db: doc_ids - doc_offsets - seq_starts out of range are refused naming the file and row") {
    Case c;
    fs::path p = c.dir / "c.jsonl";
    retro::synthetic_jsonl_write(p.string(), 6, 6'000, 300);
    REQUIRE(c.run(p.string(), "--chunk-size 8 --seq-len 32").exit_code == 0);
    std::int64_t n = 0, docs = 0, first1 = 0, seqs = 0;
    {
        retro::ChunkDb db(c.db.string());
        n = db.chunk_count(), docs = db.doc_count(), first1 = db.doc_first(1), seqs = db.seq_count();
    }
    REQUIRE(docs >= 3);
    REQUIRE(first1 >= 1);
    CHECK(check_arrays_error(c.db) == "");
    auto corrupt = [&](const std::string& name, std::int64_t row, std::int64_t value) {
        fs::path bad = c.dir / ("bad-" + name + "-" + std::to_string(row));
        fs::remove_all(bad);
        fs::copy(c.db, bad);
        npy_set_i64(bad / name, row, value);
        return bad;
    };
    const std::string N = std::to_string(n), D = std::to_string(docs), R = std::to_string(first1);
    const std::string fix = " (fix: rebuild the database with retro-chunk)";
    // doc_ids: far out of range, negative, in range but not the document doc_offsets gives the row
    for (std::int64_t v : {std::int64_t{100'000'000'000}, std::int64_t{-5}}) {
        fs::path bad = corrupt("doc_ids.npy", first1, v);
        const std::string want = (bad / "doc_ids.npy").string() + ": row " + R + " holds document " + std::to_string(v) +
                                 " outside [0, " + D + ")" + fix;
        CHECK(check_arrays_error(bad) == want);
        auto r = run_tool("retro-chunk", "inspect " + bad.string() + " --chunk " + R + " --json");   // used to crash or print garbage
        check_user_error(r, want);
        CHECK(r.out.empty());
    }
    fs::path other = corrupt("doc_ids.npy", first1, 2);
    CHECK(check_arrays_error(other) == (other / "doc_ids.npy").string() + ": row " + R +
                                           " holds document 2; doc_offsets.npy puts chunk " + R + " in document 1" + fix);
    check_user_error(run_tool("retro-chunk", "inspect " + other.string() + " --chunk " + R), "whose rows in doc_offsets.npy are [");
    // doc_offsets: decreasing (inspect --doc printed "chunks 675..-1"), or past the chunk count
    fs::path dec = corrupt("doc_offsets.npy", 2, 0);
    CHECK(check_arrays_error(dec) == (dec / "doc_offsets.npy").string() + ": row 2 (0) is below row 1 (" + R + ")" + fix);
    check_user_error(run_tool("retro-chunk", "inspect " + dec.string() + " --doc 1"), "doc_offsets.npy: rows 1 and 2 (" + R + ", 0)");
    check_user_error(run_tool("retro-chunk", "inspect " + dec.string() + " --stats"), "doc_offsets.npy: row 2 (0) is below row 1");
    fs::path past = corrupt("doc_offsets.npy", 1, n + 7);
    CHECK(check_arrays_error(past).find("doc_offsets.npy: row 2") != std::string::npos);
    check_user_error(run_tool("retro-chunk", "inspect " + past.string() + " --doc 0"), "are not a range of chunks in [0, " + N + "]");
    // seq_starts: the last row one past the end
    fs::path seq = corrupt("seq_starts.npy", seqs - 1, n);
    CHECK(check_arrays_error(seq) == (seq / "seq_starts.npy").string() + ": row " + std::to_string(seqs - 1) + " holds chunk " +
                                         N + " outside [0, " + N + ")" + fix);
}

TEST_CASE("chunk: a UTF-8 byte-order mark starting a text file is not text - the same chunks as without it") {
    // (the document's first chunk held U+FEFF: a helper's pass, session 52)
    TempDir dir("chunk-bom");
    const std::string text = "The quick brown fox jumps over the lazy dog. " + std::string(200, 'a') + " end\n";
    for (const std::string name : {"plain", "bom"}) {
        fs::create_directories(dir / (name + "-corpus"));
        write_text(dir / (name + "-corpus") / "doc.txt", (name == "bom" ? "\xEF\xBB\xBF" : "") + text);
        const auto r = run_tool("retro-chunk", (dir / (name + "-corpus")).string() + " --tokenizer " + chunk_test_tokenizer() +
                                                   " --chunk-size 16 --seq-len 64 --quiet --out " + (dir / name).string());
        REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    }
    CHECK(read_text(dir / "bom" / "chunks.npy") == read_text(dir / "plain" / "chunks.npy"));
}

TEST_CASE("chunk db: a row naming the document just before its own, a doc_offsets not starting at 0, a short doc_ids are refused") {
    Case c;
    fs::path p = c.dir / "c.jsonl";
    retro::synthetic_jsonl_write(p.string(), 4, 4'000, 300);
    REQUIRE(c.run(p.string(), "--chunk-size 8 --seq-len 32").exit_code == 0);
    std::int64_t n = 0, first1 = 0;
    {
        retro::ChunkDb db(c.db.string());
        n = db.chunk_count(), first1 = db.doc_first(1);
    }
    REQUIRE(first1 >= 1);
    const auto copy = [&](const std::string& name) {
        const fs::path bad = c.dir / name;
        fs::copy(c.db, bad);
        return bad;
    };
    const std::string R = std::to_string(first1), fix = " (fix: rebuild the database with retro-chunk)";
    // doc_ids[first1] = 0: one past document 0's rows [0, first1) (a mutant comparing with > took it as document 0's)
    const fs::path before = copy("before");
    npy_set_i64(before / "doc_ids.npy", first1, 0);
    {
        retro::ChunkDb db(before.string());
        CHECK_THROWS_WITH_AS(db.doc_of_checked(first1),
                             ((before / "doc_ids.npy").string() + ": row " + R + " holds document 0, whose rows in " +
                              "doc_offsets.npy are [0, " + R + ")" + fix).c_str(),
                             retro::UserError);
        CHECK(db.doc_of_checked(first1 - 1) == 0);
    }
    // doc_offsets[0] = 1: chunk 0 in no document (check_arrays, which trusts row 0, then passes)
    const fs::path start = copy("start");
    npy_set_i64(start / "doc_offsets.npy", 0, 1);
    CHECK_THROWS_WITH_AS(retro::ChunkDb(start.string()),
                         ((start / "doc_offsets.npy").string() + ": must start at 0 and end at the chunk count " +
                          std::to_string(n)).c_str(),
                         retro::UserError);
    // doc_ids one row short: check_arrays would read past its end
    const fs::path short_ids = copy("short");
    std::vector<std::int64_t> ids(static_cast<std::size_t>(n - 1), 0);
    {
        retro::ChunkDb db(c.db.string());
        for (std::int64_t r = 0; r + 1 < n; r++) ids[static_cast<std::size_t>(r)] = db.doc_of(r);
    }
    retro::npy_save((short_ids / "doc_ids.npy").string(), {n - 1}, ids.data());
    CHECK_THROWS_WITH_AS(retro::ChunkDb(short_ids.string()),
                         ((short_ids / "doc_ids.npy").string() + ": has shape (" + std::to_string(n - 1) +
                          ",), expected (" + std::to_string(n) + ",)").c_str(),
                         retro::UserError);
}

TEST_CASE("chunk db: a document of no rows (two equal doc_offsets) passes check_arrays - the offsets need only not decrease") {
    // docs/formats.md: doc_offsets non-decreasing from 0 to N (a mutant refusing equal rows took such a database for
    // a damaged one)
    Case c;
    fs::path p = c.dir / "c.jsonl";
    retro::synthetic_jsonl_write(p.string(), 3, 3'000, 300);
    REQUIRE(c.run(p.string(), "--chunk-size 8 --seq-len 32").exit_code == 0);
    std::vector<std::int64_t> offsets, ids;
    std::int64_t docs = 0;
    {
        retro::ChunkDb db(c.db.string());
        docs = db.doc_count();
        REQUIRE(docs >= 2);
        for (std::int64_t d = 0; d <= db.doc_count(); d++) offsets.push_back(d == 0 ? 0 : db.doc_end(d - 1));
        for (std::int64_t r = 0; r < db.chunk_count(); r++) ids.push_back(db.doc_of(r) + (db.doc_of(r) >= 1 ? 1 : 0));
    }
    offsets.insert(offsets.begin() + 1, offsets[1]);   // document 1 empty: the old documents from 1 on are one later
    const fs::path gap = c.dir / "gap";
    fs::copy(c.db, gap);
    retro::npy_save((gap / "doc_offsets.npy").string(), {static_cast<std::int64_t>(offsets.size())}, offsets.data());
    retro::npy_save((gap / "doc_ids.npy").string(), {static_cast<std::int64_t>(ids.size())}, ids.data());
    CHECK(check_arrays_error(gap) == "");
    retro::ChunkDb db(gap.string());
    CHECK(db.doc_count() == docs + 1);
    CHECK(db.doc_first(1) == db.doc_end(1));
    CHECK_NOTHROW(db.check_doc(1));
}
