// Implementation of exact_search.h: picks the kernel, splits the work between threads, merges.
#include "index/exact_search.h"

#include <algorithm>
#include <vector>

#include "core/blas_threads.h"
#include "core/error.h"
#include "core/threads.h"
#include "index/exact_scan.h"

namespace retro {
namespace {

void run_scan(ExactKernel kernel, const ScanJob& job, const ExactSearchOptions& o) {
    if (kernel == ExactKernel::AVX512)
        scan_avx512(job, o.query_block);
    else
        scan_sgemm(job, o.query_block > 0 ? o.query_block : 1024, o.base_block > 0 ? o.base_block : 2048);
}

}  // namespace

ExactKernel exact_kernel_resolve(ExactKernel k) {
    if (k == ExactKernel::AUTO) return scan_avx512_available() ? ExactKernel::AVX512 : ExactKernel::SGEMM;
    if (k == ExactKernel::AVX512 && !scan_avx512_available())
        user_error("exact search: the avx512 kernel needs a CPU with AVX-512F (this one has none; use the sgemm kernel)");
    return k;
}

const char* exact_kernel_name(ExactKernel k) {
    return exact_kernel_resolve(k) == ExactKernel::AVX512 ? "avx512" : "sgemm";
}

void exact_search_ip(const float* queries, std::int64_t m, const float* base, std::int64_t n, int d,
                     const ExactSearchOptions& opts, std::int64_t* ids, float* scores) {
    RETRO_CHECK(opts.k > 0 && d > 0 && m >= 0 && n >= 0, "k=", opts.k, " d=", d, " m=", m, " n=", n);
    RETRO_CHECK((opts.query_docs == nullptr) == (opts.base_docs == nullptr), "doc filter needs both arrays");
    const ExactKernel kernel = exact_kernel_resolve(opts.kernel);
    const int threads = thread_count();
    auto job_for = [&](std::int64_t q0, std::int64_t q1, std::int64_t b0, std::int64_t b1, TopK* tops) {
        ScanJob j;
        j.queries = queries + q0 * d;
        j.qn = q1 - q0;
        j.query_docs = opts.query_docs ? opts.query_docs + q0 : nullptr;
        j.base = base;
        j.b0 = b0;
        j.b1 = b1;
        j.base_docs = opts.base_docs;
        j.d = d;
        j.tops = tops;
        return j;
    };
    BlasSingleThread single_blas;   // our threads split the work
    if (threads == 1 || m >= threads * kMinQueriesPerThread || n < 2) {
        // each thread its own queries against the whole base
        parallel_ranges(m, [&](std::int64_t q0, std::int64_t q1, int) {
            std::vector<TopK> tops(static_cast<std::size_t>(q1 - q0), TopK(opts.k));
            run_scan(kernel, job_for(q0, q1, 0, n, tops.data()), opts);
            for (std::int64_t i = q0; i < q1; ++i)
                tops[static_cast<std::size_t>(i - q0)].write(ids + i * opts.k, scores + i * opts.k);
        });
        return;
    }
    // few queries: each thread its own base rows, then merge the per-thread lists
    std::vector<std::vector<TopK>> part(static_cast<std::size_t>(threads));
    parallel_ranges(n, [&](std::int64_t b0, std::int64_t b1, int t) {
        auto& tops = part[static_cast<std::size_t>(t)];
        tops.assign(static_cast<std::size_t>(m), TopK(opts.k));
        run_scan(kernel, job_for(0, m, b0, b1, tops.data()), opts);
    });
    TopK all(opts.k);
    for (std::int64_t i = 0; i < m; ++i) {
        for (const auto& tops : part)
            if (!tops.empty())
                for (const auto& it : tops[static_cast<std::size_t>(i)].heap) all.merge(it);
        all.write(ids + i * opts.k, scores + i * opts.k);
    }
}

}  // namespace retro
