#include "nn/chunked_cross_attention.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "nn/parallel.h"

namespace retro::nn {

std::vector<std::int64_t> cca_query_positions(std::int64_t chunk) {
    // RP builds positions cs-1 .. 2cs-2 and then pads that table by -(cs-1) / +(cs-1) with zeros.
    std::vector<std::int64_t> pos(static_cast<std::size_t>(chunk), 0);
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
}  // namespace

template <typename T>
void cca_forward(T* y, CcaCache<T>& c, const T* x, const T* E, const std::uint8_t* key_mask,
                 const AttentionParams<T>& p, const CcaShape& s) {
    const std::int64_t cs = s.chunk, n = s.n, C = s.dim, l = s.chunks;
    RETRO_CHECK(l == n / cs, "CCA: ", l, " retrieved chunks for a sequence of ", n, " tokens (chunk ", cs, ")");
    std::fill(y, y + s.B * n * C, T(0));
    if (n < cs || l == 0) return;
    c.q_rot = rotary_table<T>(cca_query_positions(cs), s.rot_dim);
    c.k_rot = rotary_table<T>(cca_key_positions(s.neighbours, s.retrieved), s.rot_dim);
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

#define RETRO_INSTANTIATE(T)                                                                                     \
    template void cca_forward<T>(T*, CcaCache<T>&, const T*, const T*, const std::uint8_t*,                     \
                                 const AttentionParams<T>&, const CcaShape&);                                   \
    template void cca_backward<T>(T*, T*, const AttentionParams<T>&, const T*, CcaCache<T>&,                    \
                                  const AttentionParams<T>&, const CcaShape&);
RETRO_INSTANTIATE(float)
RETRO_INSTANTIATE(double)
#undef RETRO_INSTANTIATE

}  // namespace retro::nn
