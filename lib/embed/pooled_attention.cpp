// pooled_first_rows, pooled_attention, pooled_rows_apply (pooled_attention.h).
#include "embed/pooled_attention.h"

#include <algorithm>

#include "core/blas_threads.h"
#include "core/threads.h"
#include "nn/attention.h"

namespace retro {

PooledRows pooled_first_rows(const std::int64_t* offsets, int count) {
    PooledRows rows;
    for (int s = 0; s < count; ++s)
        if (offsets[s + 1] > offsets[s]) rows.add(offsets[s] - offsets[0], offsets[s] - offsets[0], offsets[s + 1] - offsets[s]);
    return rows;
}

void pooled_attention(const float* qkv, int H, int heads, float scale, const PooledRows& rows, float* ctx) {
    const int d = H / heads;
    BlasSingleThread one_blas_thread;   // each thread's GEMV may be an sgemm (RETRO_GEMV=blas, neither AVX-512 nor AVX2+FMA)
    const std::int64_t ld = 3 * static_cast<std::int64_t>(H);
    parallel_ranges(rows.size() * heads, [&](std::int64_t t0, std::int64_t t1, int) {
        std::vector<float> q(static_cast<std::size_t>(d)), p;
        for (std::int64_t t = t0; t < t1; ++t) {
            const std::int64_t i = t / heads, h = t % heads;
            // nn/attention.h takes q already scaled (RETRO-pytorch's convention)
            const float* row = qkv + rows.row[i] * ld + h * d;
            for (int j = 0; j < d; ++j) q[j] = row[j] * scale;
            p.resize(static_cast<std::size_t>(rows.key_count[i]));
            const float* k = qkv + rows.key_first[i] * ld + H + h * d;
            nn::attention_head_forward<float>(ctx + i * H + h * d, H, p.data(), q.data(), d, k, k + H, ld, 1,
                                              rows.key_count[i], d, nullptr, nullptr, nullptr, false);
        }
    });
}

void pooled_rows_apply(float* x, int H, const PooledRows& rows, float* xs,
                       const std::function<void(float*, std::int64_t)>& dense) {
    const std::int64_t n = rows.size();
    for (std::int64_t i = 0; i < n; ++i) std::copy_n(x + rows.row[i] * H, H, xs + i * H);
    dense(xs, n);
    for (std::int64_t i = 0; i < n; ++i) std::copy_n(xs + i * H, H, x + rows.row[i] * H);
}

}  // namespace retro
