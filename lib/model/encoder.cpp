#include "model/encoder.h"

#include <algorithm>

#include "model/layer_shapes.h"
#include "nn/embedding.h"
#include "nn/linear.h"
#include "nn/residual.h"
#include "nn/rmsnorm.h"

namespace retro {

template <typename T>
void encoder_context(T* ctx, const T* chunk_rows, std::int64_t k, std::int64_t cs, std::int64_t dec_dim) {
    for (std::int64_t j = 0; j < k; j++) std::copy_n(chunk_rows, cs * dec_dim, ctx + j * cs * dec_dim);
}

template <typename T>
void encoder_forward(T* E, EncoderCache<T>& cache, const std::int32_t* ids, const std::uint8_t* mask, const T* ctx,
                     std::int64_t M, std::int64_t r, const RetroParams<T>& p, const RetroConfig& c) {
    const std::int64_t Ce = c.enc_dim, Cd = c.dec_dim, R = M * r, sz = R * Ce;
    if (cache.rot.rows != r || cache.rot.rot_dim != c.rot_dim()) cache.rot = nn::rotary_table_range<T>(r, c.rot_dim());
    if (cache.rot_ctx.rows != c.chunk_size || cache.rot_ctx.rot_dim != c.rot_dim())
        cache.rot_ctx = nn::rotary_table_range<T>(c.chunk_size, c.rot_dim());
    cache.ids = ids;
    cache.M = M;
    cache.r = r;
    cache.layers.resize(p.encoder.size());
    const auto self = encoder_self_shape(c, M, r), cross = encoder_cross_shape(c, M, r);
    std::vector<T> h(static_cast<std::size_t>(sz)), tmp(static_cast<std::size_t>(sz));
    nn::embedding_forward(h.data(), ids, p.token_emb, R, c.num_tokens, Ce);
    for (std::size_t i = 0; i < p.encoder.size(); i++) {
        const auto& L = p.encoder[i];
        auto& A = cache.layers[i];
        A.h0 = h;
        A.n0.resize(h.size());
        A.r0.resize(static_cast<std::size_t>(R));
        nn::rmsnorm_forward(A.n0.data(), A.r0.data(), A.h0.data(), L.g_attn, R, Ce);
        nn::attention_layer_forward(tmp.data(), A.attn, A.n0.data(), (const T*)nullptr, mask, &cache.rot, &cache.rot,
                                    L.attn, self);
        A.h1.resize(h.size());
        nn::residual_sum(A.h1.data(), A.h0.data(), tmp.data(), sz);
        if (L.has_cross) {
            A.n1.resize(h.size());
            A.r1.resize(static_cast<std::size_t>(R));
            nn::rmsnorm_forward(A.n1.data(), A.r1.data(), A.h1.data(), L.g_cross, R, Ce);
            nn::attention_layer_forward(tmp.data(), A.cross, A.n1.data(), ctx, nullptr, &cache.rot, &cache.rot_ctx,
                                        L.cross, cross);
            A.h2.resize(h.size());
            nn::residual_sum(A.h2.data(), A.h1.data(), tmp.data(), sz);
        } else {
            A.h2 = A.h1;
        }
        A.n2.resize(h.size());
        A.r2.resize(static_cast<std::size_t>(R));
        nn::rmsnorm_forward(A.n2.data(), A.r2.data(), A.h2.data(), L.g_ff, R, Ce);
        nn::feed_forward_forward(tmp.data(), A.ff, A.n2.data(), L.ff, R, Ce, ff_inner(Ce));
        nn::residual_sum(h.data(), A.h2.data(), tmp.data(), sz);
    }
    cache.pre = h;
    cache.norm.resize(h.size());
    cache.rms.resize(static_cast<std::size_t>(R));
    nn::rmsnorm_forward(cache.norm.data(), cache.rms.data(), cache.pre.data(), p.enc_norm_out, R, Ce);
    nn::linear_forward(E, cache.norm.data(), p.enc_project_w, p.enc_project_b, R, Ce, Cd);
}

template <typename T>
void encoder_backward(T* dctx, const RetroParams<T>& g, const T* dE, EncoderCache<T>& cache, const RetroParams<T>& p,
                      const RetroConfig& c) {
    const std::int64_t Ce = c.enc_dim, Cd = c.dec_dim, M = cache.M, r = cache.r, R = M * r, sz = R * Ce,
                       ctx_size = M * c.chunk_size * Cd;
    std::vector<T> dEn(static_cast<std::size_t>(sz)), dh(dEn.size()), dn(dEn.size()), dtmp(dEn.size());
    nn::linear_backward(dEn.data(), g.enc_project_w, g.enc_project_b, dE, cache.norm.data(), p.enc_project_w, R, Ce,
                        Cd);
    nn::rmsnorm_backward(dh.data(), g.enc_norm_out, dEn.data(), cache.pre.data(), p.enc_norm_out, cache.rms.data(), R,
                         Ce);
    const auto self = encoder_self_shape(c, M, r), cross = encoder_cross_shape(c, M, r);
    std::fill(dctx, dctx + ctx_size, T(0));
    std::vector<T> dctx_part(static_cast<std::size_t>(ctx_size));
    for (std::int64_t i = static_cast<std::int64_t>(p.encoder.size()) - 1; i >= 0; i--) {
        const auto& L = p.encoder[static_cast<std::size_t>(i)];
        const auto& G = g.encoder[static_cast<std::size_t>(i)];
        auto& A = cache.layers[static_cast<std::size_t>(i)];
        nn::feed_forward_backward(dn.data(), G.ff, dh.data(), A.ff, L.ff, R, Ce, ff_inner(Ce));
        nn::rmsnorm_backward(dtmp.data(), G.g_ff, dn.data(), A.h2.data(), L.g_ff, A.r2.data(), R, Ce);
        nn::residual_add(dh.data(), dtmp.data(), sz);
        if (L.has_cross) {
            nn::attention_layer_backward(dn.data(), dctx_part.data(), G.cross, dh.data(), A.cross, L.cross, cross);
            nn::residual_add(dctx, dctx_part.data(), ctx_size);
            nn::rmsnorm_backward(dtmp.data(), G.g_cross, dn.data(), A.h1.data(), L.g_cross, A.r1.data(), R, Ce);
            nn::residual_add(dh.data(), dtmp.data(), sz);
        }
        nn::attention_layer_backward(dn.data(), (T*)nullptr, G.attn, dh.data(), A.attn, L.attn, self);
        nn::rmsnorm_backward(dtmp.data(), G.g_attn, dn.data(), A.h0.data(), L.g_attn, A.r0.data(), R, Ce);
        nn::residual_add(dh.data(), dtmp.data(), sz);
    }
    nn::embedding_backward(g.token_emb, dh.data(), cache.ids, R, Ce);
}

#define RETRO_INSTANTIATE(T)                                                                                     \
    template void encoder_context<T>(T*, const T*, std::int64_t, std::int64_t, std::int64_t);                    \
    template void encoder_forward<T>(T*, EncoderCache<T>&, const std::int32_t*, const std::uint8_t*, const T*,   \
                                     std::int64_t, std::int64_t, const RetroParams<T>&, const RetroConfig&);     \
    template void encoder_backward<T>(T*, const RetroParams<T>&, const T*, EncoderCache<T>&,                     \
                                      const RetroParams<T>&, const RetroConfig&);
RETRO_INSTANTIATE(float)
RETRO_INSTANTIATE(double)
#undef RETRO_INSTANTIATE

}  // namespace retro
