// Implementation of exact_search.h.
#include "index/exact_search.h"

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <vector>

#include "core/error.h"
#include "core/threads.h"

namespace retro {
namespace {

// Keeps the k best (score, id) of one query: a min-heap on (score, -id), so heap[0] is the
// worst kept candidate. Candidates arrive in increasing id order, so an equal score never
// displaces a kept one: ties go to the smaller id, as the oracle wants.
struct TopK {
    struct Item {
        float score;
        std::int64_t id;
    };
    static bool worse(const Item& a, const Item& b) {   // heap comparator: a is better than b
        return a.score > b.score || (a.score == b.score && a.id < b.id);
    }
    std::vector<Item> heap;
    int k;
    explicit TopK(int k_) : k(k_) { heap.reserve(static_cast<std::size_t>(k_)); }
    float threshold() const {
        return static_cast<int>(heap.size()) < k ? -std::numeric_limits<float>::infinity() : heap.front().score;
    }
    void push(float s, std::int64_t id) {
        if (static_cast<int>(heap.size()) < k) {
            heap.push_back({s, id});
            std::push_heap(heap.begin(), heap.end(), worse);
        } else if (s > heap.front().score) {
            std::pop_heap(heap.begin(), heap.end(), worse);
            heap.back() = {s, id};
            std::push_heap(heap.begin(), heap.end(), worse);
        }
    }
    void write(std::int64_t* ids, float* scores) {
        std::sort(heap.begin(), heap.end(), worse);
        for (int i = 0; i < k; ++i) {
            bool have = i < static_cast<int>(heap.size());
            ids[i] = have ? heap[static_cast<std::size_t>(i)].id : -1;
            scores[i] = have ? heap[static_cast<std::size_t>(i)].score : -std::numeric_limits<float>::infinity();
        }
        heap.clear();
    }
};

// Runs fn with OpenBLAS single-threaded (our threads split the work), restoring it afterwards.
template <typename Fn>
void with_single_threaded_blas(Fn&& fn) {
    int before = openblas_get_num_threads();
    openblas_set_num_threads(1);
    try {
        fn();
    } catch (...) {
        openblas_set_num_threads(before);
        throw;
    }
    openblas_set_num_threads(before);
}

}  // namespace

void exact_search_ip(const float* queries, std::int64_t m, const float* base, std::int64_t n, int d,
                     const ExactSearchOptions& opts, std::int64_t* ids, float* scores) {
    RETRO_CHECK(opts.k > 0 && d > 0, "k=", opts.k, " d=", d);
    RETRO_CHECK((opts.query_docs == nullptr) == (opts.base_docs == nullptr), "doc filter needs both arrays");
    const std::int64_t per_thread = (m + thread_count() - 1) / thread_count();
    const std::int64_t bq = std::max<std::int64_t>(1, std::min(opts.query_block, per_thread));
    const std::int64_t bn = std::max<std::int64_t>(1, opts.base_block);
    const std::int64_t query_blocks = (m + bq - 1) / bq;
    with_single_threaded_blas([&] {
        parallel_ranges(query_blocks, [&](std::int64_t qb_begin, std::int64_t qb_end, int) {
            std::vector<float> block(static_cast<std::size_t>(bq * bn));
            std::vector<TopK> top(static_cast<std::size_t>(bq), TopK(opts.k));
            for (std::int64_t qb = qb_begin; qb < qb_end; ++qb) {
                const std::int64_t q0 = qb * bq, qn = std::min(bq, m - q0);
                for (std::int64_t b0 = 0; b0 < n; b0 += bn) {
                    const std::int64_t nb = std::min(bn, n - b0);
                    // block[qn x nb] = Q[q0:q0+qn] * B[b0:b0+nb]^T
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(qn), static_cast<int>(nb), d,
                                1.0f, queries + q0 * d, d, base + b0 * d, d, 0.0f, block.data(), static_cast<int>(nb));
                    for (std::int64_t i = 0; i < qn; ++i) {
                        TopK& t = top[static_cast<std::size_t>(i)];
                        const float* row = block.data() + i * nb;
                        float thr = t.threshold();
                        const std::int64_t qdoc = opts.query_docs ? opts.query_docs[q0 + i] : -1;
                        for (std::int64_t j = 0; j < nb; ++j) {
                            if (!(row[j] > thr)) continue;   // thr is -inf until k are kept
                            if (opts.base_docs && opts.base_docs[b0 + j] == qdoc) continue;
                            t.push(row[j], b0 + j);
                            thr = t.threshold();
                        }
                    }
                }
                for (std::int64_t i = 0; i < qn; ++i)
                    top[static_cast<std::size_t>(i)].write(ids + (q0 + i) * opts.k, scores + (q0 + i) * opts.k);
            }
        });
    });
}

double measure_sgemm_gflops(std::int64_t m, std::int64_t n, int d, int threads, double seconds) {
    std::vector<float> a(static_cast<std::size_t>(m * d * threads), 0.5f), b(static_cast<std::size_t>(n * d), 0.25f);
    std::vector<float> c(static_cast<std::size_t>(m * n * threads));
    int before = thread_count();
    set_thread_count(threads);
    double flops = 0, elapsed = 0;
    with_single_threaded_blas([&] {
        auto start = std::chrono::steady_clock::now();
        int reps = 0;
        do {
            parallel_ranges(threads, [&](std::int64_t tb, std::int64_t te, int) {
                for (std::int64_t t = tb; t < te; ++t)
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(m), static_cast<int>(n), d, 1.0f,
                                a.data() + t * m * d, d, b.data(), d, 0.0f, c.data() + t * m * n, static_cast<int>(n));
            });
            ++reps;
            elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        } while (elapsed < seconds || reps < 2);
        flops = 2.0 * m * n * d * threads * reps;
    });
    set_thread_count(before);
    return flops / elapsed / 1e9;
}

}  // namespace retro
