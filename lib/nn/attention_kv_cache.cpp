#include "nn/attention_kv_cache.h"

#include "core/error.h"
#include "nn/linear.h"

namespace retro::nn {

template <typename T>
void attention_layer_step(T* y, const T* x, const std::vector<std::int64_t>& row_begin, std::vector<KvCache<T>>& caches,
                          const RotaryTable<T>& rot, const AttentionParams<T>& p, const AttentionLayerShape& s) {
    const std::int64_t S = static_cast<std::int64_t>(caches.size()), R = row_begin.back(), HD = s.inner();
    RETRO_CHECK(static_cast<std::int64_t>(row_begin.size()) == S + 1, "attention step: row_begin for ",
                row_begin.size() - 1, " sequences, ", S, " caches");
    if (R == 0) return;
    std::vector<T> q(static_cast<std::size_t>(R * HD)), k(q.size()), v(q.size()), o(q.size());
    attention_queries_forward(q.data(), x, p.to_q, &rot, 1, R, s.dim, s.heads, s.dim_head);
    attention_keys_values_forward(k.data(), v.data(), x, p.to_k, p.to_v, &rot, 1, R, s.dim, s.heads, s.dim_head);
    std::vector<AttentionSegment<T>> segments(static_cast<std::size_t>(S));
    for (std::int64_t i = 0; i < S; i++) {
        auto& cache = caches[static_cast<std::size_t>(i)];
        const std::int64_t b = row_begin[static_cast<std::size_t>(i)], e = row_begin[static_cast<std::size_t>(i + 1)];
        cache.k.insert(cache.k.end(), k.begin() + b * HD, k.begin() + e * HD);
        cache.v.insert(cache.v.end(), v.begin() + b * HD, v.begin() + e * HD);
        auto& g = segments[static_cast<std::size_t>(i)];
        g.first = b;
        g.rows = e - b;
        g.keys = cache.positions(HD);
        g.k = cache.k.data();
        g.v = cache.v.data();
    }
    attention_segments_forward(o.data(), q.data(), segments, s.heads, s.dim_head, true, (const T*)nullptr,
                               (const T*)nullptr);
    linear_forward(y, o.data(), p.to_out_w, p.to_out_b, R, HD, s.dim);
}

template void attention_layer_step<float>(float*, const float*, const std::vector<std::int64_t>&,
                                          std::vector<KvCache<float>>&, const RotaryTable<float>&,
                                          const AttentionParams<float>&, const AttentionLayerShape&);
template void attention_layer_step<double>(double*, const double*, const std::vector<std::int64_t>&,
                                           std::vector<KvCache<double>>&, const RotaryTable<double>&,
                                           const AttentionParams<double>&, const AttentionLayerShape&);

}  // namespace retro::nn
