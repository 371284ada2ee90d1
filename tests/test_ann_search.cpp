// index/ann_search: RetroKit's own search over FAISS index structures against FAISS's own search
// on the same index (IVF-Flat, IVF-PQ, OPQ + IVF-PQ, IVF with an HNSW quantizer, HNSW, Flat), at 1
// and 2 threads and with both scan kernels: the same neighbours, ties aside (scores equal to 1e-5,
// an id that differs must tie the score it replaced). The same-document filter against oracles:
// IVF against brute force over exactly the lists FAISS probes, HNSW against the unfiltered walk
// (the filter drops results, never graph nodes, so the walk is the same).
#include <faiss/IndexHNSW.h>
#include <faiss/IndexIVF.h>
#include <faiss/IndexIVFPQ.h>
#include <faiss/IndexPQ.h>
#include <faiss/IndexPreTransform.h>
#include <faiss/IVFlib.h>
#include <faiss/index_factory.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "core/blas_threads.h"
#include "core/npy.h"
#include "core/threads.h"
#include "index/ann_search.h"
#include "index/faiss_index.h"
#include "test_util.h"

using namespace retro;

namespace {

// n unit vectors around `clusters` centres (a retrieval-like distribution), deterministic.
std::vector<float> clustered(std::int64_t n, int d, int clusters, unsigned seed) {
    std::mt19937 centre_rng(11);
    std::normal_distribution<float> g(0.0f, 1.0f);
    std::vector<float> centres(static_cast<std::size_t>(clusters) * d);
    for (auto& c : centres) c = g(centre_rng);
    std::mt19937 rng(seed);
    std::vector<float> x(static_cast<std::size_t>(n * d));
    for (std::int64_t i = 0; i < n; ++i) {
        const auto c = static_cast<std::int64_t>(rng() % static_cast<unsigned>(clusters));
        double norm = 0;
        for (int t = 0; t < d; ++t) {
            float v = centres[static_cast<std::size_t>(c * d + t)] + 0.6f * g(rng);
            x[static_cast<std::size_t>(i * d + t)] = v;
            norm += double(v) * v;
        }
        for (int t = 0; t < d; ++t) x[static_cast<std::size_t>(i * d + t)] /= static_cast<float>(std::sqrt(norm));
    }
    return x;
}

bool close(float a, float b) { return std::fabs(a - b) <= 1e-5f * std::max(1.0f, std::fabs(b)); }

// Same neighbours, ties aside: equal scores rank by rank; where ids differ the scores tie.
void check_same(const std::vector<std::int64_t>& ids, const std::vector<float>& sc, const std::vector<std::int64_t>& want,
                const std::vector<float>& want_sc, std::int64_t m, int k, const std::string& what) {
    std::int64_t differing = 0;
    for (std::int64_t i = 0; i < m; ++i)
        for (int j = 0; j < k; ++j) {
            const auto at = static_cast<std::size_t>(i * k + j);
            INFO(what, ": query ", i, " rank ", j, " id ", ids[at], " vs ", want[at], " score ", sc[at], " vs ", want_sc[at]);
            if (want[at] < 0) {
                CHECK(ids[at] == -1);
                continue;
            }
            REQUIRE(close(sc[at], want_sc[at]));
            if (ids[at] != want[at]) {
                ++differing;
                // the id we return must be one FAISS scores (almost) the same: a tie
                bool tie = false;
                for (int u = 0; u < k; ++u)
                    tie |= want[static_cast<std::size_t>(i * k + u)] == ids[at] && close(want_sc[static_cast<std::size_t>(i * k + u)], sc[at]);
                tie |= j == k - 1 || close(sc[at], want_sc[static_cast<std::size_t>(i * k + k - 1)]);
                CHECK(tie);
            }
        }
    MESSAGE(what << ": " << differing << " of " << m * k << " slots differ by a tie");
    CHECK(differing * 100 <= m * k);   // ties are rare on random float data
}

struct Case {
    std::string factory;
    int nprobe = 0, ef = 0;
    std::string method;         // expected start of search_method()
    std::int64_t n_train = 0;   // 0 = all vectors (Debian's FAISS trains PQ codebooks slowly: keep it small)
};

}  // namespace

TEST_CASE("ann search: our searchers return FAISS's own neighbours") {
    // OpenBLAS single-threaded for FAISS's small sgemms (training, FAISS's own search; our searchers already call it
    // so in their threads): its workers' spin-waits between them took two thirds of this test's time on 2 cores
    // (session 66: 13.8 s alone, 4.7 s with one thread; beside a busy process 40.3 s, 15.9 s)
    BlasSingleThread one_blas_thread;
    const int d = 64;
    const std::int64_t n = 12000, m = 300;
    const auto x = clustered(n, d, 60, 1), q = clustered(m, d, 60, 2);
    const std::vector<Case> cases{{"IVF64,Flat", 5, 0, "ivf-flat (flat", 0},
                                  {"IVF64,Flat", 64, 0, "ivf-flat (flat", 0},
                                  {"IVF48,PQ16", 6, 0, "ivf-pq (flat", 3000},
                                  {"IVF32,PQ8np", 4, 0, "ivf-pq (flat", 3000},
                                  {"OPQ8_64,IVF40,PQ8", 6, 0, "ivf-pq (flat quantizer) after a pre-transform", 2000},
                                  {"IVF64_HNSW16,Flat", 8, 24, "ivf-flat (hnsw", 0},
                                  {"Flat", 0, 0, "flat", 0}};
    for (const auto& c : cases) {
        FaissIndex index(c.factory, d);
        if (index.needs_training()) index.train(c.n_train ? c.n_train : n, x.data());
        index.add(n, x.data());
        if (c.nprobe) index.set_nprobe(c.nprobe);
        if (c.ef) index.set_ef_search(c.ef);
        for (int k : {1, 10, 37}) {
            std::vector<std::int64_t> want(static_cast<std::size_t>(m * k)), ids(want.size());
            std::vector<float> want_sc(want.size()), sc(want.size());
            index.use_faiss_search(true);
            index.search(m, q.data(), k, want.data(), want_sc.data());
            index.use_faiss_search(false);
            INFO(c.factory, " k=", k, " method ", index.search_method());
            REQUIRE(index.search_method().rfind(c.method, 0) == 0);
            for (int threads : {1, 2}) {
                test::ThreadCountScope tg(threads);
                index.search(m, q.data(), k, ids.data(), sc.data());
                check_same(ids, sc, want, want_sc, m, k, c.factory + " k=" + std::to_string(k) + " threads=" + std::to_string(threads));
                std::string why;   // the portable kernel too
                AnnOptions so;
                so.kernel = ExactKernel::SGEMM;
                auto sgemm = ann_searcher_for(*index.raw(), why, so);
                REQUIRE(sgemm);
                sgemm->search(m, q.data(), k, AnnFilter{}, ids.data(), sc.data());
                check_same(ids, sc, want, want_sc, m, k, c.factory + " sgemm");
            }
        }
    }
}

TEST_CASE("ann search: an index type FAISS searches itself is named as its source names it") {
    const int d = 16;
    const auto x = clustered(600, d, 6, 1);
    for (const auto& [factory, why_want] : std::vector<std::pair<std::string, std::string>>{
             {"SQ8", "index type IndexScalarQuantizer is searched by FAISS"},
             {"IVF4,SQ8", "IVF variant IndexIVFScalarQuantizer is searched by FAISS"}}) {
        FaissIndex index(factory, d);
        index.train(600, x.data());
        index.add(600, x.data());
        std::string why;
        CHECK_FALSE(ann_searcher_for(*index.raw(), why));
        CHECK(why == why_want);
    }
}

TEST_CASE("ann search: IVF with the document filter equals brute force over the probed lists") {
    const int d = 32, k = 6;
    const std::int64_t n = 5000, m = 120;
    const auto x = clustered(n, d, 30, 3);
    std::vector<std::int64_t> docs(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) docs[static_cast<std::size_t>(i)] = i / 7;   // documents of 7 chunks
    std::vector<float> q(x.begin(), x.begin() + m * d);   // the first m chunks query themselves
    // IVF20 nprobe 4: buckets (~24 queries) shorter than the lists (~250 rows): queries packed;
    // IVF100 nprobe 50: buckets (~60) longer than the lists (~50): list rows packed (base tiles)
    for (const auto& [factory, nprobe] : std::vector<std::pair<std::string, int>>{
             {"IVF20,Flat", 4}, {"IVF20,PQ8", 4}, {"IVF100,Flat", 50}, {"IVF100,PQ8", 50}}) {
        FaissIndex index(factory, d);
        index.train(3000, x.data());
        index.add(n, x.data());
        index.set_nprobe(nprobe);
        const auto* ivf = faiss::ivflib::extract_index_ivf(index.raw());
        std::vector<faiss::Index::idx_t> lists(static_cast<std::size_t>(m * nprobe));
        std::vector<float> cd(lists.size());
        ivf->quantizer->search(m, q.data(), nprobe, cd.data(), lists.data());
        std::vector<float> rec(static_cast<std::size_t>(d));
        std::vector<std::int64_t> ids(static_cast<std::size_t>(m * k));
        std::vector<float> sc(ids.size());
        index.search(m, q.data(), k, ids.data(), sc.data(), AnnFilter{docs.data(), docs.data()});
        for (std::int64_t i = 0; i < m; ++i) {
            std::vector<std::pair<double, std::int64_t>> all;   // (-score, id) over the probed lists
            for (int p = 0; p < nprobe; ++p) {
                const auto l = static_cast<std::size_t>(lists[static_cast<std::size_t>(i * nprobe + p)]);
                for (std::size_t r = 0; r < ivf->invlists->list_size(l); ++r) {
                    const std::int64_t id = ivf->invlists->get_single_id(l, r);
                    if (docs[static_cast<std::size_t>(id)] == docs[static_cast<std::size_t>(i)]) continue;
                    ivf->reconstruct_from_offset(static_cast<faiss::Index::idx_t>(l), r, rec.data());   // IVF-PQ: decoded
                    double s = 0;
                    for (int t = 0; t < d; ++t) s += double(q[static_cast<std::size_t>(i * d + t)]) * rec[static_cast<std::size_t>(t)];
                    all.push_back({-s, id});
                }
            }
            std::sort(all.begin(), all.end());
            for (int j = 0; j < k; ++j) {
                const auto at = static_cast<std::size_t>(i * k + j);
                INFO(factory, " query ", i, " rank ", j);
                REQUIRE(ids[at] >= 0);
                CHECK(docs[static_cast<std::size_t>(ids[at])] != docs[static_cast<std::size_t>(i)]);
                CHECK(std::fabs(sc[at] + all[static_cast<std::size_t>(j)].first) < 2e-5);
            }
        }
    }
}

TEST_CASE("ann search: HNSW with the document filter drops results, not graph nodes") {
    const int d = 32, k = 5, ef = 64;
    const std::int64_t n = 4000, m = 100;
    const auto x = clustered(n, d, 30, 4);
    std::vector<std::int64_t> docs(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) docs[static_cast<std::size_t>(i)] = i / 5;
    FaissIndex index("HNSW16", d);
    index.add(n, x.data());
    index.set_ef_search(ef);
    AnnOptions exact_walk;
    exact_walk.hnsw_fp16_walk = false;   // the filter's semantics, on FAISS's walk
    index.set_ann_options(exact_walk);
    std::vector<float> q(x.begin(), x.begin() + m * d);
    std::vector<std::int64_t> ids(static_cast<std::size_t>(m * k)), all(static_cast<std::size_t>(m * ef));
    std::vector<float> sc(ids.size()), all_sc(all.size());
    index.search(m, q.data(), k, ids.data(), sc.data(), AnnFilter{docs.data(), docs.data()});
    index.search(m, q.data(), ef, all.data(), all_sc.data());   // same walk (ef = max(efSearch, k) = efSearch)
    for (std::int64_t i = 0; i < m; ++i) {
        std::vector<std::int64_t> want;
        for (int j = 0; j < ef && static_cast<int>(want.size()) < k; ++j) {
            const std::int64_t id = all[static_cast<std::size_t>(i * ef + j)];
            if (id >= 0 && docs[static_cast<std::size_t>(id)] != docs[static_cast<std::size_t>(i)]) want.push_back(id);
        }
        for (int j = 0; j < k; ++j) CHECK(ids[static_cast<std::size_t>(i * k + j)] == (j < static_cast<int>(want.size()) ? want[static_cast<std::size_t>(j)] : -1));
    }
}

TEST_CASE("ann search: HNSW equals pip faiss-cpu's search on its own index (golden)") {
    const auto dir = test::source_dir() / "tests/reference/golden/ann_hnsw";
    FaissIndex index = FaissIndex::load((dir / "index.faiss").string());
    AnnOptions exact_walk;
    exact_walk.hnsw_fp16_walk = false;   // FAISS's walk in fp32, step for step
    index.set_ann_options(exact_walk);
    REQUIRE(index.search_method() == "hnsw");
    NpyArray queries((dir / "queries.npy").string());
    const std::int64_t m = queries.dim(0);
    for (int ef : {16, 48})
        for (int k : {1, 10}) {
            const std::string tag = "_ef" + std::to_string(ef) + "_k" + std::to_string(k) + ".npy";
            NpyArray want_ids((dir / ("ids" + tag)).string()), want_sc((dir / ("scores" + tag)).string());
            std::vector<std::int64_t> want(want_ids.data<std::int64_t>(), want_ids.data<std::int64_t>() + m * k);
            std::vector<float> want_scores(want_sc.data<float>(), want_sc.data<float>() + m * k);
            index.set_ef_search(ef);
            for (int threads : {1, 2}) {
                test::ThreadCountScope tg(threads);
                std::vector<std::int64_t> ids(static_cast<std::size_t>(m * k));
                std::vector<float> sc(ids.size());
                index.search(m, queries.data<float>(), k, ids.data(), sc.data());
                check_same(ids, sc, want, want_scores, m, k, "hnsw golden" + tag);
            }
        }
}

TEST_CASE("ann search: the default fp16 HNSW walk returns exact scores and the fp32 walk's neighbours but for a few") {
    const int d = 48, k = 10;
    const std::int64_t n = 6000, m = 200;
    const auto x = clustered(n, d, 40, 8), q = clustered(m, d, 40, 9);
    FaissIndex index("HNSW16", d);
    index.add(n, x.data());
    index.set_ef_search(32);
    std::vector<std::int64_t> ids16(static_cast<std::size_t>(m * k)), ids32(ids16.size());
    std::vector<float> sc16(ids16.size()), sc32(ids16.size());
    index.search(m, q.data(), k, ids16.data(), sc16.data());   // default: fp16 walk, fp32 rescoring
    AnnOptions exact_walk;
    exact_walk.hnsw_fp16_walk = false;
    index.set_ann_options(exact_walk);
    index.search(m, q.data(), k, ids32.data(), sc32.data());
    std::int64_t same = 0;
    for (std::int64_t i = 0; i < m; ++i)
        for (int j = 0; j < k; ++j) {
            const auto at = static_cast<std::size_t>(i * k + j);
            REQUIRE(ids16[at] >= 0);
            double s = 0;   // every score is the fp32 inner product of the returned row
            for (int t = 0; t < d; ++t)
                s += double(q[static_cast<std::size_t>(i * d + t)]) * x[static_cast<std::size_t>(ids16[at] * d + t)];
            CHECK(std::fabs(sc16[at] - s) < 1e-5);
            if (j > 0) CHECK(sc16[at] <= sc16[at - 1]);
            for (int u = 0; u < k; ++u) same += ids32[static_cast<std::size_t>(i * k + u)] == ids16[at];
        }
    MESSAGE("fp16 walk: " << same << " of " << m * k << " neighbours as the fp32 walk's");
    CHECK(same >= m * k * 97 / 100);
}

TEST_CASE("index: PQ codes are trained without polysemous training - a flat PQ, IVF-PQ, either behind OPQ") {
    // FAISS's factory turns polysemous training on for these (a simulated-annealing reordering of the PQ
    // centroids, ~10x the training time: the k-means warning test in test_stderr_capture.cpp spent 45 s in it) though it only
    // serves polysemous filtering, which no search here turns on; RetroKit's FaissIndex turns it off
    const auto polysemous = [](const faiss::Index* index) {
        if (auto* ivfpq = dynamic_cast<const faiss::IndexIVFPQ*>(faiss::ivflib::try_extract_index_ivf(index)))
            return ivfpq->do_polysemous_training;
        while (auto* pre = dynamic_cast<const faiss::IndexPreTransform*>(index)) index = pre->index;
        auto* pq = dynamic_cast<const faiss::IndexPQ*>(index);
        REQUIRE(pq);
        return pq->do_polysemous_training;
    };
    for (const std::string factory : {"PQ4", "OPQ4,PQ4", "IVF8,PQ4", "OPQ4_16,IVF8,PQ4"}) {
        CAPTURE(factory);
        const std::unique_ptr<faiss::Index> faiss_own(
            faiss::index_factory(16, factory.c_str(), faiss::METRIC_INNER_PRODUCT));
        CHECK(polysemous(faiss_own.get()));   // (the factory's default, which the next line must undo)
        FaissIndex ours(factory, 16);
        CHECK_FALSE(polysemous(ours.raw()));
    }
}

TEST_CASE("ann search: IVF-Flat probing every list equals exact search on tie-heavy data - equal scores by lower id - both scan kernels") {
    // index/exact_scan.h: an IVF list's rows carry their own ids in no particular order, "so an equal score competes
    // on its id". Probing every list, the search is exact: on vectors of -1, 0, 1 (most scores tie, and a tie at the
    // k-th score often comes from a later list with a lower id, behind rows that only equal the threshold) every
    // kernel must give exact_search_ip's ids and scores, ties by lower id. IVF8 with 60 queries: buckets shorter
    // than the lists (queries packed); IVF64 with 400: buckets longer than the lists (list rows packed, base tiles)
    BlasSingleThread one_blas_thread;
    const int d = 8, k = 10;
    const std::int64_t n = 3000;
    std::mt19937 rng(19);
    std::vector<float> x(static_cast<std::size_t>(n * d));
    for (auto& v : x) v = static_cast<float>(static_cast<int>(rng() % 3) - 1);
    for (const auto& [factory, nlist, m] : {std::tuple<std::string, int, std::int64_t>{"IVF8,Flat", 8, 60},
                                            std::tuple<std::string, int, std::int64_t>{"IVF64,Flat", 64, 400}}) {
        std::vector<float> q(static_cast<std::size_t>(m * d));
        for (auto& v : q) v = static_cast<float>(static_cast<int>(rng() % 3) - 1);
        FaissIndex index(factory, d);
        index.train(n, x.data());
        index.add(n, x.data());
        index.set_nprobe(nlist);
        std::vector<std::int64_t> want(static_cast<std::size_t>(m * k)), ids(want.size());
        std::vector<float> want_sc(want.size()), sc(want.size());
        ExactSearchOptions eo;
        eo.k = k;
        exact_search_ip(q.data(), m, x.data(), n, d, eo, want.data(), want_sc.data());
        std::vector<ExactKernel> kernels = {ExactKernel::SGEMM};
        if (exact_kernel_resolve(ExactKernel::AUTO) == ExactKernel::AVX512) kernels.push_back(ExactKernel::AVX512);
        for (const ExactKernel kernel : kernels) {
            std::string why;
            AnnOptions so;
            so.kernel = kernel;
            auto searcher = ann_searcher_for(*index.raw(), why, so);
            REQUIRE(searcher);
            searcher->search(m, q.data(), k, AnnFilter{}, ids.data(), sc.data());
            INFO(factory << " kernel " << std::string(exact_kernel_name(kernel)));
            std::int64_t differ = 0;
            for (std::size_t i = 0; i < ids.size(); ++i) differ += ids[i] != want[i] || sc[i] != want_sc[i];
            CHECK(differ == 0);
        }
    }
}
