// index/knn: recall of the default approximate index on clustered data, the candidate filter, index factory
// defaults and training sizes, and retro-index / retro-knn end to end (exact against the oracle, resume, shards).
// Exact search itself: test_exact_search.cpp; the bow embedder: test_bow_embedder.cpp; knn show:
// test_knn_show.cpp; refusals, options, --device cuda, --measure-recall and retro-bench knn: test_knn_options.cpp.
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

TEST_CASE("knn: filtering a candidate row drops self and same document - keeps order - pads") {
    std::int64_t cand[] = {5, 9, 2, -1, 7, 8};
    float sc[] = {0.9f, 0.8f, 0.7f, 0.6f, 0.5f, 0.4f};
    std::int64_t docs[] = {0, 0, 1, 1, 2, 3, 3, 4, 3, 2};
    std::int64_t ids[4];
    float out[4];
    knn_filter_row(cand, sc, 6, 9, docs[9], docs, 4, ids, out);   // query 9 is in doc 2: drops 9 and 4? (4 not a candidate)
    CHECK(ids[0] == 5);
    CHECK(ids[1] == 2);
    CHECK(ids[2] == 7);
    CHECK(ids[3] == 8);
    knn_filter_row(cand, sc, 6, 5, docs[5], docs, 4, ids, out);   // query 5 in doc 3: drops 5, 8
    CHECK(ids[0] == 9);
    CHECK(ids[1] == 2);
    CHECK(ids[2] == 7);
    CHECK(ids[3] == -1);
    CHECK(std::isinf(out[3]));
}

TEST_CASE("knn: the default approximate index reaches recall@10 >= 0.95 on 200k clustered vectors") {
    const std::int64_t n = 200000, m = 500;
    const int d = 32, k = 10, clusters = 2000;
    std::mt19937 rng(11);
    std::normal_distribution<float> g(0.0f, 1.0f);
    std::vector<float> centres(static_cast<std::size_t>(clusters * d)), x(static_cast<std::size_t>(n * d));
    for (auto& c : centres) c = g(rng);
    for (std::int64_t i = 0; i < n; ++i) {
        std::int64_t c = rng() % clusters;
        double norm = 0;
        for (int t = 0; t < d; ++t) {
            float v = centres[c * d + t] + 0.3f * g(rng);
            x[i * d + t] = v;
            norm += double(v) * v;
        }
        for (int t = 0; t < d; ++t) x[i * d + t] /= static_cast<float>(std::sqrt(norm));
    }
    const std::string factory = "IVF" + std::to_string(index_ivf_nlist(n)) + ",Flat";   // the default's IVF rule
    CHECK(factory == "IVF1024,Flat");
    FaissIndex index(factory, d);
    index.train(n, x.data());
    index.add(n, x.data());
    index.set_nprobe(index_default_nprobe(index_factory_nlist(factory)));
    std::vector<float> q(x.begin(), x.begin() + m * d);   // the first m vectors as queries
    std::vector<std::int64_t> approx(m * k), exact(m * k);
    std::vector<float> s1(m * k), s2(m * k);
    index.search(m, q.data(), k, approx.data(), s1.data());
    ExactSearchOptions o;
    o.k = k;
    exact_search_ip(q.data(), m, x.data(), n, d, o, exact.data(), s2.data());
    double hit = 0;
    for (std::int64_t i = 0; i < m; ++i) {
        std::set<std::int64_t> a(approx.begin() + i * k, approx.begin() + (i + 1) * k);
        for (int r = 0; r < k; ++r) hit += a.count(exact[i * k + r]);
    }
    double recall = hit / (m * k);
    MESSAGE("recall@10 = " << recall);
    CHECK(recall >= 0.95);
}

TEST_CASE("knn: index factory defaults and nlist fitting") {
    CHECK(index_default_factory(1000) == "Flat");
    CHECK(index_default_factory(1'000'000) == "Flat");
    CHECK(index_default_factory(1 << 20) == "IVF4096,Flat");
    CHECK(index_default_factory(2'000'000) == "IVF4096,Flat");
    CHECK(index_default_nprobe(4096) == 1024);
    CHECK(index_default_nprobe(2) == 1);
    CHECK(index_default_factory(100'000'000).rfind("OPQ64_256,IVF32768_HNSW32,PQ64", 0) == 0);
    std::string note;
    CHECK(index_fit_factory("IVF1024,Flat", 1000, note) == "IVF25,Flat");
    CHECK(note.find("lowered nlist from 1024 to 25") != std::string::npos);
    CHECK(index_fit_factory("IVF16,Flat", 1000, note) == "IVF16,Flat");
    CHECK(note.empty());
}

// Megatron-LM #699 and docs/index.md: k-means wants at least 39 training points a centroid. Exactly 39 is enough
// (nothing lowered, no note), one fewer is not; the same bound for a PQ codebook of 2^nbits centroids (8 bits
// where the factory string names none).
TEST_CASE("knn: 39 training points a centroid are enough - nlist and PQ codebooks at the bound") {
    std::string note;
    CHECK(index_fit_factory("IVF16,Flat", 39 * 16, note) == "IVF16,Flat");
    CHECK(note.empty());
    CHECK(index_fit_factory("IVF16,Flat", 39 * 16 - 1, note) == "IVF15,Flat");   // floor(623 / 39) = 15
    CHECK(note.find("lowered nlist from 16 to 15") != std::string::npos);
    // PQ: 2^nbits centroids a sub-quantizer
    CHECK_NOTHROW(index_check_trainable("PQ4x4", 39 * 16));
    CHECK_THROWS_AS(index_check_trainable("PQ4x4", 39 * 16 - 1), UserError);
    CHECK_NOTHROW(index_check_trainable("IVF4,PQ8", 39 * 256));   // no x: 8 bits, 256 centroids
    CHECK_THROWS_AS(index_check_trainable("IVF4,PQ8", 39 * 256 - 1), UserError);
    CHECK_THROWS_AS(index_check_trainable("IVF4,PQ8", 39 * 16), UserError);
    CHECK_NOTHROW(index_check_trainable("IVF4,Flat", 1));   // no PQ part: nothing to train beyond the lists
}

// docs/index.md: training uses min(N, max(256 nlist, 65,536)) vectors for IVF (FAISS's k-means samples at most 256
// points a centroid), all N for the other indices. (A mutant sampling 39 nlist survived: it shows only past 65,536.)
TEST_CASE("knn: the training sample - 256 points a list for IVF, at least 65,536, never more than the database") {
    CHECK(index_training_count("IVF1024,PQ16", 10'000'000) == 262'144);
    CHECK(index_training_count("OPQ64_256,IVF4096_HNSW32,PQ64", 10'000'000) == 1'048'576);
    CHECK(index_training_count("IVF64,Flat", 10'000'000) == 65'536);   // 256 x 64 = 16,384: the floor
    CHECK(index_training_count("IVF1024,PQ16", 100'000) == 100'000);   // the whole database
    CHECK(index_training_count("HNSW32", 200'000) == 200'000);
    CHECK(index_training_count("PQ16", 200'000) == 200'000);
}

// How many neighbours a row can hold: every chunk of the database for queries from another database, every chunk
// but the query itself in self mode (a chunk is never its own neighbour). --neighbours up to that is taken.
TEST_CASE("knn: --neighbours may be every chunk a row can hold - all of them for other queries, all but itself in self mode") {
    CHECK_NOTHROW(knn_check_k(5, 5, false, "db"));
    CHECK_THROWS_AS(knn_check_k(6, 5, false, "db"), UserError);
    CHECK_NOTHROW(knn_check_k(4, 5, true, "db"));
    CHECK_THROWS_AS(knn_check_k(5, 5, true, "db"), UserError);
    CHECK_NOTHROW(knn_check_k(1, 1, false, "db"));
    CHECK_THROWS_AS(knn_check_k(1, 1, true, "db"), UserError);
}

TEST_CASE("knn: retro-index + retro-knn end to end: exact equals the oracle - approximate never leaks a document") {
    SmallDb s;
    fs::path idx = s.tmp / "index", knn = s.tmp / "knn", exact = s.tmp / "exact";
    auto r = test::run_tool("retro-index", s.db.string() + " --out " + idx.string() + " --dim 32 --index IVF8,Flat --quiet");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    r = test::run_tool("retro-knn", idx.string() + " --db " + s.db.string() + " --out " + knn.string() +
                                        " --neighbours 3 --measure-recall 200 --nprobe 8");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    r = test::run_tool("retro-knn", idx.string() + " --db " + s.db.string() + " --out " + exact.string() + " --neighbours 3 --exact --quiet");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    ChunkDb db(s.db.string());
    NpyArray emb((idx / "embeddings.npy").string());
    const std::int64_t n = db.chunk_count();
    REQUIRE(emb.dim(0) == n);
    {   // the recall's sample as measured: all n queries where --measure-recall asks for more (it said the asked 100000)
        const fs::path all = s.tmp / "knn-all";
        r = test::run_tool("retro-knn", idx.string() + " --db " + s.db.string() + " --out " + all.string() +
                                            " --neighbours 3 --measure-recall 100000 --nprobe 8 --quiet");
        REQUIRE_MESSAGE(r.exit_code == 0, r.err);
        const auto km = nlohmann::json::parse(test::read_text(all / "manifest.json"));
        REQUIRE(n < 100000);
        CHECK(km["recall"]["sample"] == n);
    }
    const int d = static_cast<int>(emb.dim(1));
    std::vector<float> x(emb.data<float>(), emb.data<float>() + n * d);
    std::vector<std::int64_t> docs(n);
    for (std::int64_t i = 0; i < n; ++i) docs[i] = db.doc_of(i);
    NpyArray ex_ids((exact / "neighbours.npy").string()), ex_sc((exact / "distances.npy").string());
    REQUIRE(ex_ids.shape() == std::vector<std::int64_t>{n, 3});
    // the oracle on a sample of rows (a float dot product loop may differ in the last bit from
    // sgemm, so ids are compared where the oracle's scores are not near-tied)
    std::vector<std::int64_t> want;
    std::vector<float> want_sc;
    std::int64_t checked = 0;
    for (std::int64_t i = 0; i < n; i += std::max<std::int64_t>(1, n / 100)) {
        std::vector<float> qi(x.begin() + i * d, x.begin() + (i + 1) * d);
        std::vector<std::int64_t> docs_i(docs);
        docs_i.push_back(docs[i]);   // the query's doc at index n
        knn_oracle(qi, x, d, 3, &docs_i, n, want, want_sc);
        for (int r2 = 0; r2 < 3; ++r2) {
            if (std::isinf(want_sc[r2])) {
                CHECK(ex_ids.data<std::int64_t>()[i * 3 + r2] == -1);
                continue;
            }
            CHECK(ex_sc.data<float>()[i * 3 + r2] == doctest::Approx(want_sc[r2]).epsilon(1e-5));
            bool tied = (r2 > 0 && std::fabs(want_sc[r2] - want_sc[r2 - 1]) < 1e-5f) ||
                        (r2 < 2 && std::fabs(want_sc[r2] - want_sc[r2 + 1]) < 1e-5f);
            if (!tied) CHECK(ex_ids.data<std::int64_t>()[i * 3 + r2] == want[r2]);
        }
        ++checked;
    }
    CHECK(checked >= 50);
    NpyArray ap((knn / "neighbours.npy").string());
    for (std::int64_t i = 0; i < n; ++i)
        for (int r2 = 0; r2 < 3; ++r2) {
            std::int64_t id = ap.data<std::int64_t>()[i * 3 + r2];
            CHECK(id != i);
            if (id >= 0) CHECK(docs[id] != docs[i]);
        }
    auto shown = test::run_tool("retro-knn", "show " + exact.string() + " --db " + s.db.string() + " --chunk 5 --json");
    REQUIRE_MESSAGE(shown.exit_code == 0, shown.err);
    auto j = nlohmann::json::parse(shown.out);
    CHECK(j["chunk"] == 5);
    CHECK(!j["text"].get<std::string>().empty());
    for (std::size_t r2 = 0; r2 < j["neighbours"].size(); ++r2)
        CHECK(j["neighbours"][r2]["chunk"] == ex_ids.data<std::int64_t>()[5 * 3 + r2]);
    auto m = manifest_read(knn.string());
    CHECK(m["recall"]["sample"] == 200);
    CHECK(m["recall"]["recall_at_k"].get<double>() >= 0.8);
    {   // the reported recall, recomputed from the two outputs on the same 200 rows with the same tie rule
        NpyArray ap_sc((knn / "distances.npy").string());
        double hit = 0, total = 0;
        for (std::int64_t i = 0; i < 200; ++i) {
            const std::int64_t r = i * n / 200;
            std::set<std::int64_t> ex;
            float kth = std::numeric_limits<float>::infinity();
            for (int j2 = 0; j2 < 3; ++j2)
                if (ex_ids.data<std::int64_t>()[r * 3 + j2] >= 0)
                    ex.insert(ex_ids.data<std::int64_t>()[r * 3 + j2]), kth = ex_sc.data<float>()[r * 3 + j2];
            double found = 0;
            for (int j2 = 0; j2 < 3; ++j2) {
                const std::int64_t id = ap.data<std::int64_t>()[r * 3 + j2];
                const float sc = ap_sc.data<float>()[r * 3 + j2];
                if (id >= 0 && (ex.count(id) || sc >= kth - 1e-6f * std::max(1.0f, std::fabs(kth)))) found += 1;
            }
            total += static_cast<double>(ex.size());
            hit += std::min<double>(found, static_cast<double>(ex.size()));
        }
        CHECK(m["recall"]["recall_at_k"].get<double>() == doctest::Approx(hit / total).epsilon(1e-9));
    }
    CHECK(!fs::exists(knn / "parts"));
    CHECK(!fs::exists(knn / "state.json"));
}

TEST_CASE("knn: sharded + merged and resumed runs equal one straight run - byte for byte") {
    SmallDb s(40000, 2);
    fs::path idx = s.tmp / "index";
    std::string base = s.db.string() + " --dim 16 --index Flat --block 100 --quiet";
    REQUIRE(test::run_tool("retro-index", base + " --out " + idx.string()).exit_code == 0);
    REQUIRE(test::run_tool("retro-index", base + " --out " + (s.tmp / "i0").string() + " --shard 0/2").exit_code == 0);
    REQUIRE(test::run_tool("retro-index", base + " --out " + (s.tmp / "i1").string() + " --shard 1/2").exit_code == 0);
    auto r = test::run_tool("retro-index", "merge " + (s.tmp / "i0").string() + " " + (s.tmp / "i1").string() + " --out " +
                                               (s.tmp / "im").string() + " --quiet");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    CHECK(test::read_text(idx / "embeddings.npy") == test::read_text(s.tmp / "im/embeddings.npy"));
    CHECK(test::read_text(idx / "index.faiss") == test::read_text(s.tmp / "im/index.faiss"));
    // folders that are not shards are named as such (a finished index said "state.json: missing")
    r = test::run_tool("retro-index", "merge " + idx.string() + " " + (s.tmp / "i1").string() + " --out " + (s.tmp / "imx").string());
    CHECK(r.exit_code == 2);
    CHECK_MESSAGE(r.err.find(idx.string() + ": is a finished retro-index folder, not a shard of a --shard run") != std::string::npos, r.err);
    r = test::run_tool("retro-index", "merge " + (s.tmp / "i0").string() + " " + (s.tmp / "nope").string() + " --out " +
                                          (s.tmp / "imx").string());
    CHECK(r.exit_code == 2);
    CHECK_MESSAGE(r.err.find((s.tmp / "nope").string() + ": no such folder") != std::string::npos, r.err);
    {   // an unfinished shard is named (the merge said "i0: block 1 ... is in none of the folders")
        fs::copy(s.tmp / "i1", s.tmp / "i1u", fs::copy_options::recursive);
        nlohmann::json st = nlohmann::json::parse(test::read_text(s.tmp / "i1u" / "state.json"));
        st.erase("shard_done");
        test::write_text(s.tmp / "i1u" / "state.json", st.dump());
        r = test::run_tool("retro-index", "merge " + (s.tmp / "i0").string() + " " + (s.tmp / "i1u").string() + " --out " +
                                              (s.tmp / "imx").string());
        CHECK(r.exit_code == 2);
        CHECK_MESSAGE(r.err.find((s.tmp / "i1u").string() + ": is shard 1/2, unfinished") != std::string::npos, r.err);
    }
    // a shard resumed as another shard (a requeued --shard auto job given another rank) is refused: it added its
    // blocks to the other's and relabelled the folder
    r = test::run_tool("retro-index", base + " --out " + (s.tmp / "i1").string() + " --shard 0/2 --resume");
    CHECK(r.exit_code == 2);
    CHECK_MESSAGE(r.err.find("records shard 1/2, this is shard 0/2") != std::string::npos, r.err);
    // a part damaged while the shard waited for its merge is refused by name (it was merged, its rows 1e15 long,
    // and every later check passed against the manifest's fingerprint of the damage)
    fs::copy(s.tmp / "i1", s.tmp / "i1d", fs::copy_options::recursive);
    {
        const fs::path part = s.tmp / "i1d" / "parts" / "embeddings.1.npy";
        REQUIRE(fs::exists(part));
        std::string bytes = test::read_text(part);
        bytes[bytes.size() - 5] ^= 0x40;
        test::write_text(part, bytes);
        r = test::run_tool("retro-index", "merge " + (s.tmp / "i0").string() + " " + (s.tmp / "i1d").string() + " --out " +
                                              (s.tmp / "imd").string() + " --quiet");
        CHECK(r.exit_code == 2);
        CHECK_MESSAGE(r.err.find(part.string() + ": has changed since it was written") != std::string::npos, r.err);
        CHECK_FALSE(fs::exists(s.tmp / "imd" / "manifest.json"));
    }
    {   // a part removed from a finished shard: the shard's own folder is named, not the first one given
        fs::copy(s.tmp / "i1", s.tmp / "i1r", fs::copy_options::recursive);
        fs::remove(s.tmp / "i1r" / "parts" / "embeddings.1.npy");
        r = test::run_tool("retro-index", "merge " + (s.tmp / "i0").string() + " " + (s.tmp / "i1r").string() + " --out " +
                                              (s.tmp / "imr").string() + " --quiet");
        CHECK(r.exit_code == 2);
        CHECK_MESSAGE(r.err.find((s.tmp / "i1r").string() + ": lacks block 1 of embeddings, which its shard 1/2 makes") !=
                          std::string::npos,
                      r.err);
    }
    {   // a part whose seal is gone, in a folder that seals its parts (a kill between the two, or a removal): refused
        fs::copy(s.tmp / "i1", s.tmp / "i1s", fs::copy_options::recursive);
        fs::remove(s.tmp / "i1s" / "parts" / "embeddings.1.npy.fingerprint");
        r = test::run_tool("retro-index", "merge " + (s.tmp / "i0").string() + " " + (s.tmp / "i1s").string() + " --out " +
                                              (s.tmp / "ims").string() + " --quiet");
        CHECK(r.exit_code == 2);
        CHECK_MESSAGE(r.err.find("embeddings.1.npy: has no embeddings.1.npy.fingerprint") != std::string::npos, r.err);
    }
    std::string kbase = idx.string() + " --db " + s.db.string() + " --neighbours 2 --block 64 --exact --quiet";
    REQUIRE(test::run_tool("retro-knn", kbase + " --out " + (s.tmp / "k").string()).exit_code == 0);
    REQUIRE(test::run_tool("retro-knn", kbase + " --out " + (s.tmp / "k0").string() + " --shard 0/3").exit_code == 0);
    REQUIRE(test::run_tool("retro-knn", kbase + " --out " + (s.tmp / "k1").string() + " --shard 1/3").exit_code == 0);
    r = test::run_tool("retro-knn", kbase + " --out " + (s.tmp / "k1").string() + " --shard 0/3 --resume");
    CHECK(r.exit_code == 2);
    CHECK_MESSAGE(r.err.find("records shard 1/3, this is shard 0/3") != std::string::npos, r.err);
    auto missing = test::run_tool("retro-knn", "merge " + (s.tmp / "k0").string() + " " + (s.tmp / "k1").string() + " --out " + (s.tmp / "km").string());
    CHECK(missing.exit_code == 2);   // shard 2/3 not done
    // named as the missing shard (it was "k0: block 2 ... is in none of the folders"), and the same folder twice
    CHECK(missing.err.find("shard 2/3: is missing: the folders given hold 2 of the 3 shards (fix: run retro-knn with --shard 2/3") !=
          std::string::npos);
    auto twice = test::run_tool("retro-knn", "merge " + (s.tmp / "k0").string() + " " + (s.tmp / "k1").string() + " " +
                                                 (s.tmp / "k1").string() + " --out " + (s.tmp / "km").string());
    CHECK(twice.exit_code == 2);
    CHECK(twice.err.find((s.tmp / "k1").string() + ": is given twice") != std::string::npos);
    // a finished shard given where a finished folder goes is named as a shard (it said "unfinished: --resume")
    auto as_input = test::run_tool("retro-knn", "show " + (s.tmp / "k0").string() + " --db " + s.db.string());
    CHECK(as_input.exit_code == 2);
    CHECK(as_input.err.find("is shard 0/3 of a sharded retro-knn run, finished") != std::string::npos);
    REQUIRE(test::run_tool("retro-knn", kbase + " --out " + (s.tmp / "k2").string() + " --shard 2/3").exit_code == 0);
    r = test::run_tool("retro-knn", "merge " + (s.tmp / "k0").string() + " " + (s.tmp / "k1").string() + " " +
                                        (s.tmp / "k2").string() + " --out " + (s.tmp / "km").string() + " --force --quiet");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    for (const char* f : {"neighbours.npy", "distances.npy"})
        CHECK(test::read_text(s.tmp / "k" / f) == test::read_text(s.tmp / "km" / f));
    // a merge again over its output: refused naming --force (a merge cannot be resumed), which remakes it
    auto again = test::run_tool("retro-knn", "merge " + (s.tmp / "k0").string() + " " + (s.tmp / "k1").string() + " " +
                                                 (s.tmp / "k2").string() + " --out " + (s.tmp / "km").string());
    CHECK(again.exit_code == 2);
    CHECK_MESSAGE(again.err.find("already exists (fix: pass --force to make it again (it removes only retro-knn's files))") !=
                      std::string::npos,
                  again.err);
    // resume: a shard's parts are exactly what a killed run leaves; resuming completes them
    fs::copy(s.tmp / "k0", s.tmp / "kr", fs::copy_options::recursive);
    // without --resume: named as a stopped run's parts, --resume offered (not the finished folder's words)
    auto parts = test::run_tool("retro-knn", kbase + " --out " + (s.tmp / "kr").string());
    CHECK(parts.exit_code == 2);
    CHECK_MESSAGE(parts.err.find("already exists: it holds the parts of a retro-knn run that was stopped (fix: pass --resume "
                                 "to continue it") != std::string::npos, parts.err);
    // ... with the same settings: another k is refused naming it and both values
    auto other_k = test::run_tool("retro-knn", idx.string() + " --db " + s.db.string() + " --neighbours 3 --block 64 --exact "
                                               "--quiet --out " + (s.tmp / "kr").string() + " --resume");
    CHECK(other_k.exit_code == 2);
    CHECK_MESSAGE(other_k.err.find("records another job: parameters.neighbours is 3, the folder's 2") != std::string::npos, other_k.err);
    r = test::run_tool("retro-knn", kbase + " --out " + (s.tmp / "kr").string() + " --resume");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    for (const char* f : {"neighbours.npy", "distances.npy"})
        CHECK(test::read_text(s.tmp / "k" / f) == test::read_text(s.tmp / "kr" / f));
    auto refuse = test::run_tool("retro-knn", kbase + " --out " + (s.tmp / "k").string());
    CHECK(refuse.exit_code == 2);
    CHECK_MESSAGE(refuse.err.find("already exists: it holds a finished neighbours folder (fix: pass --force to replace it, or "
                                  "choose another --out") != std::string::npos, refuse.err);
    // --resume of a finished folder: nothing to do for the same job (the files untouched), another job refused
    const std::string before = test::read_text(s.tmp / "k" / "manifest.json");
    auto done = test::run_tool("retro-knn", kbase + " --out " + (s.tmp / "k").string() + " --resume");
    CHECK_MESSAGE(done.exit_code == 0, done.err);
    CHECK(test::read_text(s.tmp / "k" / "manifest.json") == before);
    CHECK(!fs::exists(s.tmp / "k" / "parts"));
    auto other_job = test::run_tool("retro-knn", idx.string() + " --db " + s.db.string() + " --neighbours 3 --block 64 "
                                                 "--exact --quiet --out " + (s.tmp / "k").string() + " --resume");
    CHECK(other_job.exit_code == 2);
    CHECK_MESSAGE(other_job.err.find("finished neighbours of another job: parameters.neighbours is 3") != std::string::npos,
                  other_job.err);
    // retro-index likewise
    const std::string index_before = test::read_text(idx / "manifest.json");
    auto idone = test::run_tool("retro-index", base + " --out " + idx.string() + " --resume");
    CHECK_MESSAGE(idone.exit_code == 0, idone.err);
    CHECK(test::read_text(idx / "manifest.json") == index_before);
    auto iother = test::run_tool("retro-index", s.db.string() + " --dim 32 --index Flat --block 100 --quiet --out " +
                                                    idx.string() + " --resume");
    CHECK(iother.exit_code == 2);
    CHECK_MESSAGE(iother.err.find("complete index of another job: --dim is 32, the folder's 16") != std::string::npos, iother.err);
}
