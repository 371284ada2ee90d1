// index/exact_self_join: every pair scored once must give exactly exact_search_ip(base, base) —
// ids and score bits — with the same-document filter, on float data and on integer data full of
// tied scores (the tie rule by id), block sizes that do not divide the rows, 1 and 2 threads, and
// a resumed run (only some blocks pending: the others are scanned as plain rows). Skips visibly
// without AVX-512F.
#include <algorithm>
#include <map>
#include <random>
#include <vector>

#include "core/threads.h"
#include "index/exact_search.h"
#include "index/exact_self_join.h"
#include "test_knn_oracle.h"
#include "test_util.h"

using namespace retro;

namespace {

std::vector<float> gaussian(std::int64_t n, int d, unsigned seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> g(0.0f, 1.0f);
    std::vector<float> v(static_cast<std::size_t>(n * d));
    for (auto& x : v) x = g(rng);
    return v;
}

void check_self_join(const std::vector<float>& x, int d, int k, std::int64_t block, const std::vector<std::int64_t>* docs,
                     const std::vector<std::int64_t>& pending) {
    const std::int64_t n = static_cast<std::int64_t>(x.size()) / d;
    std::vector<std::int64_t> want(static_cast<std::size_t>(n * k));
    std::vector<float> want_sc(want.size());
    ExactSearchOptions eo;
    eo.k = k;
    eo.kernel = ExactKernel::AVX512;
    if (docs) eo.query_docs = eo.base_docs = docs->data();
    exact_search_ip(x.data(), n, x.data(), n, d, eo, want.data(), want_sc.data());
    SelfJoinOptions so;
    so.k = k;
    so.block = block;
    so.docs = docs ? docs->data() : nullptr;
    std::vector<std::int64_t> order;
    exact_self_join_ip(x.data(), n, d, so, pending, [&](std::int64_t b, const std::int64_t* ids, const float* sc) {
        order.push_back(b);
        const std::int64_t b0 = b * block, rows = std::min(n, b0 + block) - b0;
        for (std::int64_t i = 0; i < rows * k; ++i) {
            INFO("block ", b, " slot ", i, " d ", d, " k ", k, " block size ", block);
            REQUIRE(ids[i] == want[static_cast<std::size_t>(b0 * k + i)]);
            REQUIRE(sc[i] == want_sc[static_cast<std::size_t>(b0 * k + i)]);   // the same bits
        }
    });
    CHECK(order == pending);
}

}  // namespace

TEST_CASE("exact self-join equals exact search of the base against itself, bit for bit") {
    if (!self_join_available()) RETRO_SKIP("skipped: the self-join needs AVX-512F");
    for (int threads : {1, 2}) {
        test::ThreadCountScope tg(threads);
        for (int d : {16, 33, 256}) {
            const std::int64_t n = 1000;
            const auto x = gaussian(n, d, static_cast<unsigned>(d));
            std::vector<std::int64_t> docs(static_cast<std::size_t>(n));
            for (std::int64_t i = 0; i < n; ++i) docs[static_cast<std::size_t>(i)] = (i * 7919) % 97 == 0 ? i : i / 9;
            for (std::int64_t block : {64, 300, 1000, 4096}) {
                const std::int64_t blocks = (n + block - 1) / block;
                std::vector<std::int64_t> all(static_cast<std::size_t>(blocks));
                for (std::int64_t b = 0; b < blocks; ++b) all[static_cast<std::size_t>(b)] = b;
                check_self_join(x, d, 5, block, &docs, all);
                check_self_join(x, d, 1, block, nullptr, all);
                if (blocks > 2) {   // a resumed run: every other block finished already
                    std::vector<std::int64_t> some;
                    for (std::int64_t b = 1; b < blocks; b += 2) some.push_back(b);
                    check_self_join(x, d, 5, block, &docs, some);
                }
            }
        }
        // integer vectors: many equal scores, so the tie rule (smaller id first) decides
        const auto xi = test::knn_integer_vectors(700, 24, 5, 1);
        std::vector<std::int64_t> docs(700);
        for (int i = 0; i < 700; ++i) docs[static_cast<std::size_t>(i)] = i / 4;
        check_self_join(xi, 24, 7, 128, &docs, {0, 1, 2, 3, 4, 5});
        check_self_join(xi, 24, 40, 100, nullptr, {0, 2, 3, 6});   // k beyond many rows' distinct scores
    }
}
