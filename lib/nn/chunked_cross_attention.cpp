#include "nn/chunked_cross_attention.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "nn/linear.h"
#include "nn/parallel.h"

namespace retro::nn {

std::vector<std::int64_t> cca_query_positions(std::int64_t chunk, bool aligned) {
    std::vector<std::int64_t> pos(static_cast<std::size_t>(chunk), 0);
    if (aligned) {   // group position i = decoder token u*cs + cs-1 + i
        for (std::int64_t i = 0; i < chunk; i++) pos[static_cast<std::size_t>(i)] = chunk - 1 + i;
        return pos;
    }
    // RP builds positions cs-1 .. 2cs-2 and then pads that table by -(cs-1) / +(cs-1) with zeros.
    pos[0] = 2 * chunk - 2;
    return pos;
}

std::vector<std::int64_t> cca_key_positions(std::int64_t neighbours, std::int64_t retrieved) {
    std::vector<std::int64_t> pos;
    for (std::int64_t j = 0; j < neighbours; j++)
        for (std::int64_t t = 0; t < retrieved; t++) pos.push_back(t);
    return pos;
}

namespace {
template <typename T>
RotaryTable<T> cca_key_rotary(const CcaShape& s) {
    return rotary_table<T>(cca_key_positions(s.neighbours, s.retrieved), s.rot_dim);
}

}  // namespace

AttentionLayerShape cca_attention_shape(const CcaShape& s) {
    AttentionLayerShape a;
    a.B = s.B * s.chunks;
    a.Nq = s.chunk;
    a.Nk = s.neighbours * s.retrieved;
    a.dim = s.dim;
    a.context_dim = s.dim;
    a.heads = s.heads;
    a.dim_head = s.dim_head;
    a.causal = false;
    a.null_kv = true;
    a.self = false;
    return a;
}

template <typename T>
void cca_forward(T* y, CcaCache<T>& c, const T* x, const T* E, const std::uint8_t* key_mask,
                 const AttentionParams<T>& p, const CcaShape& s) {
    const std::int64_t cs = s.chunk, n = s.n, C = s.dim, l = s.chunks;
    RETRO_CHECK(l == n / cs, "CCA: ", l, " retrieved chunks for a sequence of ", n, " tokens (chunk ", cs, ")");
    std::fill(y, y + s.B * n * C, T(0));
    if (n < cs || l == 0) return;
    c.q_rot = rotary_table<T>(cca_query_positions(cs, s.aligned_queries), s.rot_dim);
    c.k_rot = cca_key_rotary<T>(s);
    c.xs.assign(static_cast<std::size_t>(s.B * l * cs * C), T(0));
    c.ys.resize(c.xs.size());
    ranges(s.B * l * cs, s.B * l * cs * C, [&](std::int64_t r0, std::int64_t r1, int) {
        for (std::int64_t r = r0; r < r1; r++) {
            const std::int64_t b = r / (l * cs), q = r % (l * cs), pos = q + cs - 1;
            if (pos < n) std::memcpy(c.xs.data() + r * C, x + (b * n + pos) * C, sizeof(T) * C);
        }
    });
    attention_layer_forward(c.ys.data(), c.attn, c.xs.data(), E, key_mask, &c.q_rot, &c.k_rot, p,
                            cca_attention_shape(s));
    ranges(s.B * l * cs, s.B * l * cs * C, [&](std::int64_t r0, std::int64_t r1, int) {
        for (std::int64_t r = r0; r < r1; r++) {
            const std::int64_t b = r / (l * cs), q = r % (l * cs), pos = q + cs - 1;
            if (pos < n) std::memcpy(y + (b * n + pos) * C, c.ys.data() + r * C, sizeof(T) * C);
        }
    });
}

template <typename T>
void cca_backward(T* dx, T* dE, const AttentionParams<T>& g, const T* dy, CcaCache<T>& c,
                  const AttentionParams<T>& p, const CcaShape& s) {
    const std::int64_t cs = s.chunk, n = s.n, C = s.dim, l = s.chunks;
    std::fill(dx, dx + s.B * n * C, T(0));
    if (n < cs || l == 0) {
        if (dE) std::fill(dE, dE + s.B * l * s.neighbours * s.retrieved * C, T(0));
        return;
    }
    std::vector<T> dys(c.ys.size(), T(0)), dxs(c.xs.size());
    ranges(s.B * l * cs, s.B * l * cs * C, [&](std::int64_t r0, std::int64_t r1, int) {
        for (std::int64_t r = r0; r < r1; r++) {
            const std::int64_t b = r / (l * cs), q = r % (l * cs), pos = q + cs - 1;
            if (pos < n) std::memcpy(dys.data() + r * C, dy + (b * n + pos) * C, sizeof(T) * C);
        }
    });
    attention_layer_backward(dxs.data(), dE, g, dys.data(), c.attn, p, cca_attention_shape(s));
    ranges(s.B * l * cs, s.B * l * cs * C, [&](std::int64_t r0, std::int64_t r1, int) {
        for (std::int64_t r = r0; r < r1; r++) {
            const std::int64_t b = r / (l * cs), q = r % (l * cs), pos = q + cs - 1;
            if (pos < n) std::memcpy(dx + (b * n + pos) * C, dxs.data() + r * C, sizeof(T) * C);
        }
    });
}

template <typename T>
void cca_context_forward(T* k, T* v, const T* E, std::int64_t chunks, const AttentionParams<T>& p, const CcaShape& s) {
    const RotaryTable<T> k_rot = cca_key_rotary<T>(s);
    attention_keys_values_forward(k, v, E, p.to_k, p.to_v, &k_rot, chunks, s.neighbours * s.retrieved, s.dim, s.heads,
                                  s.dim_head);
}

template <typename T>
void cca_rows_forward(T* y, const T* x, std::int64_t rows, const std::int64_t* seq, const std::int64_t* pos,
                      const std::vector<CcaKvCache<T>>& caches, const AttentionParams<T>& p, const CcaShape& s) {
    const std::int64_t cs = s.chunk, C = s.dim, HD = s.heads * s.dim_head, KR = s.neighbours * s.retrieved;
    std::fill(y, y + rows * C, T(0));
    // rows that read a chunk (pos >= cs - 1); consecutive rows of one (sequence, chunk) form one segment
    const auto qtable = cca_query_positions(cs, s.aligned_queries);
    std::vector<std::int64_t> sel, qpos;
    std::vector<AttentionSegment<T>> segments;
    std::int64_t last_seq = -1, last_u = -1;
    for (std::int64_t i = 0; i < rows; i++) {
        if (pos[i] < cs - 1) continue;
        const std::int64_t u = (pos[i] + 1) / cs - 1, t = pos[i] - (u * cs + cs - 1);
        if (seq[i] != last_seq || u != last_u) {
            const auto& cache = caches[static_cast<std::size_t>(seq[i])];
            RETRO_CHECK(u < cache.chunks(KR), "CCA: sequence ", seq[i], " reads chunk ", u, " with ",
                        cache.chunks(KR), " chunks encoded");
            AttentionSegment<T> g;
            g.first = static_cast<std::int64_t>(sel.size());
            g.keys = KR;
            g.k = cache.k.data() + u * KR * HD;
            g.v = cache.v.data() + u * KR * HD;
            g.key_mask = cache.mask.data() + u * KR;
            segments.push_back(g);
            last_seq = seq[i];
            last_u = u;
        }
        segments.back().rows++;
        sel.push_back(i);
        qpos.push_back(qtable[static_cast<std::size_t>(t)]);
    }
    const std::int64_t Rs = static_cast<std::int64_t>(sel.size());
    if (Rs == 0) return;
    std::vector<T> xs(static_cast<std::size_t>(Rs * C)), q(static_cast<std::size_t>(Rs * HD)), o(q.size()),
        ys(xs.size());
    for (std::int64_t i = 0; i < Rs; i++) std::copy_n(x + sel[i] * C, C, xs.begin() + i * C);
    const RotaryTable<T> q_rot = rotary_table<T>(qpos, s.rot_dim);
    attention_queries_forward(q.data(), xs.data(), p.to_q, &q_rot, 1, Rs, C, s.heads, s.dim_head);
    attention_segments_forward(o.data(), q.data(), segments, s.heads, s.dim_head, false, (const T*)p.null_k,
                               (const T*)p.null_v);
    linear_forward(ys.data(), o.data(), p.to_out_w, p.to_out_b, Rs, HD, C);
    for (std::int64_t i = 0; i < Rs; i++) std::copy_n(ys.begin() + i * C, C, y + sel[i] * C);
}

#define RETRO_INSTANTIATE(T)                                                                                     \
    template void cca_forward<T>(T*, CcaCache<T>&, const T*, const T*, const std::uint8_t*,                     \
                                 const AttentionParams<T>&, const CcaShape&);                                   \
    template void cca_backward<T>(T*, T*, const AttentionParams<T>&, const T*, CcaCache<T>&,                    \
                                  const AttentionParams<T>&, const CcaShape&);                                  \
    template void cca_context_forward<T>(T*, T*, const T*, std::int64_t, const AttentionParams<T>&,             \
                                         const CcaShape&);                                                      \
    template void cca_rows_forward<T>(T*, const T*, std::int64_t, const std::int64_t*, const std::int64_t*,    \
                                      const std::vector<CcaKvCache<T>>&, const AttentionParams<T>&,              \
                                      const CcaShape&);
RETRO_INSTANTIATE(float)
RETRO_INSTANTIATE(double)
#undef RETRO_INSTANTIATE

}  // namespace retro::nn
