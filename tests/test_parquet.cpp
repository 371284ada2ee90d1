// Parquet corpora (text/parquet_text.h, text/corpus_parquet.h): every fixture pyarrow wrote
// (tests/reference/make_parquet_fixtures.py: pages v1 and v2, SNAPPY / GZIP / ZSTD / none, dictionary, PLAIN and
// DELTA strings, nulls, CRC-32s) reads back as pyarrow reads it; refusals name the column or the codec; damaged bytes
// are refused or read, never a crash; and retro-chunk makes the same database from a Parquet file as from the same
// documents in a .jsonl file.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "text/corpus.h"
#include "text/parquet_decode.h"
#include "text/parquet_text.h"
#include "test_cli_pipeline.h"
#include "test_util.h"

using namespace retro;
namespace fs = std::filesystem;

namespace {

fs::path fixture(const std::string& name) { return test::source_dir() / "tests/reference/fixtures/parquet" / name; }

using Rows = std::vector<std::optional<std::string>>;

Rows expected_rows(const std::string& name) {
    Rows rows;
    std::ifstream in(fixture(name + ".expected.jsonl"));
    std::string line;
    while (std::getline(in, line)) {
        const auto j = nlohmann::json::parse(line);
        if (j.contains("hex")) {
            const std::string hex = j["hex"].get<std::string>();
            std::string bytes;
            for (std::size_t i = 0; i + 1 < hex.size(); i += 2) bytes += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
            rows.emplace_back(bytes);
        } else if (j["text"].is_null()) {
            rows.emplace_back(std::nullopt);
        } else {
            rows.emplace_back(j["text"].get<std::string>());
        }
    }
    return rows;
}

Rows read_rows(const fs::path& path, const std::string& column) {
    Rows rows;
    const ParquetTextFile file(path.string());
    file.read_column(column, [&](std::int64_t row, const std::string_view* text, std::int64_t) {
        REQUIRE(row == static_cast<std::int64_t>(rows.size()));
        rows.emplace_back(text ? std::optional<std::string>(std::string(*text)) : std::nullopt);
    });
    CHECK(static_cast<std::int64_t>(rows.size()) == file.num_rows());
    return rows;
}

// What reading `bytes` as a Parquet file's `column` gives: its rows, or nullopt where it was refused as damaged.
std::optional<Rows> read_or_refused(const fs::path& scratch, const std::string& bytes, const std::string& column) {
    test::write_text(scratch, bytes);
    try {
        return read_rows(scratch, column);
    } catch (const ParquetMalformed&) {
        return std::nullopt;
    }
}

std::vector<Document> corpus_documents(const fs::path& path, CorpusCounts& counts, const std::string& key = "text") {
    CorpusOptions opts;
    opts.text_key = key;
    std::vector<Document> docs;
    for (const CorpusFile& f : corpus_list_files({path.string()}, opts))
        corpus_read_file(f, opts, counts, [&](Document& d) { docs.push_back(d); });
    return docs;
}

}  // namespace

TEST_CASE("parquet: every fixture's text column reads as pyarrow reads it (pages v1 and v2, six codecs, five encodings)") {
    for (const char* name : {"snappy_dict_v1", "gzip_plain_v1", "zstd_dict_v2", "crc_snappy_v2", "none_plain_v2_required",
                             "delta_length_v2", "delta_byte_array_v1", "large_string", "brotli", "lz4_raw"}) {
        CAPTURE(name);
        const Rows want = expected_rows(name);
        REQUIRE(want.size() >= 50);
        CHECK(read_rows(fixture(std::string(name) + ".parquet"), "text") == want);
    }
    CHECK(read_rows(fixture("binary_body.parquet"), "body") == expected_rows("binary_body"));
    // other writers' quirks (a helper's files, session 71): an empty table's chunk at offset 0 (pyarrow), an empty list
    // of element type 0 (fastparquet's Thrift writer), dictionary indices of 0 bits bit-packed (Polars)
    for (const char* name : {"empty_table", "fastparquet_empty", "polars_one_value"}) {
        CAPTURE(name);
        CHECK(read_rows(fixture(std::string(name) + ".parquet"), "text") == expected_rows(name));
    }
    CHECK(expected_rows("polars_one_value").size() == 3);
    CHECK(read_rows(fixture("odd_columns.parquet"), "content") == expected_rows("odd_columns"));
}

TEST_CASE("parquet: a column that is not text, and a file that is not Parquet, are refused by name") {
    const auto refused = [](const std::string& file, const std::string& column, const std::string& says) {
        CAPTURE(file);
        CAPTURE(column);
        try {
            read_rows(fixture(file), column);
            FAIL("read");
        } catch (const ParquetMalformed& e) {
            CHECK(std::string(e.what()).find(says) != std::string::npos);
        }
    };
    refused("odd_columns.parquet", "text", "holds INT64 values, not text");
    refused("odd_columns.parquet", "meta", "is a group of nested fields");
    refused("odd_columns.parquet", "tags", "is a group of nested fields");   // (a LIST is a group holding a repeated field)
    refused("odd_columns.parquet", "body", "has no column 'body'");
    refused("snappy_dict_v1.expected.jsonl", "text", "not a Parquet file");   // (no PAR1)

    // through the corpus reader: one line naming the file, the fix listing the columns
    CorpusCounts counts;
    try {
        corpus_documents(fixture("odd_columns.parquet"), counts);
        FAIL("read");
    } catch (const UserError& e) {
        const std::string msg = e.what();
        CHECK(msg.find("odd_columns.parquet: its column 'text' holds INT64 values, not text") != std::string::npos);
        CHECK(msg.find("pass --text-key with the column that holds the text; its columns: text (INT64), meta (group), "
                       "tags (group), content (BYTE_ARRAY)") != std::string::npos);
        CHECK(msg.find('\n') == std::string::npos);
    }
    // --on-error skip: the file skipped and counted, the run goes on
    CorpusOptions skip;
    skip.on_error = OnError::SKIP;
    skip.text_key = "body";
    CorpusCounts skipped;
    for (const CorpusFile& f : corpus_list_files({fixture("odd_columns.parquet").string()}, skip))
        corpus_read_file(f, skip, skipped, [](Document&) { FAIL("a document"); });
    CHECK(skipped.malformed_skipped == 1);

    // a Git LFS pointer in place of the file (a dataset cloned without git-lfs) is named as one
    test::TempDir t("parquetlfs");
    test::write_text(t / "train-00000.parquet",
                     "version https://git-lfs.github.com/spec/v1\noid sha256:"
                     "4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\nsize 12345\n");
    CorpusCounts lfs;
    CHECK_THROWS_WITH_AS(corpus_documents(t / "train-00000.parquet", lfs), doctest::Contains("Git LFS pointer"), UserError);
}

TEST_CASE("parquet: documents are the non-blank rows, numbered by row, UTF-8 and NUL bytes replaced as in .jsonl") {
    CorpusCounts counts;
    const std::vector<Document> docs = corpus_documents(fixture("snappy_dict_v1.parquet"), counts);
    const Rows rows = expected_rows("snappy_dict_v1");
    std::size_t at = 0, blank = 0;
    for (std::size_t r = 0; r < rows.size(); ++r) {
        if (!rows[r] || rows[r]->find_first_not_of(" \t\r\n") == std::string::npos) {
            ++blank;
            continue;
        }
        REQUIRE(at < docs.size());
        CHECK(docs[at].text == *rows[r]);
        CHECK(docs[at].line == static_cast<std::int64_t>(r) + 1);
        ++at;
    }
    CHECK(at == docs.size());
    CHECK(counts.empty_skipped == static_cast<std::int64_t>(blank));
    CHECK(counts.documents == static_cast<std::int64_t>(docs.size()));
    CHECK(blank > 20);   // the fixture holds nulls, empty and whitespace-only rows

    CorpusCounts raw_counts;
    const std::vector<Document> raw = corpus_documents(fixture("binary_body.parquet"), raw_counts, "body");
    REQUIRE(raw.size() == 5);
    CHECK(raw[0].text == "caf\xc3\xa9");
    CHECK(raw[1].text == "cut \xef\xbf\xbd short");            // a character cut short: one U+FFFD, as retro-chunk's .jsonl
    CHECK(raw[2].text == "a\xef\xbf\xbd" "b");                  // a NUL byte
    CHECK(raw[3].text == "\xef\xbf\xbd\xef\xbf\xbd");
    CHECK(raw[4].line == 6);                                    // row 5 is a null
    CHECK(raw_counts.invalid_utf8_replaced == 4);
    CHECK(raw_counts.empty_skipped == 1);
}

TEST_CASE("parquet: every byte of a file flipped, and every length cut, is refused or read, never a crash") {
    test::TempDir t("parquetflip");
    const fs::path scratch = t / "f.parquet";
    // a small file whole: every byte
    const std::string small = test::read_text(fixture("binary_body.parquet"));
    std::size_t refused = 0;
    for (std::size_t i = 0; i < small.size(); ++i) {
        std::string b = small;
        b[i] = static_cast<char>(b[i] ^ 0x5a);
        if (!read_or_refused(scratch, b, "body")) ++refused;
    }
    CHECK(refused > small.size() / 4);
    for (std::size_t n = 0; n < small.size(); ++n) CHECK_FALSE(read_or_refused(scratch, small.substr(0, n), "body"));
    // with page CRC-32s: a flipped byte is refused, or the rows come out as they were (a header field the reader
    // skips), never other text
    const std::string crc = test::read_text(fixture("crc_snappy_v2.parquet"));
    const Rows want = expected_rows("crc_snappy_v2");
    std::size_t crc_refused = 0;
    for (std::size_t i = 0; i < crc.size(); i += 3) {
        std::string b = crc;
        b[i] = static_cast<char>(b[i] ^ 0x01);
        const std::optional<Rows> got = read_or_refused(scratch, b, "text");
        if (!got) ++crc_refused;
        else CHECK(*got == want);
    }
    CHECK(crc_refused > crc.size() / 3 / 2);
}

TEST_CASE("parquet: the decoders refuse what would read past their bytes") {
    std::vector<std::uint32_t> out;
    const std::uint8_t bit_packed_too_long[] = {0x05, 0xff};   // 2 groups of 8 one-bit values in 1 byte
    CHECK_THROWS_AS(parquet_rle_decode(bit_packed_too_long, bit_packed_too_long + 2, 1, 16, out), ParquetMalformed);
    const std::uint8_t runs[] = {0x06, 0x01, 0x03, 0xa5};      // 3 copies of 1, then 8 bit-packed values 10100101
    parquet_rle_decode(runs, runs + 4, 1, 11, out);
    CHECK(out == std::vector<std::uint32_t>{1, 1, 1, 1, 0, 1, 0, 0, 1, 0, 1});
    const std::uint8_t width_zero[] = {0x81, 0x03};              // 192 bit-packed groups of 0-bit values: no bytes
    parquet_rle_decode(width_zero, width_zero + 2, 0, 1000, out);
    CHECK(out == std::vector<std::uint32_t>(1000, 0));
    std::vector<std::int64_t> ints;
    // block of 128 in 4 miniblocks, 3 values, first 7: min delta -2, widths 1,0,0,0, deltas +0,+1 over the minimum
    const std::uint8_t delta[] = {0x80, 0x01, 0x04, 0x03, 0x0e, 0x03, 0x01, 0x00, 0x00, 0x00, 0x02, 0, 0, 0};
    parquet_delta_decode(delta, delta + sizeof delta, 3, ints);
    CHECK(ints == std::vector<std::int64_t>{7, 5, 4});
    CHECK_THROWS_AS(parquet_delta_decode(delta, delta + 8, 3, ints), ParquetMalformed);   // the miniblock cut short
    CHECK_THROWS_AS(parquet_delta_decode(delta, delta + sizeof delta, 4, ints), ParquetMalformed);   // another count
    std::string page;
    CHECK_THROWS_WITH_AS(parquet_decompress(parquet::kLzo, delta, 4, 4, page), doctest::Contains("LZO, which RetroKit does not read"),
                         ParquetMalformed);
    // the deprecated LZ4 codec: Hadoop's framing (parquet-mr) and a bare block (Arrow before 0.17), both read
    const std::string text = "retrieval retrieval retrieval chunk chunk chunk neighbours";
    const std::string block = "af72657472696576616c200a0001596368756e6b0600a06e65696768626f757273";   // python lz4.block
    const auto bytes = [](const std::string& hex) {
        std::string b;
        for (std::size_t i = 0; i + 1 < hex.size(); i += 2) b += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
        return b;
    };
    for (const std::string& framed : {bytes(block), bytes("0000003a00000021" + block)}) {
        const auto* src = reinterpret_cast<const std::uint8_t*>(framed.data());
        parquet_decompress(parquet::kLz4, src, framed.size(), text.size(), page);
        CHECK(page == text);
        CHECK_THROWS_AS(parquet_decompress(parquet::kLz4, src, framed.size() - 1, text.size(), page), ParquetMalformed);
    }
    const std::string raw = bytes(block);
    parquet_decompress(parquet::kLz4Raw, reinterpret_cast<const std::uint8_t*>(raw.data()), raw.size(), text.size(), page);
    CHECK(page == text);
    CHECK_THROWS_AS(parquet_decompress(parquet::kLz4Raw, reinterpret_cast<const std::uint8_t*>(raw.data()), raw.size(), 57, page),
                    ParquetMalformed);
    CHECK_THROWS_AS(parquet_decompress(parquet::kSnappy, delta, 4, 100, page), ParquetMalformed);
    CHECK_THROWS_AS(parquet_decompress(parquet::kZstd, delta, 4, std::size_t(1) << 31, page), ParquetMalformed);
}

TEST_CASE("parquet: retro-chunk makes the same database from a Parquet file as from its documents in .jsonl") {
    const test::CliPipeline& p = test::bad_input_pipeline();
    test::TempDir t("parquetchunk");
    const fs::path pq = t / "corpus.parquet", jl = t / "corpus.jsonl";
    fs::copy_file(fixture("zstd_dict_v2.parquet"), pq);
    {
        std::ofstream out(jl);
        for (const auto& row : expected_rows("zstd_dict_v2"))
            out << (row ? nlohmann::json{{"text", *row}} : nlohmann::json{{"text", nullptr}, {"note", "null row"}}).dump() << "\n";
    }
    // (a null row in the .jsonl: malformed there, so it is skipped under --on-error skip; in Parquet it is blank)
    const std::string common = " --tokenizer " + p.tok.string() + " --chunk-size 4 --seq-len 16 --quiet --on-error skip";
    REQUIRE(test::run_tool("retro-chunk", pq.string() + " --out " + (t / "a").string() + common).exit_code == 0);
    REQUIRE(test::run_tool("retro-chunk", jl.string() + " --out " + (t / "b").string() + common).exit_code == 0);
    for (const char* f : {"chunks.npy", "doc_ids.npy"}) {
        CAPTURE(f);
        CHECK(test::read_text(t / "a" / f) == test::read_text(t / "b" / f));
    }
    // the sources name each document's row as its line
    const std::string sources_a = test::read_text(t / "a" / "sources.jsonl"), sources_b = test::read_text(t / "b" / "sources.jsonl");
    CHECK(sources_a.find("corpus.parquet") != std::string::npos);
    const auto first_line = [](const std::string& s) { return nlohmann::json::parse(s.substr(0, s.find('\n')))["line"].get<std::int64_t>(); };
    CHECK(first_line(sources_a) == first_line(sources_b));
    const test::RunResult shown = test::run_tool("retro-chunk", "inspect " + (t / "a").string() + " --doc 0");
    REQUIRE(shown.exit_code == 0);
    CHECK(shown.out.find("corpus.parquet row " + std::to_string(first_line(sources_a)) + " (page at byte ") != std::string::npos);
    // a folder of Parquet files read with --glob
    fs::create_directories(t / "folder");
    fs::copy_file(pq, t / "folder" / "part-0.parquet");
    REQUIRE(test::run_tool("retro-chunk", (t / "folder").string() + " --glob '**/*.parquet' --out " + (t / "c").string() + common)
                .exit_code == 0);
    CHECK(test::read_text(t / "c" / "chunks.npy") == test::read_text(t / "a" / "chunks.npy"));
    // without --glob (the default takes **/*.txt): the refusal says what the folder holds
    const test::RunResult no_glob = test::run_tool("retro-chunk", (t / "folder").string() + " --out " + (t / "d").string() + common);
    test::expect_refused(no_glob, {"no file matches '**/*.txt'", "the folder holds 1 .parquet file: pass --glob '**/*.parquet'"});
}
