// retro-index / retro-knn refusals and options: bad input (exit 2, one line, nothing complete-looking), --device cuda
// without a GPU, retro-bench knn's JSON, --measure-recall, FAISS's re-search against our filter, embeddings of another
// shape, negative or oversized search options, options --exact would ignore, shards past the last block.
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

namespace {
// The recall@4 that retro-knn --measure-recall reports, recomputed over `rows` from a run's neighbours (`ids`) and the
// exact run's: an id is found where the exact run has it, or where its true inner product (from `emb`) ties the k-th
// exact score (knn_build.cpp's rule: true scores, an IVF-PQ run's own are approximate). With `sc` and `overstated`,
// also counts the neighbours whose reported score is more than 1e-3 from the true one.
double recall_at_4(const NpyArray& emb, const NpyArray& ids, const NpyArray& ex_ids, const NpyArray& ex_sc,
                   const std::vector<std::int64_t>& rows, const NpyArray* sc = nullptr, double* overstated = nullptr) {
    const std::int64_t d = emb.dim(1);
    const float* x = emb.data<float>();
    double hit = 0, total = 0;
    for (const std::int64_t q : rows) {
        std::set<std::int64_t> want;
        float kth = std::numeric_limits<float>::infinity();
        for (int j = 0; j < 4; ++j)
            if (ex_ids.data<std::int64_t>()[q * 4 + j] >= 0)
                want.insert(ex_ids.data<std::int64_t>()[q * 4 + j]), kth = ex_sc.data<float>()[q * 4 + j];
        double found = 0;
        for (int j = 0; j < 4; ++j) {
            const std::int64_t id = ids.data<std::int64_t>()[q * 4 + j];
            if (id < 0) continue;
            double dot = 0;
            for (std::int64_t c = 0; c < d; ++c) dot += double(x[q * d + c]) * x[id * d + c];
            if (sc && overstated) *overstated += std::fabs(sc->data<float>()[q * 4 + j] - dot) > 1e-3;
            if (want.count(id) || dot >= kth - 1e-5 * std::max(1.0, std::fabs(double(kth)))) found += 1;
        }
        hit += std::min<double>(found, double(want.size()));
        total += double(want.size());
    }
    return hit / total;
}
}  // namespace

TEST_CASE("knn: bad input ends with exit 2 - one line - nothing complete-looking") {
    SmallDb s(20000, 3);
    SmallDb other(20000, 4);
    fs::path idx = s.tmp / "index";
    REQUIRE(test::run_tool("retro-index", s.db.string() + " --out " + idx.string() + " --dim 16 --quiet").exit_code == 0);
    auto expect_bad = [](const test::RunResult& r, const std::string& what, const fs::path& out) {
        CHECK(r.exit_code == 2);
        CHECK_MESSAGE(r.err.find(what) != std::string::npos, r.err);
        CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
        CHECK(!fs::exists(out / "manifest.json"));
        CHECK(!fs::exists(out / "neighbours.npy"));
    };
    // db / index fingerprint mismatch
    expect_bad(test::run_tool("retro-knn", idx.string() + " --db " + other.db.string() + " --out " + (s.tmp / "k1").string()),
               "is not the database", s.tmp / "k1");
    // corrupt index file (past the fingerprint check, as with --no-verify or a folder of other code)
    fs::copy(idx, s.tmp / "corrupt", fs::copy_options::recursive);
    test::write_text(s.tmp / "corrupt/index.faiss", "not a faiss index at all");
    expect_bad(test::run_tool("retro-knn", (s.tmp / "corrupt").string() + " --db " + s.db.string() + " --out " + (s.tmp / "k2").string() + " --no-verify"),
               "corrupt or unreadable FAISS index", s.tmp / "k2");
    // wrong embedding dimension
    fs::copy(idx, s.tmp / "wrongdim", fs::copy_options::recursive);
    std::vector<float> z(10 * 8, 0.0f);
    npy_save((s.tmp / "wrongdim/embeddings.npy").string(), {10, 8}, z.data());
    expect_bad(test::run_tool("retro-knn", (s.tmp / "wrongdim").string() + " --db " + s.db.string() + " --exact --no-verify --out " + (s.tmp / "k3").string()),
               "has dimension 8", s.tmp / "k3");
    // too few chunks to train a PQ index: the factory asked for is named (not the one with nlist lowered to fit), and
    // no warning of the lowering comes before the refusal
    const auto pq = test::run_tool("retro-index", s.db.string() + " --out " + (s.tmp / "i2").string() + " --dim 16 --index IVF64,PQ8");
    expect_bad(pq, "too few chunks to train 'IVF64,PQ8'", s.tmp / "i2");
    CHECK(pq.err.find("use --index Flat") != std::string::npos);
    // a bad factory string
    expect_bad(test::run_tool("retro-index", s.db.string() + " --out " + (s.tmp / "i3").string() + " --index Bogus42"),
               "FAISS does not understand", s.tmp / "i3");
    // ... with a model embedder: refused before any chunk is embedded (it was refused after embedding them all, and
    // left the folder for --resume), and no folder is left behind
    const auto lower = test::run_tool("retro-index", s.db.string() + " --out " + (s.tmp / "i3b").string() + " --index flat --embedder bert --model " +
                                                         (test::source_dir() / "tests/reference/golden/bert_tiny").string());
    expect_bad(lower, "FAISS does not understand 'flat'", s.tmp / "i3b");
    CHECK(lower.err.find("embedding chunks") == std::string::npos);
    CHECK(!fs::exists(s.tmp / "i3b"));
    // missing bert model files
    fs::create_directories(s.tmp / "emptymodel");
    expect_bad(test::run_tool("retro-index", s.db.string() + " --out " + (s.tmp / "i4").string() + " --embedder bert --model " +
                                                 (s.tmp / "emptymodel").string()),
               "emptymodel", s.tmp / "i4");
    // too few points for the asked nlist: lowered, and said so
    auto low = test::run_tool("retro-index", s.db.string() + " --out " + (s.tmp / "i5").string() + " --dim 16 --index IVF4096,Flat");
    CHECK(low.exit_code == 0);
    CHECK(low.err.find("lowered nlist from 4096") != std::string::npos);
}

TEST_CASE("knn: retro-knn --exact --device cuda equals --device cpu - or fails in one line without a GPU") {
    SmallDb s(20000, 5);
    fs::path idx = s.tmp / "index";
    REQUIRE(test::run_tool("retro-index", s.db.string() + " --out " + idx.string() + " --dim 16 --index Flat --quiet").exit_code == 0);
    std::string base = idx.string() + " --db " + s.db.string() + " --neighbours 4 --exact --quiet";
    auto approx = test::run_tool("retro-knn", base.substr(0, base.find(" --exact")) + " --device cuda --out " + (s.tmp / "a").string());
    CHECK(approx.exit_code == 2);
    CHECK(approx.err.find("only exact search runs on the GPU") != std::string::npos);
    auto gpu = test::run_tool("retro-knn", base + " --device cuda --out " + (s.tmp / "g").string());
    if (cuda_device_count() == 0) {
        CHECK(gpu.exit_code == 2);
        CHECK(std::count(gpu.err.begin(), gpu.err.end(), '\n') == 1);
        CHECK(gpu.err.find(kCudaBuilt ? "no CUDA device found" : "built without CUDA") != std::string::npos);
        CHECK(!fs::exists(s.tmp / "g" / "manifest.json"));
        RETRO_SKIP("no CUDA device");
    }
    REQUIRE_MESSAGE(gpu.exit_code == 0, gpu.err);
    REQUIRE(test::run_tool("retro-knn", base + " --out " + (s.tmp / "c").string()).exit_code == 0);
    NpyArray gi((s.tmp / "g/neighbours.npy").string()), ci((s.tmp / "c/neighbours.npy").string());
    NpyArray gs((s.tmp / "g/distances.npy").string()), cs((s.tmp / "c/distances.npy").string());
    REQUIRE(gi.numel() == ci.numel());
    for (std::int64_t i = 0; i < gi.numel(); ++i) {
        CHECK(gs.data<float>()[i] == doctest::Approx(cs.data<float>()[i]).epsilon(1e-5));
        std::int64_t r = i % 4;
        float here = cs.data<float>()[i];
        bool tied = (r > 0 && std::fabs(here - cs.data<float>()[i - 1]) < 1e-5f) || (r < 3 && std::fabs(here - cs.data<float>()[i + 1]) < 1e-5f);
        if (!tied) CHECK(gi.data<std::int64_t>()[i] == ci.data<std::int64_t>()[i]);
    }
}

TEST_CASE("knn: retro-bench knn's JSON rates are its counts over its seconds - queries/s, GFLOP/s, the ratios") {
    // flops_formula "2 * queries * n * dim per exact search"; docs/tools.md: speedup_vs_faiss_flat over FAISS's
    // IndexFlatIP in the same run (mutants dividing the base rows by the seconds as queries/s, and inverting the
    // speedup, survived: nothing read those fields)
    test::TempDir tmp("bench-knn-json");
    const auto r = test::run_tool("retro-bench", "knn --n 1000 --dim 8 --queries 10 --ivf-nlist 0 --thread-counts 1 --quiet --json " +
                                                     (tmp / "k.json").string());
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    const auto j = nlohmann::json::parse(test::read_text(tmp / "k.json"));
    const double q = j.at("shape").at("queries").get<double>(), n = j.at("shape").at("n").get<double>(),
                 d = j.at("shape").at("dim").get<double>();
    REQUIRE(q == 10);
    REQUIRE(n == 1000);
    double faiss_seconds = -1;
    for (const auto& row : j.at("rows"))
        if (row.at("method") == "faiss IndexFlatIP") faiss_seconds = row.at("seconds").get<double>();
    REQUIRE(faiss_seconds > 0);
    int ours = 0;
    for (const auto& row : j.at("rows")) {
        const std::string method = row.at("method").get<std::string>();
        CAPTURE(method);
        const double s = row.at("seconds").get<double>(), g = row.at("gflops").get<double>();
        CHECK(row.at("queries_per_s").get<double>() == doctest::Approx(q / s).epsilon(1e-9));
        CHECK(g == doctest::Approx(2 * q * n * d / s / 1e9).epsilon(1e-9));
        CHECK(row.at("ratio_to_sgemm").get<double>() == doctest::Approx(g / row.at("sgemm_gflops").get<double>()).epsilon(1e-9));
        if (row.contains("speedup_vs_faiss_flat")) {
            ours++;
            CHECK(row.at("speedup_vs_faiss_flat").get<double>() == doctest::Approx(faiss_seconds / s).epsilon(1e-9));
        }
    }
    CHECK(ours >= 1);
}

TEST_CASE("knn: retro-bench knn --cuda fails at once in one line without a GPU") {
    if (cuda_device_count() > 0) RETRO_SKIP("a CUDA device is present (the GPU row is measured by hand: docs/gpu.md)");
    auto r = test::run_tool("retro-bench", "knn --n 1000 --dim 8 --queries 10 --ivf-nlist 0 --cuda");
    CHECK(r.exit_code == 2);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    CHECK(r.err.find(kCudaBuilt ? "--cuda: no CUDA device found" : "--cuda: retro-bench was built without CUDA") != std::string::npos);
    CHECK(r.out.empty());   // no CPU rows measured before the error
}

TEST_CASE("knn: retro-index --device cuda - bow refused - bert without a GPU fails in one line with no manifest") {
    SmallDb s(20000, 6);
    auto bow = test::run_tool("retro-index", s.db.string() + " --out " + (s.tmp / "b").string() + " --device cuda");
    CHECK(bow.exit_code == 2);
    CHECK(std::count(bow.err.begin(), bow.err.end(), '\n') == 1);
    CHECK(bow.err.find("only the bert embedder runs on the GPU") != std::string::npos);
    CHECK(!fs::exists(s.tmp / "b" / "manifest.json"));
    if (cuda_device_count() > 0) RETRO_SKIP("a CUDA device is present (the GPU embedder is checked in test_bert.cpp)");
    auto bert = test::run_tool("retro-index", s.db.string() + " --out " + (s.tmp / "g").string() +
                                                  " --embedder bert --model " + (test::source_dir() / "tests/reference/golden/bert_tiny").string() +
                                                  " --device cuda");
    CHECK(bert.exit_code == 2);
    CHECK(std::count(bert.err.begin(), bert.err.end(), '\n') == 1);
    CHECK(bert.err.find(kCudaBuilt ? "no CUDA device found" : "built without CUDA") != std::string::npos);
    CHECK(!fs::exists(s.tmp / "g" / "manifest.json"));
}

TEST_CASE("knn: --measure-recall of a compressed index counts by true inner products, not the index's own scores") {
    // a helper's pass (session 54): IVF64,PQ8x4 reported recall 0.49 for a true 0.08 - a neighbour counted as found when
    // its score in distances.npy (PQ's approximation, overstated) reached the exact k-th score
    SmallDb s(120000, 4);
    const fs::path idx = s.tmp / "pq", knn = s.tmp / "knn", exact = s.tmp / "exact";
    auto r = test::run_tool("retro-index", s.db.string() + " --out " + idx.string() + " --dim 16 --index PQ4x4 --quiet");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    r = test::run_tool("retro-knn", idx.string() + " --db " + s.db.string() + " --out " + knn.string() +
                                        " --neighbours 4 --measure-recall 100000 --quiet");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    r = test::run_tool("retro-knn", idx.string() + " --db " + s.db.string() + " --out " + exact.string() + " --neighbours 4 --exact --quiet");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    NpyArray emb((idx / "embeddings.npy").string()), ids((knn / "neighbours.npy").string()), sc((knn / "distances.npy").string());
    NpyArray ex_ids((exact / "neighbours.npy").string()), ex_sc((exact / "distances.npy").string());
    const std::int64_t n = ids.dim(0);
    std::vector<std::int64_t> all(static_cast<std::size_t>(n));
    std::iota(all.begin(), all.end(), std::int64_t(0));
    double overstated = 0;
    const double recomputed = recall_at_4(emb, ids, ex_ids, ex_sc, all, &sc, &overstated);
    REQUIRE(overstated > 0);   // (the precondition: PQ's scores are not the true ones)
    const double reported = nlohmann::json::parse(test::read_text(knn / "manifest.json"))["recall"]["recall_at_k"].get<double>();
    CHECK(reported == doctest::Approx(recomputed).epsilon(1e-9));
    CHECK(reported < 0.99);
}

TEST_CASE("knn: --measure-recall of fewer queries than rows samples them evenly spaced, row i n / sample") {
    // knn_build.cpp's rule (the sample spread over the database, not its first rows), recomputed here from the
    // approximate and exact outputs with the documented tie rule (a neighbour found when exact search returned it, or
    // its true inner product reaches the exact k-th score). A lossy index (PQ4x4) so that recall differs by row.
    SmallDb s(120000, 4);
    const fs::path idx = s.tmp / "pq", knn = s.tmp / "knn", exact = s.tmp / "exact";
    auto r = test::run_tool("retro-index", s.db.string() + " --out " + idx.string() + " --dim 16 --index PQ4x4 --quiet");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    const std::int64_t sample = 37;
    r = test::run_tool("retro-knn", idx.string() + " --db " + s.db.string() + " --out " + knn.string() +
                                        " --neighbours 4 --measure-recall 37 --quiet");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    r = test::run_tool("retro-knn", idx.string() + " --db " + s.db.string() + " --out " + exact.string() + " --neighbours 4 --exact --quiet");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    NpyArray emb((idx / "embeddings.npy").string()), ids((knn / "neighbours.npy").string());
    NpyArray ex_ids((exact / "neighbours.npy").string()), ex_sc((exact / "distances.npy").string());
    const std::int64_t n = ids.dim(0);
    REQUIRE(n > 4 * sample);
    const auto recall_of = [&](const std::vector<std::int64_t>& rows) { return recall_at_4(emb, ids, ex_ids, ex_sc, rows); };
    std::vector<std::int64_t> spread, first;
    for (std::int64_t i = 0; i < sample; ++i) spread.push_back(i * n / sample), first.push_back(i);
    const auto m = nlohmann::json::parse(test::read_text(knn / "manifest.json"));
    CHECK(m["recall"]["sample"] == sample);
    const double reported = m["recall"]["recall_at_k"].get<double>();
    CAPTURE(recall_of(first));
    CHECK(reported == doctest::Approx(recall_of(spread)).epsilon(1e-9));
}

TEST_CASE("knn: FAISS's search re-searches rows filled by their own document, ours filters inside - "
          "Flat equals exact both ways") {
    SmallDb s(30000, 7);
    fs::path idx = s.tmp / "index";
    REQUIRE(test::run_tool("retro-index", s.db.string() + " --out " + idx.string() + " --dim 16 --index Flat --quiet").exit_code == 0);
    std::string base = idx.string() + " --db " + s.db.string() + " --neighbours 4";
    REQUIRE(test::run_tool("retro-knn", base + " --exact --quiet --out " + (s.tmp / "e").string()).exit_code == 0);
    for (const std::string faiss_run : {"faiss", "ours"}) {
        CAPTURE(faiss_run);
        auto ap = test::run_tool("retro-knn", base + " --extra 0 --out " + (s.tmp / "a").string() + " --force" +
                                                  (faiss_run == "faiss" ? " --faiss-search" : ""));   // self is always a candidate
        REQUIRE_MESSAGE(ap.exit_code == 0, ap.err);
        CHECK((ap.err.find("searches with more candidates") != std::string::npos) == (faiss_run == "faiss"));
        CHECK(ap.err.find(faiss_run == "faiss" ? "search: faiss" : "search: flat") != std::string::npos);
        NpyArray ai((s.tmp / "a/neighbours.npy").string()), ei((s.tmp / "e/neighbours.npy").string());
        NpyArray as((s.tmp / "a/distances.npy").string()), es((s.tmp / "e/distances.npy").string());
        REQUIRE(ai.numel() == ei.numel());
        for (std::int64_t i = 0; i < ai.numel(); ++i) {
            const std::int64_t r = i % 4;
            CHECK((ai.data<std::int64_t>()[i] < 0) == (ei.data<std::int64_t>()[i] < 0));
            if (ei.data<std::int64_t>()[i] < 0) continue;
            CHECK(as.data<float>()[i] == doctest::Approx(es.data<float>()[i]).epsilon(1e-5));
            // same distance at every rank; ids too, except where scores tie (duplicate chunks embed identically),
            // including the last rank, whose tie may be with a chunk just outside the list
            const float here = es.data<float>()[i];
            const bool tied = r == 3 || (r > 0 && std::fabs(here - es.data<float>()[i - 1]) < 1e-5f) ||
                              std::fabs(here - es.data<float>()[i + 1]) < 1e-5f;
            if (!tied) CHECK(ai.data<std::int64_t>()[i] == ei.data<std::int64_t>()[i]);
        }
        CHECK(manifest_read((s.tmp / "a").string())["padded_fraction"].get<double>() ==
              doctest::Approx(manifest_read((s.tmp / "e").string())["padded_fraction"].get<double>()));
    }
}

TEST_CASE("knn: an embeddings.npy of another width or row count than the manifest and the database is refused before any output") {
    SmallDb s(20000, 6);
    fs::path idx = s.tmp / "index";
    REQUIRE(test::run_tool("retro-index", s.db.string() + " --out " + idx.string() + " --dim 16 --index Flat --quiet").exit_code == 0);
    const std::int64_t n = ChunkDb(s.db.string()).chunk_count();
    REQUIRE(n > 100);
    auto with_embeddings = [&](const std::string& name, std::int64_t rows, std::int64_t dim) {
        fs::path d = s.tmp / name;
        fs::copy(idx, d, fs::copy_options::recursive);
        std::vector<float> z(static_cast<std::size_t>(rows * dim), 0.5f);
        npy_save((d / "embeddings.npy").string(), {rows, dim}, z.data());
        return d;
    };
    const fs::path narrow = with_embeddings("narrow", n, 1), short_rows = with_embeddings("short", 100, 16);
    int run = 0;
    for (const auto& [dir, flags, want] : std::vector<std::tuple<fs::path, std::string, std::string>>{
             {narrow, "--faiss-search", "embeddings.npy: has dimension 1, the manifest says 16"},   // was SIGBUS
             {narrow, "", "embeddings.npy: has dimension 1, the manifest says 16"},                 // was rc 0
             {short_rows, "--exact", "embeddings.npy: has 100 rows, the database"},                  // was 100 rows, rc 0
             {short_rows, "", "embeddings.npy: has 100 rows, the database"},
             {short_rows, "--measure-recall 10", "embeddings.npy: has 100 rows, the database"}}) {
        const std::string args = dir.string() + " " + flags;
        CAPTURE(args);
        const fs::path out = s.tmp / ("k" + std::to_string(run++));
        auto r = test::run_tool("retro-knn", dir.string() + " --db " + s.db.string() + " --out " + out.string() + " --quiet --no-verify " + flags);
        CHECK(r.exit_code == 2);
        CHECK_MESSAGE(r.err.find(want) != std::string::npos, r.err);
        CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
        CHECK(!fs::exists(out));
    }
}

TEST_CASE("knn: negative --nprobe - --ef-search - --measure-recall are refused naming the option - an nprobe above nlist is lowered") {
    SmallDb s(20000, 8);
    fs::path idx = s.tmp / "index";
    auto refused = [](const test::RunResult& r, const std::string& want, const fs::path& out) {
        CHECK(r.exit_code == 2);
        CHECK_MESSAGE(r.err.find(want) != std::string::npos, r.err);
        CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
        CHECK(!fs::exists(out));
    };
    const std::string ibase = s.db.string() + " --dim 16 --quiet --out ";
    refused(test::run_tool("retro-index", ibase + (s.tmp / "i1").string() + " --index IVF8,Flat --nprobe -5"),
            "retro-index: error: --nprobe: must not be negative (got -5)", s.tmp / "i1");   // was replaced by nlist/4
    refused(test::run_tool("retro-index", ibase + (s.tmp / "i2").string() + " --index HNSW16 --ef-search -1"),
            "retro-index: error: --ef-search: must not be negative (got -1)", s.tmp / "i2");   // was recorded as -1
    auto big = test::run_tool("retro-index", s.db.string() + " --dim 16 --out " + idx.string() + " --index IVF8,Flat --nprobe 100000");
    REQUIRE_MESSAGE(big.exit_code == 0, big.err);
    const auto im = manifest_read(idx.string())["index"];
    const std::int64_t nlist = im["nlist"].get<std::int64_t>();
    REQUIRE(nlist > 0);
    CHECK(im["nprobe"] == nlist);   // was 100000
    CHECK_MESSAGE(big.err.find("--nprobe 100000 is more than the index's " + std::to_string(nlist) + " lists: searching all " +
                               std::to_string(nlist)) != std::string::npos,
                  big.err);
    const std::string kbase = idx.string() + " --db " + s.db.string() + " --quiet --out ";
    refused(test::run_tool("retro-knn", kbase + (s.tmp / "k1").string() + " --nprobe -1"), "retro-knn: error: --nprobe: must not be negative",
            s.tmp / "k1");
    refused(test::run_tool("retro-knn", kbase + (s.tmp / "k2").string() + " --ef-search -1"),
            "retro-knn: error: --ef-search: must not be negative", s.tmp / "k2");
    refused(test::run_tool("retro-knn", kbase + (s.tmp / "k3").string() + " --measure-recall -5"),
            "retro-knn: error: --measure-recall: must not be negative (got -5)", s.tmp / "k3");
    auto over = test::run_tool("retro-knn", idx.string() + " --db " + s.db.string() + " --out " + (s.tmp / "k4").string() + " --nprobe 1000");
    CHECK_MESSAGE(over.exit_code == 0, over.err);
    CHECK(over.err.find("--nprobe 1000 is more than the index's " + std::to_string(nlist) + " lists") != std::string::npos);
}

TEST_CASE("knn: --neighbours no row can fill is refused at once, and -1 slots after a search that compared every chunk say so") {
    // --neighbours 20000 over 14,444 chunks ran a minute, then warned of -1 slots with "a larger --nprobe" as the fix
    SmallDb s(20000, 9);
    const std::int64_t chunks = ChunkDb(s.db.string()).chunk_count();
    const fs::path idx = s.tmp / "index", bm = s.tmp / "bm25";
    REQUIRE(test::run_tool("retro-index", s.db.string() + " --out " + idx.string() + " --dim 16 --index Flat --quiet").exit_code == 0);
    REQUIRE(test::run_tool("retro-index", s.db.string() + " --out " + bm.string() + " --kind bm25 --quiet").exit_code == 0);
    for (const fs::path& index : {idx, bm}) {
        CAPTURE(index);
        auto r = test::run_tool("retro-knn", index.string() + " --db " + s.db.string() + " --out " + (s.tmp / "k").string() +
                                                 " --neighbours " + std::to_string(chunks));
        CHECK(r.exit_code == 2);
        CHECK(r.err.find("--neighbours: " + std::to_string(chunks) + " is not below the " + std::to_string(chunks) + " chunks of ") !=
              std::string::npos);
        CHECK(r.err.find("(fix: give at most " + std::to_string(chunks - 1) + ")") != std::string::npos);
        CHECK_FALSE(fs::exists(s.tmp / "k" / "manifest.json"));
    }
    // the most a row can hold: every other chunk, of which its own document's are left out: -1 slots, and a Flat
    // index compared every chunk already (no --nprobe to raise)
    auto r = test::run_tool("retro-knn", idx.string() + " --db " + s.db.string() + " --out " + (s.tmp / "k2").string() +
                                             " --neighbours " + std::to_string(chunks - 1));
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    CHECK(r.err.find("every chunk was compared") != std::string::npos);
    CHECK(r.err.find("--nprobe") == std::string::npos);
}

TEST_CASE("knn: options --exact would ignore are refused - an --extra past memory is named") {
    SmallDb s(20000, 9);
    const fs::path idx = s.tmp / "index";
    REQUIRE(test::run_tool("retro-index", s.db.string() + " --out " + idx.string() + " --dim 16 --index IVF4,Flat --quiet").exit_code == 0);
    for (const std::string flag : {"--faiss-search", "--nprobe 2", "--ef-search 16"}) {
        CAPTURE(flag);
        auto r = test::run_tool("retro-knn", idx.string() + " --db " + s.db.string() + " --out " + (s.tmp / "k").string() +
                                                 " --exact " + flag);
        CHECK(r.exit_code == 2);
        CHECK(r.err.find(flag.substr(0, flag.find(' ')) + ": ") != std::string::npos);
        CHECK(r.err.find("--exact does not search it") != std::string::npos);
        CHECK_FALSE(fs::exists(s.tmp / "k"));
    }
    auto big = test::run_tool("retro-knn", idx.string() + " --db " + s.db.string() + " --out " + (s.tmp / "k").string() +
                                               " --extra 1000000000");
    CHECK(big.exit_code == 2);
    const std::int64_t rows = ChunkDb(s.db.string()).chunk_count();
    REQUIRE(rows < 16384);   // a block is at most the queries there are
    CHECK_MESSAGE(big.err.find("--extra: blocks of " + std::to_string(rows) + " queries with 2 neighbours and 1000000000 extra candidates needs") !=
                      std::string::npos,
                  big.err);
    // a huge k is the k's fault, not --block's (it said "--block: ..."); a --block past the rows is no memory at all
    auto many = test::run_tool("retro-knn", idx.string() + " --db " + s.db.string() + " --out " + (s.tmp / "k").string() +
                                                " --neighbours 1000000000");
    CHECK(many.exit_code == 2);
    CHECK_MESSAGE(many.err.find("retro-knn: error: --neighbours: blocks of ") != std::string::npos, many.err);
    auto wide = test::run_tool("retro-knn", idx.string() + " --db " + s.db.string() + " --out " + (s.tmp / "k").string() +
                                                " --block 300000000 --quiet");
    CHECK_MESSAGE(wide.exit_code == 0, wide.err);
}

TEST_CASE("knn: an --ef-search past the graph is lowered with a word - a shard past the last block says so") {
    // a helper's pass (session 54): --ef-search 1000000 over 4,740 vectors ran 162 s without a word; a shard with no
    // block said "every block was searched before (--resume)" of a run without --resume
    SmallDb s(20000, 10);
    const fs::path idx = s.tmp / "hnsw";
    REQUIRE(test::run_tool("retro-index", s.db.string() + " --out " + idx.string() + " --dim 16 --index HNSW8 --quiet").exit_code == 0);
    const std::int64_t rows = ChunkDb(s.db.string()).chunk_count();
    auto wide = test::run_tool("retro-knn", idx.string() + " --db " + s.db.string() + " --out " + (s.tmp / "k").string() +
                                                " --neighbours 2 --ef-search 100000000");
    CHECK_MESSAGE(wide.exit_code == 0, wide.err);
    CHECK_MESSAGE(wide.err.find("--ef-search 100000000 is more than the " + std::to_string(rows) + " nodes of ") != std::string::npos,
                  wide.err);
    {   // an index without a graph: ignored, named with the value given (not "lowered" to its nlist first)
        const fs::path ivf = s.tmp / "ivf";
        REQUIRE(test::run_tool("retro-index", s.db.string() + " --out " + ivf.string() + " --dim 16 --index IVF4,Flat --quiet").exit_code == 0);
        auto r = test::run_tool("retro-knn", ivf.string() + " --db " + s.db.string() + " --out " + (s.tmp / "ki").string() +
                                                 " --neighbours 2 --ef-search 100");
        CHECK_MESSAGE(r.exit_code == 0, r.err);
        CHECK(r.err.find("--ef-search 100: ") != std::string::npos);
        CHECK(r.err.find("has no HNSW graph; ignored") != std::string::npos);
        CHECK(r.err.find("nodes of") == std::string::npos);
    }
    auto empty = test::run_tool("retro-knn", idx.string() + " --db " + s.db.string() + " --out " + (s.tmp / "s50").string() +
                                                 " --neighbours 2 --block 100000 --shard 50/100");
    CHECK_MESSAGE(empty.exit_code == 0, empty.err);
    CHECK_MESSAGE(empty.err.find("shard 50/100 has no blocks: the " + std::to_string(rows) + " rows make 1 block of 100000") !=
                      std::string::npos,
                  empty.err);
    CHECK(empty.err.find("--resume") == std::string::npos);
}
