// Git LFS pointer files (core/lfs_pointer.h) in place of the files RetroKit reads: every reader of weights,
// tokenizer files, arrays, indices, images and compressed or .jsonl corpora names the file and says to fetch it,
// instead of calling it corrupt; a CLI run of retro-index over such a checkpoint is one line with exit 2.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

#include "core/error.h"
#include "core/lfs_pointer.h"
#include "core/npy.h"
#include "core/safetensors.h"
#include "embed/image_decode.h"
#include "index/faiss_index.h"
#include "test_chunk_util.h"
#include "test_util.h"
#include "text/clip_bpe.h"
#include "text/corpus.h"
#include "text/spiece_tokenizer.h"
#include "text/tokenizer.h"
#include "text/wordpiece.h"

using namespace retro;
namespace fs = std::filesystem;

namespace {

// What `git clone` without git-lfs leaves in place of a 90,868,376-byte file (the spec's three lines).
const std::string kPointer =
    "version https://git-lfs.github.com/spec/v1\n"
    "oid sha256:3c9e2f8a1d7b6c5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e\n"
    "size 90868376\n";

void expect_pointer_named(const fs::path& path, const std::function<void()>& read) {
    CAPTURE(path.string());
    try {
        read();
        FAIL("an LFS pointer was read as the file");
    } catch (const UserError& e) {
        const std::string msg = e.what();
        CHECK(msg.find(path.string() + ": is a Git LFS pointer to a 90868376-byte file, not the file itself") == 0);
        CHECK(msg.find("git lfs pull") != std::string::npos);
        CHECK(msg.find('\n') == std::string::npos);
    }
}

}  // namespace

TEST_CASE("lfs pointer: recognised by the spec's first line only") {
    const auto is = [](const std::string& s) { return is_lfs_pointer(reinterpret_cast<const std::uint8_t*>(s.data()), s.size()); };
    CHECK(is(kPointer));
    CHECK(is("version https://git-lfs.github.com/spec/v1\n"));
    CHECK_FALSE(is("version https://git-lfs.github.com/spec"));      // cut short
    CHECK_FALSE(is(" version https://git-lfs.github.com/spec/v1\n"));  // not at the start
    CHECK_FALSE(is("{\"version\": \"https://git-lfs.github.com/spec/v1\"}"));
    CHECK_FALSE(is(""));
    // without a size line the message names no size
    try {
        refuse_lfs_pointer("f", reinterpret_cast<const std::uint8_t*>("version https://git-lfs.github.com/spec/v1\n"), 43);
        FAIL("not refused");
    } catch (const UserError& e) {
        CHECK(std::string(e.what()).find("f: is a Git LFS pointer, not the file itself") == 0);
    }
}

TEST_CASE("lfs pointer: each reader of a model, array, index, image or corpus file names the pointer") {
    test::TempDir tmp("lfs-pointer");
    const auto pointer = [&](const std::string& name) {
        const fs::path p = tmp / name;
        fs::create_directories(p.parent_path());
        test::write_text(p, kPointer);
        return p;
    };
    const fs::path st = pointer("model.safetensors");
    expect_pointer_named(st, [&] { SafetensorsFile f(st.string()); });
    const fs::path npy = pointer("chunks.npy");
    expect_pointer_named(npy, [&] { NpyArray a(npy.string()); });
    const fs::path index = pointer("index.faiss");
    expect_pointer_named(index, [&] { FaissIndex::load(index.string()); });
    const fs::path vocab = pointer("bert/vocab.txt");
    expect_pointer_named(vocab, [&] { WordPiece w(vocab.string(), WordPieceOptions{}); });
    const fs::path clip_vocab = pointer("clip/vocab.json");
    expect_pointer_named(clip_vocab, [&] { ClipBpeTokenizer t((tmp / "clip").string()); });
    fs::remove(clip_vocab);
    test::write_text(clip_vocab, "{}");
    const fs::path merges = pointer("clip/merges.txt");
    expect_pointer_named(merges, [&] { ClipBpeTokenizer t((tmp / "clip").string()); });
    const fs::path spiece = pointer("t5/spiece.model");
    expect_pointer_named(spiece, [&] { SpieceTokenizer t(spiece.string()); });
    const fs::path tok = pointer("tok/tok.model");
    expect_pointer_named(tok, [&] { Tokenizer t(tok.string()); });
    const fs::path image = pointer("images/cat.jpg");
    expect_pointer_named(image, [&] { image_decode(image.string()); });
    CorpusOptions opts;
    CorpusCounts counts;
    for (const char* name : {"corpus/a.jsonl", "corpus/b.jsonl.gz", "corpus/c.jsonl.zst"}) {
        const fs::path p = pointer(name);
        expect_pointer_named(p, [&] { corpus_read_file(CorpusFile{p.string(), true}, opts, counts, [](Document&) {}); });
    }
}

TEST_CASE("lfs pointer: retro-index over a checkpoint cloned without git-lfs is one line naming the weights") {
    test::TempDir tmp("lfs-pointer-cli");
    const fs::path model = tmp / "bert";
    fs::create_directories(model);
    const fs::path golden = test::source_dir() / "tests" / "reference" / "golden" / "bert_tiny";
    for (const char* f : {"config.json", "vocab.txt", "tokenizer_config.json"}) fs::copy_file(golden / f, model / f);
    test::write_text(model / "model.safetensors", kPointer);
    const fs::path db = test::chunk_test_db(tmp, 3);
    const test::RunResult r = test::run_tool("retro-index", db.string() + " --embedder bert --model " + model.string() +
                                                                " --out " + (tmp / "idx").string() + " --quiet");
    CAPTURE(r.err);
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("model.safetensors: is a Git LFS pointer to a 90868376-byte file") != std::string::npos);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    CHECK_FALSE(fs::exists(tmp / "idx" / "manifest.json"));
}

TEST_CASE("lfs pointer: a verified folder's file, a bm25 index, and corpus files read with a warning") {
    test::TempDir tmp("lfs-pointer-folders");
    const fs::path db = test::chunk_test_db(tmp, 4), corpus = tmp / "c.jsonl";
    const auto expect_pointer_line = [](const test::RunResult& r, const fs::path& file) {
        CAPTURE(r.err);
        CHECK(r.exit_code == 2);
        CHECK(r.err.find(file.string() + ": is a Git LFS pointer to a 90868376-byte file") != std::string::npos);
        CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    };
    {   // verified against the manifest first (the default): the pointer is named, not "has changed since"
        const fs::path idx = tmp / "idx";
        REQUIRE(test::run_tool("retro-index", db.string() + " --out " + idx.string() + " --quiet").exit_code == 0);
        test::write_text(idx / "index.faiss", kPointer);
        expect_pointer_line(test::run_tool("retro-knn", idx.string() + " --db " + db.string() + " --out " + (tmp / "knn").string()),
                            idx / "index.faiss");
        expect_pointer_line(test::run_tool("retro-index", "query " + idx.string() + " hello --no-verify"),
                            idx / "index.faiss");
    }
    {
        const fs::path bm25 = tmp / "bm25";
        REQUIRE(test::run_tool("retro-index", db.string() + " --out " + bm25.string() + " --kind bm25 --quiet").exit_code == 0);
        test::write_text(bm25 / "bm25.glass", kPointer);
        expect_pointer_line(test::run_tool("retro-index", "query " + bm25.string() + " hello"), bm25 / "bm25.glass");
        expect_pointer_line(test::run_tool("retro-index", "query " + bm25.string() + " hello --no-verify"),
                            bm25 / "bm25.glass");
    }
    {   // a pointer among text files is text (a corpus of repositories may hold them), said once; a .jsonl one skipped
        const fs::path texts = tmp / "texts";
        fs::create_directories(texts);
        test::write_text(texts / "a.txt", "A real document about retrieval and language models.\n");
        test::write_text(texts / "b.txt", kPointer);
        const test::RunResult r = test::run_tool("retro-chunk", texts.string() + " --tokenizer " + test::chunk_test_tokenizer() +
                                                                    " --chunk-size 16 --seq-len 64 --out " + (tmp / "dbt").string());
        CAPTURE(r.err);
        CHECK(r.exit_code == 0);
        CHECK(r.err.find((texts / "b.txt").string() + ": is a Git LFS pointer (a clone without git-lfs), read as the text it is") !=
              std::string::npos);
        const fs::path jsonl = tmp / "p.jsonl";
        test::write_text(jsonl, kPointer);
        const test::RunResult s = test::run_tool("retro-chunk", corpus.string() + " " + jsonl.string() + " --on-error skip --tokenizer " +
                                                                    test::chunk_test_tokenizer() + " --chunk-size 16 --seq-len 64 --out " +
                                                                    (tmp / "dbj").string());
        CAPTURE(s.err);
        CHECK(s.exit_code == 0);
        CHECK(s.err.find(jsonl.string() + ": is a Git LFS pointer (a clone without git-lfs): its lines are skipped") != std::string::npos);
    }
}
