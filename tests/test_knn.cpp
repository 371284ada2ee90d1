// index/knn: recall of the default approximate index on clustered data, the candidate filter, the
// bow embedder, and retro-index / retro-knn end to end (exact against the oracle, resume, shards,
// bad input: ids out of range in knn show, an embeddings.npy of another shape, negative search options;
// --device cuda). Exact search itself: test_exact_search.cpp.
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
#include "test_util.h"
#include "text/tokenizer.h"

using namespace retro;
namespace fs = std::filesystem;

using test::knn_oracle;

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

TEST_CASE("knn: bow embeddings are deterministic unit vectors - and similar chunks score higher") {
    BowOptions o;
    o.dim = 64;
    o.hash_bits = 10;
    BowEmbedder e(o, std::vector<float>(1024, 1.0f));
    std::int32_t chunks[4][8] = {{2, 10, 11, 12, 13, 14, 15, 16},
                                 {10, 11, 12, 13, 14, 15, 17, 3},
                                 {40, 41, 42, 43, 44, 45, 46, 47},
                                 {3, 0, 0, 0, 0, 0, 0, 0}};
    std::vector<float> out(4 * 64), again(4 * 64);
    e.embed(&chunks[0][0], 4, 8, out.data());
    e.embed(&chunks[0][0], 4, 8, again.data());
    CHECK(out == again);
    auto dot = [&](int a, int b) {
        double s = 0;
        for (int t = 0; t < 64; ++t) s += out[a * 64 + t] * out[b * 64 + t];
        return s;
    };
    CHECK(dot(0, 0) == doctest::Approx(1.0).epsilon(1e-6));
    CHECK(dot(0, 1) > dot(0, 2) + 0.3);
    CHECK(dot(3, 3) == 0.0);   // only special/pad ids: a zero row
}

TEST_CASE("knn: bow's idf is the documented smoothed idf, df counting the chunks that hold a feature") {
    // docs/index.md: idf = ln((1 + N) / (1 + df)) + 1 over the database's chunks. Chunks that repeat a token or a
    // bigram: a mutant counting a feature once per occurrence instead of once per chunk survived the tests before
    // (session 61's mutation campaign)
    test::TempDir dir("bow-idf");
    const int cs = 8;
    test::TinyDb t;
    t.rows = {2, 10, 10, 10, 11, 10, 10, 3,  2, 10, 11, 12, 13, 14, 15, 3,  2, 20, 20, 21, 20, 21, 3, 0,
              2, 12, 13, 12, 13, 12, 13, 3};
    t.n = 4;
    t.doc_ids = {0, 1, 2, 3};
    t.doc_offsets = {0, 1, 2, 3, 4};
    t.seq_starts = {0, 1, 2, 3};
    t.knn.assign(static_cast<std::size_t>(t.n * t.kk), -1);
    test::save_tiny_db(dir / "db", dir / "knn", t, cs, cs);
    const ChunkDb db((dir / "db").string());
    BowOptions o;
    o.hash_bits = 10;
    const std::vector<float> idf = bow_fit_idf(db, o);
    std::vector<std::int64_t> df(std::size_t{1} << o.hash_bits, 0);
    bool repeats = false;
    for (std::int64_t c = 0; c < t.n; c++) {
        std::vector<std::uint32_t> feats;
        bow_features(t.rows.data() + c * cs, cs, o.hash_bits, feats);
        const std::set<std::uint32_t> distinct(feats.begin(), feats.end());
        repeats = repeats || distinct.size() < feats.size();
        for (auto f : distinct) df[f]++;
    }
    REQUIRE(repeats);   // (the fixture holds what the check is for)
    REQUIRE(idf.size() == df.size());
    int differ = 0;
    for (std::size_t f = 0; f < df.size(); f++)
        differ += idf[f] != static_cast<float>(std::log((1.0 + 4) / (1.0 + static_cast<double>(df[f]))) + 1.0);
    CHECK(differ == 0);
}

TEST_CASE("knn: a bow feature list breaks at a pad, BOS or EOS - no bigram spans one") {
    // (a mutant that kept the chain across them survived: the last word of one document and the first of the next made
    // a bigram)
    const auto feats = [](std::vector<std::int32_t> ids) {
        std::vector<std::uint32_t> f;
        bow_features(ids.data(), static_cast<int>(ids.size()), 16, f);
        return f;
    };
    std::vector<std::uint32_t> apart = feats({5});
    for (const auto f : feats({6})) apart.push_back(f);
    std::sort(apart.begin(), apart.end());
    for (const std::int32_t sep : {TOKEN_PAD, TOKEN_BOS, TOKEN_EOS}) {
        CAPTURE(sep);
        CHECK(feats({5, sep, 6}) == apart);
    }
    CHECK(feats({5, 6}).size() == 3);   // side by side: two unigrams and their bigram
}

namespace {
// A small database built by the real tools: tokenizer, retro-chunk.
struct SmallDb {
    test::TempDir tmp{"knn"};
    fs::path db;
    explicit SmallDb(std::int64_t bytes = 60000, std::uint64_t seed = 1) {
        auto corpus = test::chunk_test_jsonl(tmp, "c.jsonl", bytes, 600, seed);
        db = tmp / "db";
        auto r = test::run_tool("retro-chunk", corpus.string() + " --tokenizer " + test::chunk_test_tokenizer() +
                                                   " --chunk-size 16 --seq-len 64 --out " + db.string() + " --quiet");
        REQUIRE_MESSAGE(r.exit_code == 0, r.err);
        REQUIRE(ChunkDb(db.string()).doc_count() >= 10);
    }
};
}  // namespace

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
    const std::int64_t n = ids.dim(0), d = emb.dim(1);
    const float* x = emb.data<float>();
    double hit = 0, total = 0, overstated = 0;
    for (std::int64_t q = 0; q < n; ++q) {
        std::set<std::int64_t> want;
        float kth = std::numeric_limits<float>::infinity();
        for (int j = 0; j < 4; ++j)
            if (ex_ids.data<std::int64_t>()[q * 4 + j] >= 0) want.insert(ex_ids.data<std::int64_t>()[q * 4 + j]), kth = ex_sc.data<float>()[q * 4 + j];
        double found = 0;
        for (int j = 0; j < 4; ++j) {
            const std::int64_t id = ids.data<std::int64_t>()[q * 4 + j];
            if (id < 0) continue;
            double dot = 0;
            for (std::int64_t c = 0; c < d; ++c) dot += double(x[q * d + c]) * x[id * d + c];
            overstated += std::fabs(sc.data<float>()[q * 4 + j] - dot) > 1e-3;
            if (want.count(id) || dot >= kth - 1e-5 * std::max(1.0, std::fabs(double(kth)))) found += 1;
        }
        hit += std::min<double>(found, double(want.size()));
        total += double(want.size());
    }
    REQUIRE(overstated > 0);   // (the precondition: PQ's scores are not the true ones)
    const double reported = nlohmann::json::parse(test::read_text(knn / "manifest.json"))["recall"]["recall_at_k"].get<double>();
    CHECK(reported == doctest::Approx(hit / total).epsilon(1e-9));
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
    const std::int64_t n = ids.dim(0), d = emb.dim(1);
    REQUIRE(n > 4 * sample);
    const float* x = emb.data<float>();
    const auto recall_of = [&](const std::vector<std::int64_t>& rows) {
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
                if (want.count(id) || dot >= kth - 1e-5 * std::max(1.0, std::fabs(double(kth)))) found += 1;
            }
            hit += std::min<double>(found, double(want.size()));
            total += double(want.size());
        }
        return hit / total;
    };
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
