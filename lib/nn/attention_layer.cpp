#include "nn/attention_layer.h"

#include <cmath>
#include <memory>

#include "core/error.h"
#include "nn/parallel.h"
#include "nn/linear.h"

namespace retro::nn {

template <typename T>
void attention_queries_forward(T* q, const T* x, const T* to_q, const RotaryTable<T>* rot, std::int64_t B,
                               std::int64_t N, std::int64_t dim, std::int64_t heads, std::int64_t dim_head) {
    const std::int64_t M = B * N, HD = heads * dim_head;
    linear_forward(q, x, to_q, (const T*)nullptr, M, dim, HD);
    const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(dim_head)));
    for (std::int64_t i = 0; i < M * HD; i++) q[i] *= scale;
    if (rot) rotary_forward(q, q, *rot, B, N, heads, dim_head);
}

template <typename T>
void attention_keys_values_forward(T* k, T* v, const T* c, const T* to_k, const T* to_v, const RotaryTable<T>* rot,
                                   std::int64_t B, std::int64_t N, std::int64_t dim, std::int64_t heads,
                                   std::int64_t dim_head) {
    const std::int64_t M = B * N, HD = heads * dim_head;
    linear_forward(k, c, to_k, (const T*)nullptr, M, dim, HD);
    if (rot) rotary_forward(k, k, *rot, B, N, heads, dim_head);
    linear_forward(v, c, to_v, (const T*)nullptr, M, dim, HD);
}

template <typename T>
void attention_layer_forward(T* y, AttentionLayerCache<T>& c, const T* x, const T* context,
                             const std::uint8_t* key_mask, const RotaryTable<T>* q_rot, const RotaryTable<T>* k_rot,
                             const AttentionParams<T>& p, const AttentionLayerShape& s) {
    RETRO_CHECK(s.self == (context == nullptr), "attention: context given for self-attention or missing for cross");
    const std::int64_t HD = s.inner(), Mq = s.B * s.Nq, Mk = s.B * s.Nk;
    c.x = x;
    c.context = context;
    c.key_mask = key_mask;
    c.q_rot = q_rot;
    c.k_rot = k_rot;
    c.q.resize(static_cast<std::size_t>(Mq * HD));
    c.k.resize(static_cast<std::size_t>(Mk * HD));
    c.v.resize(c.k.size());
    c.o.resize(c.q.size());
    c.probs.resize(static_cast<std::size_t>(s.B * s.heads * s.Nq * s.core().keys()));
    attention_queries_forward(c.q.data(), x, p.to_q, q_rot, s.B, s.Nq, s.dim, s.heads, s.dim_head);
    attention_keys_values_forward(c.k.data(), c.v.data(), s.self ? x : context, p.to_k, p.to_v, k_rot, s.B, s.Nk,
                                  s.self ? s.dim : s.context_dim, s.heads, s.dim_head);
    attention_forward(c.o.data(), c.probs.data(), c.q.data(), c.k.data(), c.v.data(), (const T*)p.null_k,
                      (const T*)p.null_v, key_mask, s.core());
    linear_forward(y, c.o.data(), p.to_out_w, p.to_out_b, Mq, HD, s.dim);
}

template <typename T>
void attention_layer_backward(T* dx, T* dcontext, const AttentionParams<T>& g, const T* dy,
                              AttentionLayerCache<T>& c, const AttentionParams<T>& p, const AttentionLayerShape& s) {
    const std::int64_t HD = s.inner(), Mq = s.B * s.Nq, Mk = s.B * s.Nk;
    const T* kv_in = s.self ? c.x : c.context;
    const std::int64_t kv_dim = s.self ? s.dim : s.context_dim;
    // scratch without a zero fill: every element is written (gemm with beta = 0) before it is read
    std::unique_ptr<T[]> dO_buf(new T[static_cast<std::size_t>(Mq * HD)]), dq_buf(new T[static_cast<std::size_t>(Mq * HD)]),
        dk_buf(new T[static_cast<std::size_t>(Mk * HD)]), dv_buf(new T[static_cast<std::size_t>(Mk * HD)]);
    T *dO = dO_buf.get(), *dq = dq_buf.get(), *dk = dk_buf.get(), *dv = dv_buf.get();
    linear_backward(dO, g.to_out_w, g.to_out_b, dy, c.o.data(), p.to_out_w, Mq, HD, s.dim);
    attention_backward(dq, dk, dv, g.null_k, g.null_v, dO, c.probs.data(), c.q.data(),
                       c.k.data(), c.v.data(), (const T*)p.null_k, (const T*)p.null_v, c.key_mask, s.core());
    if (c.q_rot) rotary_backward(dq, dq, *c.q_rot, s.B, s.Nq, s.heads, s.dim_head);
    if (c.k_rot) rotary_backward(dk, dk, *c.k_rot, s.B, s.Nk, s.heads, s.dim_head);
    const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(s.dim_head)));
    for (std::int64_t i = 0; i < Mq * HD; i++) dq[i] *= scale;
    linear_backward(dx, g.to_q, (T*)nullptr, dq, c.x, p.to_q, Mq, s.dim, HD);
    if (!s.self && !dcontext) {   // context gradient not wanted: parameter gradients only
        linear_backward((T*)nullptr, g.to_k, (T*)nullptr, dk, kv_in, p.to_k, Mk, kv_dim, HD);
        linear_backward((T*)nullptr, g.to_v, (T*)nullptr, dv, kv_in, p.to_v, Mk, kv_dim, HD);
        return;
    }
    T* dkv = s.self ? nullptr : dcontext;
    std::unique_ptr<T[]> tmp_k, tmp_v(new T[static_cast<std::size_t>(Mk * kv_dim)]);
    if (!dkv) {
        tmp_k.reset(new T[static_cast<std::size_t>(Mk * kv_dim)]);
        dkv = tmp_k.get();
    }
    linear_backward(dkv, g.to_k, (T*)nullptr, dk, kv_in, p.to_k, Mk, kv_dim, HD);
    linear_backward(tmp_v.get(), g.to_v, (T*)nullptr, dv, kv_in, p.to_v, Mk, kv_dim, HD);
    T* target = s.self ? dx : dcontext;
    const std::int64_t n = Mk * kv_dim;
    ranges(n, n, [&](std::int64_t b, std::int64_t e, int) {
        for (std::int64_t i = b; i < e; i++) target[i] = (s.self ? target[i] + dkv[i] : dkv[i]) + tmp_v[i];
    });
}

#define RETRO_INSTANTIATE(T)                                                                                         \
    template void attention_queries_forward<T>(T*, const T*, const T*, const RotaryTable<T>*, std::int64_t,           \
                                               std::int64_t, std::int64_t, std::int64_t, std::int64_t);              \
    template void attention_keys_values_forward<T>(T*, T*, const T*, const T*, const T*, const RotaryTable<T>*,      \
                                                   std::int64_t, std::int64_t, std::int64_t, std::int64_t,          \
                                                   std::int64_t);                                                    \
    template void attention_layer_forward<T>(T*, AttentionLayerCache<T>&, const T*, const T*, const std::uint8_t*,   \
                                             const RotaryTable<T>*, const RotaryTable<T>*, const AttentionParams<T>&, \
                                             const AttentionLayerShape&);                                            \
    template void attention_layer_backward<T>(T*, T*, const AttentionParams<T>&, const T*, AttentionLayerCache<T>&,  \
                                              const AttentionParams<T>&, const AttentionLayerShape&);
RETRO_INSTANTIATE(float)
RETRO_INSTANTIATE(double)
#undef RETRO_INSTANTIATE

}  // namespace retro::nn
