// pooled_attention (pooled_attention.h).
#include "embed/pooled_attention.h"

#include <vector>

#include "core/blas_threads.h"
#include "core/threads.h"
#include "nn/attention.h"

namespace retro {

void pooled_attention(const float* qkv, int H, int heads, float scale, const std::int64_t* query_row,
                      const std::int64_t* key_first, const std::int64_t* key_count, std::int64_t n, float* ctx) {
    const int d = H / heads;
    BlasSingleThread one_blas_thread;   // each thread's GEMV may be an sgemm (RETRO_GEMV=blas, no AVX-512)
    const std::int64_t ld = 3 * static_cast<std::int64_t>(H);
    parallel_ranges(n * heads, [&](std::int64_t t0, std::int64_t t1, int) {
        std::vector<float> q(static_cast<std::size_t>(d)), p;
        for (std::int64_t t = t0; t < t1; ++t) {
            const std::int64_t i = t / heads, h = t % heads;
            // nn/attention.h takes q already scaled (RETRO-pytorch's convention)
            const float* row = qkv + query_row[i] * ld + h * d;
            for (int j = 0; j < d; ++j) q[j] = row[j] * scale;
            p.resize(static_cast<std::size_t>(key_count[i]));
            const float* k = qkv + key_first[i] * ld + H + h * d;
            nn::attention_head_forward<float>(ctx + i * H + h * d, H, p.data(), q.data(), d, k, k + H, ld, 1,
                                              key_count[i], d, nullptr, nullptr, nullptr, false);
        }
    });
}

}  // namespace retro
