// index/exact_search: both CPU kernels (fused AVX-512 where the CPU has it, sgemm + threshold pass)
// at 1 and 2 threads (queries split, base split) against the brute-force oracle, ids and scores
// exactly, ties broken by id; block edges (tails of 12 base rows and 32 queries, several query
// blocks), k above the candidates, the same-document filter; and the CUDA twin against the CPU.
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/cuda_device.h"
#include "core/error.h"
#include "core/threads.h"
#include "index/exact_search.h"
#include "index/exact_search_cuda.h"
#include "test_knn_oracle.h"
#include "test_util.h"

using namespace retro;
using test::knn_integer_vectors;
using test::knn_oracle;

namespace {

std::vector<ExactKernel> cpu_kernels() {
    std::vector<ExactKernel> ks{ExactKernel::SGEMM};
    if (exact_kernel_resolve(ExactKernel::AUTO) == ExactKernel::AVX512) ks.push_back(ExactKernel::AVX512);
    return ks;
}

// Every kernel at 1 and 2 threads, with `o`'s blocks, equals the oracle exactly.
void check_all_kernels(const std::vector<float>& q, const std::vector<float>& x, int d, ExactSearchOptions o,
                       const std::vector<std::int64_t>* docs) {
    const std::int64_t m = static_cast<std::int64_t>(q.size()) / d, n = static_cast<std::int64_t>(x.size()) / d;
    std::vector<std::int64_t> want_ids, ids(static_cast<std::size_t>(m * o.k));
    std::vector<float> want_scores, scores(ids.size());
    knn_oracle(q, x, d, o.k, docs, 0, want_ids, want_scores);
    if (docs) o.query_docs = o.base_docs = docs->data();
    for (ExactKernel kernel : cpu_kernels())
        for (int threads : {1, 2}) {
            test::ThreadCountScope g(threads);
            o.kernel = kernel;
            INFO("kernel " << exact_kernel_name(kernel) << ", threads " << threads << ", m " << m << ", n " << n << ", d " << d);
            exact_search_ip(q.data(), m, x.data(), n, d, o, ids.data(), scores.data());
            CHECK(ids == want_ids);
            CHECK(scores == want_scores);
        }
}

}  // namespace

TEST_CASE("knn: exact search equals the brute-force oracle - ties broken by id") {
    const int d = 16, k = 7;
    auto x = knn_integer_vectors(1000, d, 1), q = knn_integer_vectors(37, d, 2);
    ExactSearchOptions o;
    o.k = k;
    check_all_kernels(q, x, d, o, nullptr);
    o.base_block = 64;   // sgemm: many blocks and a partial last one
    o.query_block = 5;   // both kernels: several query blocks (avx512 rounds up to 32)
    check_all_kernels(q, x, d, o, nullptr);
}

TEST_CASE("knn: exact search at block edges - row and query tails - d specialisations - heavy ties") {
    ExactSearchOptions o;
    for (int d : {1, 7, 64, 256}) {
        for (std::int64_t n : {1, 11, 12, 13, 25, 100}) {
            for (std::int64_t m : {1, 31, 33, 70, 150}) {   // 150: queries split at 2 threads, fewer: base split
                o.k = 5;
                o.query_block = 32;   // avx512: a tail tile and several blocks when m > 32
                o.base_block = 10;
                auto x = knn_integer_vectors(n, d, static_cast<unsigned>(n * 7 + d), 1);
                auto q = knn_integer_vectors(m, d, static_cast<unsigned>(m * 3 + d), 1);
                check_all_kernels(q, x, d, o, nullptr);
            }
        }
    }
}

TEST_CASE("knn: exact search with k above the candidates pads every row with -1") {
    const int d = 8;
    auto x = knn_integer_vectors(6, d, 5), q = knn_integer_vectors(40, d, 6);
    ExactSearchOptions o;
    o.k = 9;
    check_all_kernels(q, x, d, o, nullptr);
}

TEST_CASE("knn: exact search with the document filter never returns the query's document and pads with -1") {
    const int d = 8, k = 5;
    const std::int64_t n = 300;
    auto x = knn_integer_vectors(n, d, 3);
    std::vector<std::int64_t> docs(n);
    for (std::int64_t i = 0; i < n; ++i) docs[i] = i < 296 ? 0 : 1 + (i - 296) / 2;   // doc 0 is huge
    ExactSearchOptions o;
    o.k = k;
    o.base_block = 50;
    o.query_block = 7;
    check_all_kernels(x, x, d, o, &docs);
    std::vector<std::int64_t> ids(n * k);
    std::vector<float> scores(n * k);
    o.query_docs = o.base_docs = docs.data();
    exact_search_ip(x.data(), n, x.data(), n, d, o, ids.data(), scores.data());
    for (std::int64_t i = 0; i < n; ++i)
        for (int r = 0; r < k; ++r) {
            std::int64_t id = ids[i * k + r];
            if (id >= 0) CHECK(docs[id] != docs[i]);
        }
    // doc 0's chunks see only the 4 chunks of docs 1-2: the 5th neighbour is -1
    CHECK(ids[0 * k + 4] == -1);
    CHECK(ids[0 * k + 3] >= 296);
}

TEST_CASE("knn: exact search kernels agree on float data to the last bits") {
    const int d = 256, k = 10;
    const std::int64_t n = 3000, m = 100;
    std::mt19937 rng(9);
    std::normal_distribution<float> g(0.0f, 1.0f);
    std::vector<float> x(n * d), q(m * d);
    for (auto& v : x) v = g(rng);
    for (auto& v : q) v = g(rng);
    auto kernels = cpu_kernels();
    if (kernels.size() < 2) RETRO_SKIP("no AVX-512F on this CPU: one kernel only");
    std::vector<std::int64_t> ids_a(m * k), ids_b(m * k);
    std::vector<float> sc_a(m * k), sc_b(m * k);
    ExactSearchOptions o;
    o.k = k;
    o.kernel = ExactKernel::SGEMM;
    exact_search_ip(q.data(), m, x.data(), n, d, o, ids_a.data(), sc_a.data());
    o.kernel = ExactKernel::AVX512;
    exact_search_ip(q.data(), m, x.data(), n, d, o, ids_b.data(), sc_b.data());
    for (std::int64_t i = 0; i < m * k; ++i) {
        CHECK(sc_b[i] == doctest::Approx(sc_a[i]).epsilon(1e-5));
        bool tied = (i % k > 0 && std::fabs(sc_a[i] - sc_a[i - 1]) < 1e-3f) || (i % k < k - 1 && std::fabs(sc_a[i] - sc_a[i + 1]) < 1e-3f);
        if (!tied) CHECK(ids_a[i] == ids_b[i]);
    }
}

TEST_CASE("knn: CUDA exact search equals the CPU exact search on random data") {
    if (cuda_device_count() == 0) RETRO_SKIP("no CUDA device");
    if constexpr (kCudaBuilt) {   // compiled away in a CPU-only build (core/cuda_device.h)
        const CudaStreamOwner stream;
        const CudaStream st = stream.get();
        // integer data: every score exact on both devices, so ids and scores must be equal
        for (int k : {1, 10, 128}) {
            const int d = 32;
            const std::int64_t n = 7001, m = 300;
            auto x = knn_integer_vectors(n, d, 21), q = knn_integer_vectors(m, d, 22);
            std::vector<std::int64_t> docs(n);
            for (std::int64_t i = 0; i < n; ++i) docs[i] = i / 17;
            for (bool filter : {false, true}) {
                INFO("k " << k << ", filter " << filter);
                ExactSearchOptions o;
                o.k = k;
                if (filter) o.query_docs = o.base_docs = docs.data();   // queries i take docs[i]
                std::vector<std::int64_t> want(m * k), got(m * k);
                std::vector<float> want_sc(m * k), got_sc(m * k);
                exact_search_ip(q.data(), m, x.data(), n, d, o, want.data(), want_sc.data());
                for (std::int64_t block : {0, 1000}) {   // one score block; 8 base x 3 query blocks with tails
                    o.base_block = block;
                    o.query_block = block ? 128 : 0;
                    exact_search_ip_cuda(q.data(), m, x.data(), n, d, o, got.data(), got_sc.data(), st);
                    CHECK(got == want);
                    CHECK(got_sc == want_sc);
                }
            }
        }
        // float data: scores within rounding, ids equal where not near-tied; fewer candidates than k pads
        const int d = 96, k = 16;
        const std::int64_t n = 5000, m = 4500;   // two query blocks on the GPU
        std::mt19937 rng(23);
        std::normal_distribution<float> g(0.0f, 1.0f);
        std::vector<float> x(n * d), q(m * d);
        for (auto& v : x) v = g(rng);
        for (auto& v : q) v = g(rng);
        ExactSearchOptions o;
        o.k = k;
        std::vector<std::int64_t> want(m * k), got(m * k);
        std::vector<float> want_sc(m * k), got_sc(m * k);
        exact_search_ip(q.data(), m, x.data(), n, d, o, want.data(), want_sc.data());
        exact_search_ip_cuda(q.data(), m, x.data(), n, d, o, got.data(), got_sc.data(), st);
        for (std::int64_t i = 0; i < m * k; ++i) {
            CHECK(got_sc[i] == doctest::Approx(want_sc[i]).epsilon(1e-4));
            bool tied = (i % k > 0 && std::fabs(want_sc[i] - want_sc[i - 1]) < 1e-3f) ||
                        (i % k < k - 1 && std::fabs(want_sc[i] - want_sc[i + 1]) < 1e-3f);
            if (!tied) CHECK(got[i] == want[i]);
        }
        std::vector<std::int64_t> few(2 * 8);
        std::vector<float> few_sc(2 * 8);
        o.k = 8;
        exact_search_ip_cuda(q.data(), 2, x.data(), 5, d, o, few.data(), few_sc.data(), st);
        // the legacy default stream is refused, under the entry point's name
        try {
            exact_search_ip_cuda(q.data(), 2, x.data(), 5, d, o, few.data(), few_sc.data(), nullptr);
            FAIL("no error");
        } catch (const InternalError& e) {
            CHECK(std::string(e.what()).find("CudaExactSearch::upload: needs a stream of its own") != std::string::npos);
        }
        CHECK(few[5] == -1);
        CHECK(few[15] == -1);
        CHECK(std::isinf(few_sc[7]));
    }
}

TEST_CASE("knn: asking for CUDA exact search says 'built without CUDA' (CPU-only build) or 'no CUDA device found'") {
    if (cuda_device_count() > 0) RETRO_SKIP("a CUDA device is present");
    if constexpr (kCudaBuilt) {   // the entry point refuses by itself too (before it looks at the stream)
        std::vector<float> x(8, 1.0f);
        CHECK_THROWS_AS(CudaExactSearch::upload(x.data(), 1, 8, nullptr, nullptr), UserError);
        CHECK_THROWS_AS(CudaStreamOwner(), UserError);   // and so does a stream
    }
    try {   // the one refusal every GPU path goes through first (retro-knn --device cuda: test_knn.cpp)
        cuda_require("--device cuda", "retro-knn", "search on the CPU (--device cpu)");
        FAIL("no error");
    } catch (const UserError& e) {
        CHECK(std::string(e.what()) == (kCudaBuilt ? "--device cuda: no CUDA device found (fix: search on the CPU (--device cpu))"
                                                   : "--device cuda: retro-knn was built without CUDA (fix: search on the CPU (--device cpu))"));
    }
}
