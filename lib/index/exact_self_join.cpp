// Implementation of exact_self_join.h.
#include "index/exact_self_join.h"

#include <algorithm>

#include "core/error.h"
#include "core/threads.h"
#include "index/exact_scan.h"
#include "index/topk.h"

namespace retro {

bool self_join_available() { return scan_avx512_available(); }

void exact_self_join_ip(const float* base, std::int64_t n, int d, const SelfJoinOptions& opts,
                        const std::vector<std::int64_t>& pending,
                        const std::function<void(std::int64_t, const std::int64_t*, const float*)>& done) {
    RETRO_CHECK(self_join_available(), "the self-join needs AVX-512F");
    RETRO_CHECK(opts.k > 0 && opts.block > 0 && d > 0, "k=", opts.k, " block=", opts.block, " d=", d);
    RETRO_CHECK(std::is_sorted(pending.begin(), pending.end()), "pending blocks must increase");
    const std::int64_t B = opts.block, blocks = (n + B - 1) / B;
    std::vector<char> is_pending(static_cast<std::size_t>(blocks), 0);
    for (std::int64_t b : pending) {
        RETRO_CHECK(b >= 0 && b < blocks, "block ", b, " of ", blocks);
        is_pending[static_cast<std::size_t>(b)] = 1;
    }
    // the rows' own lists, filled by earlier blocks' scans (ids below the row's block, increasing)
    std::vector<TopK> row_tops(static_cast<std::size_t>(n), TopK(opts.k));
    const int threads = thread_count();
    std::vector<std::vector<TopK>> part(static_cast<std::size_t>(threads));
    std::vector<std::int64_t> ids;
    std::vector<float> scores;
    for (std::int64_t a : pending) {
        const std::int64_t a0 = a * B, a1 = std::min(n, a0 + B), qn = a1 - a0;
        // the base rows block a is scanned against: every block but the pending ones before it (they
        // offered their scores already); symmetric for pending blocks after it
        struct Span {
            std::int64_t b0, b1;
            bool symmetric;
        };
        std::vector<Span> spans;
        std::int64_t rows = 0;
        for (std::int64_t c = 0; c < blocks; ++c) {
            if (c < a && is_pending[static_cast<std::size_t>(c)]) continue;
            const std::int64_t c0 = c * B, c1 = std::min(n, c0 + B);
            const bool sym = c > a && is_pending[static_cast<std::size_t>(c)];
            if (!spans.empty() && spans.back().b1 == c0 && spans.back().symmetric == sym)
                spans.back().b1 = c1;
            else
                spans.push_back({c0, c1, sym});
            rows += c1 - c0;
        }
        // each thread an equal share of those rows, in increasing order
        parallel_for(threads, [&](std::int64_t t) {
            auto& tops = part[static_cast<std::size_t>(t)];
            tops.assign(static_cast<std::size_t>(qn), TopK(opts.k));
            const std::int64_t lo = rows * t / threads, hi = rows * (t + 1) / threads;
            std::int64_t seen = 0;
            for (const Span& s : spans) {
                const std::int64_t len = s.b1 - s.b0;
                const std::int64_t from = std::max(lo, seen), to = std::min(hi, seen + len);
                if (from < to) {
                    ScanJob job;
                    job.queries = base + a0 * d;
                    job.qn = qn;
                    job.query_docs = opts.docs ? opts.docs + a0 : nullptr;
                    job.base = base;
                    job.b0 = s.b0 + (from - seen);
                    job.b1 = s.b0 + (to - seen);
                    job.base_docs = opts.docs;
                    job.d = d;
                    job.tops = tops.data();
                    if (s.symmetric) {
                        job.row_tops = row_tops.data();
                        job.query_id0 = a0;
                    }
                    scan_avx512(job, 0);
                }
                seen += len;
            }
        });
        // block a's lists: the threads' lists and what earlier blocks offered its rows
        ids.assign(static_cast<std::size_t>(qn * opts.k), -1);
        scores.assign(ids.size(), 0.0f);
        parallel_ranges(qn, [&](std::int64_t i0, std::int64_t i1, int) {
            TopK all(opts.k);
            for (std::int64_t i = i0; i < i1; ++i) {
                for (const auto& tops : part)
                    for (const auto& it : tops[static_cast<std::size_t>(i)].heap) all.merge(it);
                TopK& own = row_tops[static_cast<std::size_t>(a0 + i)];
                for (const auto& it : own.heap) all.merge(it);
                own = TopK(0);   // free it
                all.write(ids.data() + i * opts.k, scores.data() + i * opts.k);
            }
        });
        done(a, ids.data(), scores.data());
    }
}

}  // namespace retro
