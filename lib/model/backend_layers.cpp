#include "model/backend_layers.h"

#include <cmath>

#include "model/layer_shapes.h"

namespace retro::backend {

using std::int64_t;

namespace {
float query_scale(int64_t dim_head) { return static_cast<float>(1.0 / std::sqrt(static_cast<double>(dim_head))); }
}  // namespace

std::int64_t attention_saved_floats(const nn::NnBackend* be, const nn::AttentionLayerShape& s, bool key_mask) {
    const nn::AttentionShape core = s.core();
    return be ? be->attention_saved_floats(core, key_mask) : core.B * core.H * core.Nq * core.keys();
}

AttnSaved carve_attention(Carver& c, const nn::AttentionLayerShape& s, const nn::NnBackend* be, bool key_mask) {
    const int64_t HD = s.inner();
    const int64_t o16_at = be ? be->attention_output_bf16_offset(s.core(), key_mask) : -1;
    AttnSaved a;
    a.q = c.take<float>(s.B * s.Nq * HD);
    a.k = c.take<float>(s.B * s.Nk * HD);
    a.v = c.take<float>(s.B * s.Nk * HD);
    if (o16_at < 0) a.o = c.take<float>(s.B * s.Nq * HD);
    a.probs = c.take<float>(attention_saved_floats(be, s, key_mask));
    if (o16_at >= 0 && a.probs) a.o16 = reinterpret_cast<std::uint16_t*>(a.probs + o16_at);
    return a;
}

EncoderActs carve_encoder(Carver& c, const RetroConfig& cfg, int64_t M, int64_t r, const nn::NnBackend* be) {
    const int64_t R = M * r, Ce = cfg.enc_dim;
    EncoderActs a;
    a.self = encoder_self_shape(cfg, M, r);
    a.cross = encoder_cross_shape(cfg, M, r);
    a.tmp = c.take<float>(R * Ce);
    a.layers.assign(static_cast<std::size_t>(cfg.enc_depth), {});
    for (int64_t j = 0; j < cfg.enc_depth; j++) {
        auto& L = a.layers[static_cast<std::size_t>(j)];
        L.h0 = c.take<float>(R * Ce);
        L.n0 = c.take<float>(activation_floats(R * Ce, be));
        L.r0 = c.take<float>(R);
        L.attn = carve_attention(c, a.self, be, true);   // (the neighbours' pad mask)
        L.h1 = c.take<float>(R * Ce);
        if (cfg.enc_has_cross(j + 1)) {
            L.n1 = c.take<float>(activation_floats(R * Ce, be));
            L.r1 = c.take<float>(R);
            L.cross = carve_attention(c, a.cross, be, false);
            L.h2 = c.take<float>(R * Ce);
        } else {
            L.h2 = L.h1;
        }
        L.n2 = c.take<float>(activation_floats(R * Ce, be));
        L.r2 = c.take<float>(R);
        L.ff = carve_feed_forward(c, R * ff_inner(Ce), be);
    }
    a.pre = c.take<float>(R * Ce);
    a.norm = c.take<float>(activation_floats(R * Ce, be));
    a.rms = c.take<float>(R);
    return a;
}

// nn/attention_layer.cpp's attention_layer_forward, op for op: q = rotary((x Wq^T) * dim_head^-1/2),
// k = rotary(c Wk^T), v = c Wv^T, o = attention(q, k, v), y = o Wo^T + bo.
void attn_forward(nn::NnBackend& be, float* y, const AttnSaved& a, const float* x, const float* ctx,
                  const std::uint8_t* key_mask, const nn::RotaryView* q_rot, const nn::RotaryView* k_rot,
                  const nn::AttentionParams<float>& p, const nn::AttentionLayerShape& s, bool x_bf16) {
    const int64_t HD = s.inner(), Mq = s.B * s.Nq, Mk = s.B * s.Nk, kv_dim = s.self ? s.dim : s.context_dim;
    const auto* x16 = reinterpret_cast<const std::uint16_t*>(x);
    // the projections that read one input as one op (linear_forward_shared: on the GPU x rounded once, one batched
    // GEMM): q, k, v of x for self-attention, k, v of the context for cross-attention
    nn::NnBackend::SharedLinears kv;
    if (s.self) {
        kv.count = 3;
        kv.W[0] = p.to_q, kv.W[1] = p.to_k, kv.W[2] = p.to_v;
        kv.y[0] = a.q, kv.y[1] = a.k, kv.y[2] = a.v;
        if (x_bf16) be.linear_forward_shared_bf16x(kv, x16, Mq, s.dim, HD);
        else be.linear_forward_shared(kv, x, Mq, s.dim, HD);
    } else {
        if (x_bf16) be.linear_forward_bf16x(a.q, x16, p.to_q, nullptr, Mq, s.dim, HD);
        else be.linear_forward(a.q, x, p.to_q, nullptr, Mq, s.dim, HD);
        kv.count = 2;
        kv.W[0] = p.to_k, kv.W[1] = p.to_v;
        kv.y[0] = a.k, kv.y[1] = a.v;
        be.linear_forward_shared(kv, ctx, Mk, kv_dim, HD);
    }
    if (q_rot)   // the scale and the rotation in one pass over q (the same floats as the two passes)
        be.rotary_scale_forward(a.q, a.q, *q_rot, s.B, s.Nq, s.heads, s.dim_head, query_scale(s.dim_head), s.heads);
    else
        be.scale(a.q, query_scale(s.dim_head), Mq * HD);
    if (k_rot) be.rotary_forward(a.k, a.k, *k_rot, s.B, s.Nk, s.heads, s.dim_head);
    be.attention_forward(a.o, a.probs, a.q, a.k, a.v, p.null_k, p.null_v, key_mask, s.core());   // (a.o null: a.o16)
    if (a.o16) be.linear_forward_bf16x(y, a.o16, p.to_out_w, p.to_out_b, Mq, HD, s.dim);
    else be.linear_forward(y, a.o, p.to_out_w, p.to_out_b, Mq, HD, s.dim);
}

// attention_layer_backward, op for op: dx (=) gets the q path (plus k/v for self-attention), dcontext (=) the
// k/v path for cross-attention (null: parameter gradients only); parameter gradients +=.
void attn_backward(nn::NnBackend& be, float* dx, float* dcontext, const nn::AttentionParams<float>& g, const float* dy,
                   const AttnSaved& a, const float* x, const float* ctx, const std::uint8_t* key_mask,
                   const nn::RotaryView* q_rot, const nn::RotaryView* k_rot, const nn::AttentionParams<float>& p,
                   const nn::AttentionLayerShape& s, const GradScratch& t, bool x_bf16) {
    const int64_t HD = s.inner(), Mq = s.B * s.Nq, Mk = s.B * s.Nk, kv_dim = s.self ? s.dim : s.context_dim;
    const auto* x16 = reinterpret_cast<const std::uint16_t*>(x);
    const float* kv_in = s.self ? x : ctx;
    if (a.o16) be.linear_backward_bf16x(t.dO, g.to_out_w, g.to_out_b, dy, a.o16, p.to_out_w, Mq, HD, s.dim);
    else be.linear_backward(t.dO, g.to_out_w, g.to_out_b, dy, a.o, p.to_out_w, Mq, HD, s.dim);
    be.attention_backward(t.dq, t.dk, t.dv, g.null_k, g.null_v, t.dO, a.probs, a.q, a.k, a.v, p.null_k, p.null_v,
                          key_mask, s.core());
    if (q_rot)   // the rotation's backward and the scale's in one pass over dq (the same floats as the two passes)
        be.rotary_backward_scale(t.dq, t.dq, *q_rot, s.B, s.Nq, s.heads, s.dim_head, query_scale(s.dim_head));
    else
        be.scale(t.dq, query_scale(s.dim_head), Mq * HD);
    if (k_rot) be.rotary_backward(t.dk, t.dk, *k_rot, s.B, s.Nk, s.heads, s.dim_head);
    // the projections of one input as one op (linear_backward_shared): dx = (dx_q + dx_k) + dx_v, the CPU's order, for
    // self-attention; the q path into dx and dcontext = dx_k + dx_v (null: the weights' gradients only) for
    // cross-attention
    nn::NnBackend::SharedLinears kv;
    if (s.self) {
        kv.count = 3;
        kv.W[0] = p.to_q, kv.W[1] = p.to_k, kv.W[2] = p.to_v;
        kv.dy[0] = t.dq, kv.dy[1] = t.dk, kv.dy[2] = t.dv;
        kv.dW[0] = g.to_q, kv.dW[1] = g.to_k, kv.dW[2] = g.to_v;
        if (x_bf16) be.linear_backward_shared_bf16x(dx, t.tmp_k, kv, x16, Mq, s.dim, HD);
        else be.linear_backward_shared(dx, t.tmp_k, kv, x, Mq, s.dim, HD);
        return;
    }
    if (x_bf16) be.linear_backward_bf16x(dx, g.to_q, nullptr, t.dq, x16, p.to_q, Mq, s.dim, HD);
    else be.linear_backward(dx, g.to_q, nullptr, t.dq, x, p.to_q, Mq, s.dim, HD);
    kv.count = 2;
    kv.W[0] = p.to_k, kv.W[1] = p.to_v;
    kv.dy[0] = t.dk, kv.dy[1] = t.dv;
    kv.dW[0] = g.to_k, kv.dW[1] = g.to_v;
    be.linear_backward_shared(dcontext, t.tmp_v, kv, kv_in, Mk, kv_dim, HD);
}

bool keeps_bf16_activations(const nn::NnBackend& be) {
    return be.gemm_inputs() == nn::NnBackend::GemmInputs::bf16 && be.bf16_activations();
}

// Whether the feed-forward keeps its gelu output g and its input x only as bf16 (NnBackend::set_bf16_activations, in
// the bf16 GEMM mode, where a backward will follow: h kept): in their fp32 storage (half of it where
// carve_feed_forward and activation_floats sized it for the mode), read by the GEMMs (forward and dW) as they are; the
// fp32 values are then never written (the same floats: the GEMMs rounded them).
namespace {
bool ff_bf16(const nn::NnBackend& be, const FfSaved& f) { return keeps_bf16_activations(be) && f.h; }
int64_t floats_for(int64_t elements, const nn::NnBackend* be) {   // bf16 where be keeps it so: two a float
    return be && keeps_bf16_activations(*be) ? (elements + 1) / 2 : elements;
}
}  // namespace

FfSaved carve_feed_forward(Carver& c, int64_t elements, const nn::NnBackend* be) {
    FfSaved f;
    f.h = c.take<float>(elements);
    f.g = c.take<float>(floats_for(elements, be));
    return f;
}

int64_t activation_floats(int64_t elements, const nn::NnBackend* be) { return floats_for(elements, be); }

void linear_input_forward(nn::NnBackend& be, float* x, float* n, float* norm, const float* a, const float* b,
                          const float* gamma, int64_t N, int64_t C) {
    auto* n16 = reinterpret_cast<std::uint16_t*>(n);
    const bool bf16 = keeps_bf16_activations(be);
    if (a && bf16) be.residual_rmsnorm_forward_bf16(x, n16, norm, a, b, gamma, N, C);
    else if (a) be.residual_rmsnorm_forward(x, n, norm, a, b, gamma, N, C);
    else if (bf16) be.rmsnorm_forward_bf16(n16, norm, x, gamma, N, C);
    else be.rmsnorm_forward(n, norm, x, gamma, N, C);
}

void ff_input_forward(nn::NnBackend& be, const FfSaved& f, float* x, float* n, float* norm, const float* a,
                      const float* b, const float* gamma, int64_t N, int64_t C) {
    if (ff_bf16(be, f))
        be.residual_rmsnorm_forward_bf16(x, reinterpret_cast<std::uint16_t*>(n), norm, a, b, gamma, N, C);
    else
        be.residual_rmsnorm_forward(x, n, norm, a, b, gamma, N, C);
}

// nn/feed_forward.cpp: y = gelu(x W1^T + b1) W2^T + b2.
void ff_forward(nn::NnBackend& be, float* y, const FfSaved& f, const float* x, const nn::FeedForwardParams<float>& p,
                int64_t N, int64_t dim) {
    const int64_t inner = ff_inner(dim);
    if (ff_bf16(be, f)) {   // x: ff_input_forward's bf16 bits
        auto* g16 = reinterpret_cast<std::uint16_t*>(f.g);
        be.linear_gelu_forward_bf16x(g16, f.h, reinterpret_cast<const std::uint16_t*>(x), p.w1, p.b1, N, dim, inner);
        be.linear_forward_bf16x(y, g16, p.w2, p.b2, N, inner, dim);
        return;
    }
    be.linear_gelu_forward(f.g, f.h, x, p.w1, p.b1, N, dim, inner);
    be.linear_forward(y, f.g, p.w2, p.b2, N, inner, dim);
}

void ff_backward(nn::NnBackend& be, float* dx, const nn::FeedForwardParams<float>& g, const float* dy, const FfSaved& f,
                 const float* x, const nn::FeedForwardParams<float>& p, int64_t N, int64_t dim, const GradScratch& t) {
    const int64_t inner = ff_inner(dim);
    if (ff_bf16(be, f)) {   // (the mode must be the forward's: the model re-plans when it changes)
        be.linear_backward_bf16x(t.dgel, g.w2, g.b2, dy, reinterpret_cast<const std::uint16_t*>(f.g), p.w2, N, inner,
                                 dim);
        be.gelu_linear_backward_bf16x(dx, g.w1, g.b1, t.dgel, f.h, reinterpret_cast<const std::uint16_t*>(x), p.w1, N,
                                      dim, inner);
        return;
    }
    be.linear_backward(t.dgel, g.w2, g.b2, dy, f.g, p.w2, N, inner, dim);
    be.gelu_linear_backward(dx, g.w1, g.b1, t.dgel, f.h, x, p.w1, N, dim, inner);   // gelu's backward, then the layer's
}


void encoder_forward(nn::NnBackend& be, float* E, const EncoderActs& a, const std::int32_t* ids,
                     const std::uint8_t* mask, const float* ctx, int64_t M, int64_t r, const RetroParams<float>& p,
                     const RetroConfig& c, const nn::RotaryView& rot_r, const nn::RotaryView& rot_ctx) {
    const int64_t Ce = c.enc_dim, Cd = c.dec_dim, R = M * r;
    // pre-norm blocks: each residual sum and the norm that reads it as one fused op (residual_rmsnorm_forward); the
    // norms' outputs as bf16 where the mode keeps bf16 activations (linear_input_forward, ff_input_forward)
    const bool bf16 = keeps_bf16_activations(be);
    be.embedding_forward(a.layers[0].h0, ids, p.token_emb, R, c.num_tokens, Ce);
    linear_input_forward(be, a.layers[0].h0, a.layers[0].n0, a.layers[0].r0, nullptr, nullptr, p.encoder[0].g_attn, R,
                         Ce);
    for (std::size_t i = 0; i < a.layers.size(); i++) {
        const auto& L = p.encoder[i];
        const auto& A = a.layers[i];
        attn_forward(be, a.tmp, A.attn, A.n0, nullptr, mask, &rot_r, &rot_r, L.attn, a.self, bf16);
        if (L.has_cross) {
            linear_input_forward(be, A.h1, A.n1, A.r1, A.h0, a.tmp, L.g_cross, R, Ce);
            attn_forward(be, a.tmp, A.cross, A.n1, ctx, nullptr, &rot_r, &rot_ctx, L.cross, a.cross, bf16);
            ff_input_forward(be, A.ff, A.h2, A.n2, A.r2, A.h1, a.tmp, L.g_ff, R, Ce);
        } else {   // h2 is h1
            ff_input_forward(be, A.ff, A.h1, A.n2, A.r2, A.h0, a.tmp, L.g_ff, R, Ce);
        }
        ff_forward(be, a.tmp, A.ff, A.n2, L.ff, R, Ce);
        if (i + 1 < a.layers.size()) {
            const auto& next = a.layers[i + 1];
            linear_input_forward(be, next.h0, next.n0, next.r0, A.h2, a.tmp, p.encoder[i + 1].g_attn, R, Ce);
        } else {
            linear_input_forward(be, a.pre, a.norm, a.rms, A.h2, a.tmp, p.enc_norm_out, R, Ce);
        }
    }
    if (bf16)
        be.linear_forward_bf16x(E, reinterpret_cast<const std::uint16_t*>(a.norm), p.enc_project_w, p.enc_project_b, R,
                                Ce, Cd);
    else
        be.linear_forward(E, a.norm, p.enc_project_w, p.enc_project_b, R, Ce, Cd);
}

}  // namespace retro::backend
