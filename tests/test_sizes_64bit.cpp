// Pile-scale sizes (a helper's audit, session 57): where a library RetroKit builds on counts in 32 bits (Xapian's
// document ids, FAISS's HNSW node ids), a database past that is refused in one line before any work; the copies
// retro-knn makes of a whole database's rows (the document ids, f16 embeddings as f32) are checked against the
// memory. The databases past 2^32 chunks are sparse files: their headers say the shape, no byte is written.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"
#include "core/npy.h"
#include "index/index_memory.h"
#include "test_cli_pipeline.h"
#include "test_util.h"

namespace fs = std::filesystem;
using namespace retro;

namespace {

// An .npy file of `shape` whose data is a hole (no disk space): the header, then ftruncate to the full size.
void write_sparse_npy(const fs::path& path, DType dtype, const std::vector<std::int64_t>& shape) {
    const std::string header = npy_header_bytes(dtype, shape);
    std::int64_t bytes = static_cast<std::int64_t>(dtype_size(dtype));
    for (std::int64_t d : shape) bytes *= d;
    {
        std::ofstream f(path, std::ios::binary);
        f.write(header.data(), static_cast<std::streamsize>(header.size()));
    }
    const std::int64_t size = static_cast<std::int64_t>(header.size()) + bytes;
    REQUIRE(::truncate(path.c_str(), size) == 0);
}

// `from`'s database made to hold `n` chunks, all of document 0 (sparse arrays; the manifest's shapes and sizes
// rewritten, its fingerprints left stale: read it with --no-verify).
void craft_database(const fs::path& from, const fs::path& to, std::int64_t n) {
    fs::create_directories(to);
    const NpyArray chunks((from / "chunks.npy").string());
    const std::int64_t cs = chunks.dim(1);
    nlohmann::json m = nlohmann::json::parse(std::ifstream(from / "manifest.json"));
    write_sparse_npy(to / "chunks.npy", chunks.dtype(), {n, cs});
    write_sparse_npy(to / "doc_ids.npy", DType::I64, {n});
    const std::int64_t offsets[2] = {0, n}, starts[1] = {0};
    npy_save((to / "doc_offsets.npy").string(), DType::I64, {2}, offsets);
    npy_save((to / "seq_starts.npy").string(), DType::I64, {1}, starts);
    fs::copy_file(from / "sources.jsonl", to / "sources.jsonl");
    for (auto& o : m["outputs"]) {
        const std::string name = o.value("path", "");
        if (name == "chunks.npy") o["shape"] = {n, cs};
        if (name == "doc_ids.npy") o["shape"] = {n};
        if (name == "doc_offsets.npy") o["shape"] = {2};
        if (name == "seq_starts.npy") o["shape"] = {1};
        o["size"] = static_cast<std::int64_t>(fs::file_size(to / name));
    }
    std::ofstream(to / "manifest.json") << m.dump(2);
}

}  // namespace

TEST_CASE("sizes: retro-index --kind bm25 refuses a database past Xapian's 32-bit document ids before any work") {
    const test::CliPipeline& p = test::bad_input_pipeline();
    test::TempDir t("bm25-huge");
    craft_database(p.db, t / "db", (std::int64_t{1} << 32));   // ids 1 .. 2^32 - 1: one chunk too many
    const test::RunResult r = test::run_tool("retro-index", (t / "db").string() + " --kind bm25 --out " + (t / "ix").string() +
                                                                 " --no-verify --threads 1");
    test::expect_refused(r, {(t / "db").string(), "holds 4294967296 chunks", "32-bit document ids, at most 4294967295",
                             "--kind dense"});
    CHECK_FALSE(fs::exists(t / "ix"));
}

TEST_CASE("sizes: an HNSW graph past 2^31 - 1 nodes is refused, an IVF index's HNSW quantizer is not held to it") {
    const std::int64_t past = std::int64_t{1} << 31;
    try {
        index_check_sizes("HNSW32", past, 16, 0, "", 0, false);
        FAIL("HNSW32 over 2^31 vectors was not refused");
    } catch (const UserError& e) {
        CHECK(std::string(e.what()).find("32-bit ints, at most 2147483647; there are 2147483648 vectors") != std::string::npos);
    }
    for (const char* factory : {"HNSW32", "PCA8,HNSW16"}) {   // at the limit: only the memory can refuse it
        try {
            index_check_sizes(factory, past - 1, 16, 0, "", 0, false);
        } catch (const UserError& e) {
            CHECK(std::string(e.what()).find("32-bit") == std::string::npos);
        }
    }
    try {   // the graph over the list centroids: a memory refusal at most, not the node limit
        index_check_sizes("IVF65536_HNSW32,PQ16", past, 64, 65536 * 40, "", 0, false);
    } catch (const UserError& e) {
        CHECK(std::string(e.what()).find("32-bit") == std::string::npos);
    }
}

TEST_CASE("sizes: retro-knn checks the memory of its copies of a whole database's rows (document ids, f16 embeddings as f32)") {
    const test::CliPipeline& p = test::bad_input_pipeline();
    test::TempDir t("knn-copies");
    const fs::path ix = t / "ix16";
    const test::RunResult built = test::run_tool("retro-index", p.db.string() + " --out " + ix.string() +
                                                                    " --dim 16 --embedding-dtype f16 --threads 1 --quiet");
    REQUIRE_MESSAGE(built.exit_code == 0, built.err);
    const std::int64_t n = NpyArray((p.db / "chunks.npy").string()).dim(0);
    const std::string knn = "retro-knn " + ix.string() + " --db " + p.db.string() + " --out " + (t / "k").string() +
                            " --exact --neighbours 1 --extra 0 --block 8 --threads 1 --quiet";
    const auto with_limit = [&](std::int64_t bytes) {
        return test::run_command("RETRO_MEMORY_LIMIT=" + std::to_string(bytes) + " " + test::tool_path("retro-knn") +
                                 knn.substr(std::string("retro-knn").size()));
    };
    // the f32 copy of n x 16 f16 values: 64 bytes a chunk; the document ids 8
    test::expect_refused(with_limit(48 * n), {"--exact: an f32 copy of the " + std::to_string(n) + " f16 embeddings",
                                              "--embedding-dtype f32"});
    CHECK_FALSE(fs::exists(t / "k"));
    test::expect_refused(with_limit(6 * n), {"--db: a copy of the document ids of " + std::to_string(n) + " chunks"});
    CHECK_FALSE(fs::exists(t / "k"));
    const test::RunResult ok = with_limit(200 * n);
    CHECK_MESSAGE(ok.exit_code == 0, ok.err);
    CHECK(fs::exists(t / "k" / "manifest.json"));
}

TEST_CASE("sizes: the index memory estimate grows per vector by what FAISS stores for it") {
    // index_memory.h's model of FAISS: an inverted list holds each vector's code (its bytes) and an 8-byte id
    // (ArrayInvertedLists: codes + idx_t ids); an HNSW node keeps 2M int links on level 0 plus its Flat vector
    // (d floats). Compared as the difference between n and 2n vectors, so that the constant parts drop out.
    const std::int64_t n = 1'000'000, train = 50'000;
    const auto grow = [&](const std::string& f, int d) {
        return index_memory_bytes(f, 2 * n, d, train, false) - index_memory_bytes(f, n, d, train, false);
    };
    CHECK(grow("IVF1024,PQ16", 64) == doctest::Approx(double(n) * (16 + 8)));      // 16 one-byte codes + id
    CHECK(grow("IVF1024,PQ8x4", 64) == doctest::Approx(double(n) * (4 + 8)));      // 8 half-byte codes + id
    CHECK(grow("IVF1024,Flat", 32) == doctest::Approx(double(n) * (32 * 4 + 8)));  // 32 floats + id
    CHECK(grow("OPQ16_32,IVF256,PQ16", 64) == doctest::Approx(double(n) * (16 + 8)));
    // HNSW: M more links a node on level 0 (2M in all, 4 bytes each) for each step of M, and a little more for the
    // upper levels (1/ln M of the nodes): HNSW32 against HNSW16 over the same vectors (the vectors' own bytes, the
    // threads' marks and the like drop out of the difference)
    const double per_node = (grow("HNSW32", 16) - grow("HNSW16", 16)) / double(n);
    CHECK(per_node >= 2 * (32 - 16) * 4);
    CHECK(per_node < 2 * 2 * (32 - 16) * 4);   // and not wildly more
}
