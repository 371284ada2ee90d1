// The batched HNSW build (index/hnsw_build.h): the same file at any thread count, a well-formed graph (every list holds
// distinct points of its level, other than its owner; every point reachable from the entry), and recall against a
// brute-force oracle no worse than FAISS's own insertion's on the same data.
#include <faiss/IndexHNSW.h>
#include <faiss/impl/io.h>
#include <faiss/index_io.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <queue>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/threads.h"
#include "index/faiss_index.h"
#include "index/hnsw_build.h"
#include "test_util.h"

using namespace retro;

namespace {

// n unit vectors around `clusters` centres (retrieval-like: near neighbours exist).
std::vector<float> clustered(std::int64_t n, int d, int clusters, unsigned seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> g;
    std::vector<float> centres(static_cast<std::size_t>(clusters) * d), x(static_cast<std::size_t>(n) * d);
    for (auto& c : centres) c = g(rng);
    for (std::int64_t i = 0; i < n; ++i) {
        const int c = static_cast<int>(rng() % static_cast<unsigned>(clusters));
        float norm = 0;
        for (int j = 0; j < d; ++j) {
            float& v = x[static_cast<std::size_t>(i * d + j)];
            v = centres[static_cast<std::size_t>(c * d + j)] + 0.35f * g(rng);
            norm += v * v;
        }
        for (int j = 0; j < d; ++j) x[static_cast<std::size_t>(i * d + j)] /= std::sqrt(norm);
    }
    return x;
}

// The index's file bytes.
std::vector<std::uint8_t> bytes_of(const faiss::Index* index) {
    faiss::VectorIOWriter w;
    faiss::write_index(index, &w);
    return w.data;
}

FaissIndex build(const std::string& factory, const std::vector<float>& x, int d, int threads, std::int64_t block) {
    const int was = thread_count();
    set_thread_count(threads);
    FaissIndex index(factory, d);
    const std::int64_t n = static_cast<std::int64_t>(x.size()) / d;
    if (index.needs_training()) index.train(n, x.data());
    for (std::int64_t b = 0; b < n; b += block) index.add(std::min(block, n - b), x.data() + b * d);
    set_thread_count(was);
    return index;
}

const faiss::IndexHNSW& graph_of(const FaissIndex& index) {
    const auto* h = dynamic_cast<const faiss::IndexHNSW*>(index.raw());
    REQUIRE(h != nullptr);
    return *h;
}

// Recall@10 of FAISS's own HNSW search (efSearch 64) against the exact top 10 by inner product.
double recall_at_10(const FaissIndex& index, const std::vector<float>& x, int d, const std::vector<float>& queries) {
    const auto* h = dynamic_cast<const faiss::IndexHNSW*>(index.raw());
    const_cast<faiss::IndexHNSW*>(h)->hnsw.efSearch = 64;
    const std::int64_t n = static_cast<std::int64_t>(x.size()) / d, m = static_cast<std::int64_t>(queries.size()) / d;
    std::vector<faiss::Index::idx_t> ids(static_cast<std::size_t>(m) * 10);
    std::vector<float> scores(ids.size());
    h->search(m, queries.data(), 10, scores.data(), ids.data());
    std::int64_t hits = 0;
    for (std::int64_t q = 0; q < m; ++q) {
        std::vector<std::pair<float, std::int64_t>> all;
        for (std::int64_t i = 0; i < n; ++i) {
            float dot = 0;
            for (int j = 0; j < d; ++j) dot += queries[static_cast<std::size_t>(q * d + j)] * x[static_cast<std::size_t>(i * d + j)];
            all.emplace_back(-dot, i);
        }
        std::partial_sort(all.begin(), all.begin() + 10, all.end());
        const std::set<std::int64_t> truth = {all[0].second, all[1].second, all[2].second, all[3].second, all[4].second,
                                              all[5].second, all[6].second, all[7].second, all[8].second, all[9].second};
        for (int r = 0; r < 10; ++r) hits += truth.count(ids[static_cast<std::size_t>(q * 10 + r)]);
    }
    return static_cast<double>(hits) / static_cast<double>(m * 10);
}

}  // namespace

TEST_CASE("hnsw build: the same index file at 1, 2 and 3 threads, added at once or in blocks") {
    // FAISS inserts a level's points on all threads at once under locks: its graphs differed from run to run
    const int d = 24;
    const std::vector<float> x = clustered(6000, d, 40, 3);
    // (an IVF's HNSW quantizer too, of more than the 100 centroids FAISS inserts on one thread: its IVF training adds
    // them)
    for (const std::string factory : {"HNSW16", "PCA16,HNSW8", "IVF300_HNSW8,Flat", "PCA16,IVF300_HNSW8,Flat"}) {
        for (const std::int64_t block : {std::int64_t(6000), std::int64_t(2500)}) {
            CAPTURE(factory);
            CAPTURE(block);
            const std::vector<std::uint8_t> one = bytes_of(build(factory, x, d, 1, block).raw());
            CHECK(bytes_of(build(factory, x, d, 2, block).raw()) == one);
            CHECK(bytes_of(build(factory, x, d, 3, block).raw()) == one);
        }
    }
}

TEST_CASE("hnsw build: every list holds distinct points of its level, and every point is reached from the entry") {
    const int d = 16;
    const std::vector<float> x = clustered(5000, d, 30, 5);
    const FaissIndex index = build("HNSW8", x, d, 2, 1700);
    const faiss::HNSW& g = graph_of(index).hnsw;
    const std::int64_t n = index.size();
    REQUIRE(n == 5000);
    REQUIRE(g.entry_point >= 0);
    CHECK(g.levels[static_cast<std::size_t>(g.entry_point)] - 1 == g.max_level);
    std::int64_t bad = 0;
    for (std::int64_t p = 0; p < n; ++p) {
        const int top = g.levels[static_cast<std::size_t>(p)] - 1;
        CHECK(top <= g.max_level);
        for (int l = 0; l <= top; ++l) {
            std::size_t begin, end;
            g.neighbor_range(p, l, &begin, &end);
            std::set<int> seen;
            bool ended = false;
            for (std::size_t i = begin; i < end; ++i) {
                const int v = g.neighbors[i];
                if (v < 0) {
                    ended = true;
                    continue;
                }
                // after the first free slot none is used; a neighbour exists, is another point, reaches this level
                bad += ended || v >= n || v == p || !seen.insert(v).second || g.levels[static_cast<std::size_t>(v)] - 1 < l;
            }
            if (n > 1) bad += seen.empty();   // no point is left without links
        }
    }
    CHECK(bad == 0);
    // level 0 from the entry point: every point (the walk of a search can reach it)
    std::vector<char> reached(static_cast<std::size_t>(n), 0);
    std::vector<int> stack = {g.entry_point};
    reached[static_cast<std::size_t>(g.entry_point)] = 1;
    std::int64_t count = 1;
    while (!stack.empty()) {
        const int p = stack.back();
        stack.pop_back();
        std::size_t begin, end;
        g.neighbor_range(p, 0, &begin, &end);
        for (std::size_t i = begin; i < end && g.neighbors[i] >= 0; ++i)
            if (!reached[static_cast<std::size_t>(g.neighbors[i])]) {
                reached[static_cast<std::size_t>(g.neighbors[i])] = 1;
                ++count;
                stack.push_back(g.neighbors[i]);
            }
    }
    CHECK(count >= n - n / 1000);   // (pruning can leave a point no link in: FAISS's graphs too)
}

TEST_CASE("hnsw build: with batches of one point it is FAISS's own insertion on one thread, byte for byte") {
    // the same steps as FAISS's (descent, efConstruction walk, pruning, links back): only what a point sees differs
    const int d = 16;
    const std::vector<float> x = clustered(3000, d, 20, 5);
    for (const int m : {4, 8, 16}) {
        CAPTURE(m);
        faiss::IndexHNSWFlat theirs(d, m, faiss::METRIC_INNER_PRODUCT), ours(d, m, faiss::METRIC_INNER_PRODUCT);
        const int was = thread_count();
        set_thread_count(1);   // FAISS's insertion is the same only on one thread
        theirs.add(1200, x.data());   // in two adds: the second links into the first's graph
        theirs.add(1800, x.data() + 1200 * d);
        set_thread_count(was);
        hnsw_add_deterministic(ours, 1200, x.data(), 0);
        hnsw_add_deterministic(ours, 1800, x.data() + 1200 * d, 0);
        CHECK(bytes_of(&ours) == bytes_of(&theirs));
    }
}

TEST_CASE("hnsw build: recall within a little of FAISS's own insertion on one thread") {
    // measured (session 56, recall@10 at efSearch 64): 0.738 here against FAISS's 0.7505 on one thread and 0.764 on
    // two; on 30,000 points 0.461 against 0.4775 and 0.482 (FAISS's two-thread builds ranged 0.48-0.49 on other data
    // where one thread gave 0.516): a point does not link to those of its own batch
    const int d = 32;
    const std::vector<float> x = clustered(8000, d, 50, 11), queries = clustered(200, d, 50, 12);
    const double ours = recall_at_10(build("HNSW12", x, d, 2, 65536), x, d, queries);
    ::setenv("RETRO_HNSW_BUILD", "faiss", 1);
    const double faiss_own = recall_at_10(build("HNSW12", x, d, 1, 65536), x, d, queries);
    ::unsetenv("RETRO_HNSW_BUILD");
    MESSAGE("recall@10 at efSearch 64: batched build ", ours, ", FAISS's insertion on one thread ", faiss_own);
    CHECK(ours >= faiss_own - 0.03);
}

TEST_CASE("hnsw build: RETRO_HNSW_BUILD other than batches or faiss is refused naming it") {
    ::setenv("RETRO_HNSW_BUILD", "fast", 1);
    CHECK_THROWS_WITH_AS(FaissIndex("HNSW8", 4), doctest::Contains("RETRO_HNSW_BUILD: is 'fast'; expected batches or faiss"),
                         UserError);
    ::unsetenv("RETRO_HNSW_BUILD");
}

TEST_CASE("hnsw build: how an index's graph was built is named for its manifest") {
    CHECK(hnsw_builder_of(*FaissIndex("HNSW8", 8).raw()) == "batches");
    CHECK(hnsw_builder_of(*FaissIndex("PCA4,HNSW8", 8).raw()) == "batches");
    CHECK(hnsw_builder_of(*FaissIndex("IVF16_HNSW8,Flat", 8).raw()) == "batches");
    CHECK(hnsw_builder_of(*FaissIndex("Flat", 8).raw()).empty());
    CHECK(hnsw_builder_of(*FaissIndex("IVF16,Flat", 8).raw()).empty());
    CHECK(hnsw_builder_of(*FaissIndex("HNSW8_SQ8", 8).raw()) == "faiss");   // compressed storage: FAISS's insertion
    ::setenv("RETRO_HNSW_BUILD", "faiss", 1);
    CHECK(hnsw_builder_of(*FaissIndex("HNSW8", 8).raw()) == "faiss");
    ::unsetenv("RETRO_HNSW_BUILD");
}
