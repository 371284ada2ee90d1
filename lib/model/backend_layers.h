// The layers of RETRO composed over an nn::NnBackend, shared by the training model (model/backend_model.h) and the
// KV-cached decoder on a backend (generate/backend_decoder.h): arena carving, nn/attention_layer.cpp's attention
// layer and nn/feed_forward.cpp's block op for op (forward and backward), and the encoder forward of
// model/encoder.h over carved activations.
// provides: backend::Carver, AttnSaved, FfSaved, GradScratch, EncoderActs, attention_saved_floats, carve_attention,
//           carve_encoder, attn_forward, attn_backward, ff_forward, ff_backward, encoder_forward
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "model/config.h"
#include "model/layer_params.h"
#include "nn/attention_layer.h"
#include "nn/chunked_cross_attention.h"
#include "nn/feed_forward.h"
#include "nn/nn_backend.h"

namespace retro::backend {

// Hands out 256-byte aligned pieces of one arena; with a null base it only counts (backend_model_plan).
struct Carver {
    char* base = nullptr;
    std::size_t used = 0;
    template <typename T>
    T* take(std::int64_t count) {
        const std::size_t bytes = static_cast<std::size_t>(std::max<std::int64_t>(count, 0)) * sizeof(T);
        T* p = base ? reinterpret_cast<T*>(base + used) : nullptr;
        used += (bytes + 255) / 256 * 256;
        return p;
    }
};

struct AttnSaved {   // what attention backward reads: projections, output, probabilities
    float *q = nullptr, *k = nullptr, *v = nullptr, *o = nullptr, *probs = nullptr;
    // where the backend's mode keeps the output only as bf16 (NnBackend::attention_output_bf16_offset): its copy
    // inside probs, and o null; else null
    std::uint16_t* o16 = nullptr;
};
struct FfSaved {
    float *h = nullptr, *g = nullptr;   // h may be null where no backward follows (decoding)
};
// Scratch of the attention and feed-forward backward passes (shared by the layers).
struct GradScratch {
    float *dO, *dq, *dk, *dv, *tmp_k, *tmp_v, *dgel;
};

// The encoder's activations for M neighbours of r tokens (R = M r rows), as model/encoder.h keeps them.
struct EncoderActs {
    struct Layer {
        float *h0 = nullptr, *n0 = nullptr, *r0 = nullptr, *h1 = nullptr, *n1 = nullptr, *r1 = nullptr,
              *h2 = nullptr, *n2 = nullptr, *r2 = nullptr;
        AttnSaved attn, cross;
        FfSaved ff;
    };
    std::vector<Layer> layers;
    float *pre = nullptr, *norm = nullptr, *rms = nullptr, *tmp = nullptr;
    nn::AttentionLayerShape self, cross;   // model/layer_shapes.h's encoder shapes for (M, r)
};

// The floats of an attention layer's saved probabilities: be->attention_saved_floats (on the GPU in the fused bf16
// mode only what the fused backward reads), or, with no backend (a memory estimate made before one exists), the
// probabilities B·H·Nq·keys the unfused ops keep.
std::int64_t attention_saved_floats(const nn::NnBackend* be, const nn::AttentionLayerShape& s, bool key_mask);
// An attention layer's saved activations, probs sized by attention_saved_floats; with `be` (null: a memory estimate
// made before a backend exists, or the decoder's forward-only layers, which never run in the fused attention mode:
// BackendDecoder::step checks) the output only as its bf16 copy inside probs where be's mode keeps it so (o null,
// o16 set).
AttnSaved carve_attention(Carver& c, const nn::AttentionLayerShape& s, const nn::NnBackend* be, bool key_mask);
// A training feed-forward's saved h and g for `elements` = rows x inner: g at half its floats (rounded up) where
// `be`'s mode keeps it only as bf16 (keeps_bf16_activations), h and g in fp32 otherwise (be null: fp32).
FfSaved carve_feed_forward(Carver& c, std::int64_t elements, const nn::NnBackend* be);
// Whether a training step keeps the activations only linear layers read — the feed-forward's gelu output g, the
// pre-norm outputs that feed the feed-forward, the self-attention's projections, the encoder's cross-attention
// queries and its output projection, and (where the backend's attention writes it so, carve_attention) the
// attention's output — only as bf16: the bf16 GEMM mode with bf16 activations (NnBackend::set_bf16_activations).
bool keeps_bf16_activations(const nn::NnBackend& be);
// The floats of such a buffer of `elements`: half (rounded up) where `be`'s mode keeps it as bf16 (be null: fp32).
std::int64_t activation_floats(std::int64_t elements, const nn::NnBackend* be);
// A pre-norm whose output only linear layers read (the attention's input; the encoder's final norm): x = a + b
// (residual_rmsnorm_forward; a null: x is only read, rmsnorm_forward), then n = rmsnorm(x) — as bf16 bits in n's
// storage where keeps_bf16_activations (then attn_forward / attn_backward take x_bf16), else fp32.
void linear_input_forward(nn::NnBackend& be, float* x, float* n, float* norm, const float* a, const float* b,
                          const float* gamma, std::int64_t N, std::int64_t C);
// The pre-norm before a feed-forward: x = a + b and its input n = rmsnorm(x) (residual_rmsnorm_forward), n stored
// only as bf16 bits where the feed-forward keeps bf16 activations (keeps_bf16_activations, and f.h: a backward
// follows), the bf16 its first layer's GEMMs round it to; ff_forward and ff_backward then read n so.
void ff_input_forward(nn::NnBackend& be, const FfSaved& f, float* x, float* n, float* norm, const float* a,
                      const float* b, const float* gamma, std::int64_t N, std::int64_t C);
// The encoder's layers, their attention's probabilities and feed-forwards sized for `be` (null: the full
// probabilities, fp32 g).
EncoderActs carve_encoder(Carver& c, const RetroConfig& cfg, std::int64_t M, std::int64_t r,
                          const nn::NnBackend* be = nullptr);

// nn/attention_layer.cpp's attention_layer_forward, op for op: q = rotary((x Wq^T) * dim_head^-1/2),
// k = rotary(c Wk^T), v = c Wv^T, o = attention(q, k, v), y = o Wo^T + bo. x_bf16: x holds bf16 bits
// (linear_input_forward's in the bf16 activations mode); the context is fp32. a.o16 set: o only as bf16 (the
// values the output projection's bf16 GEMMs round it to).
void attn_forward(nn::NnBackend& be, float* y, const AttnSaved& a, const float* x, const float* ctx,
                  const std::uint8_t* key_mask, const nn::RotaryView* q_rot, const nn::RotaryView* k_rot,
                  const nn::AttentionParams<float>& p, const nn::AttentionLayerShape& s, bool x_bf16 = false);
// attention_layer_backward, op for op: dx (=) gets the q path (plus k/v for self-attention), dcontext (=) the
// k/v path for cross-attention (null: parameter gradients only); parameter gradients +=.
void attn_backward(nn::NnBackend& be, float* dx, float* dcontext, const nn::AttentionParams<float>& g, const float* dy,
                   const AttnSaved& a, const float* x, const float* ctx, const std::uint8_t* key_mask,
                   const nn::RotaryView* q_rot, const nn::RotaryView* k_rot, const nn::AttentionParams<float>& p,
                   const nn::AttentionLayerShape& s, const GradScratch& t, bool x_bf16 = false);
// nn/feed_forward.cpp: y = gelu(x W1^T + b1) W2^T + b2 (x as ff_input_forward left it).
void ff_forward(nn::NnBackend& be, float* y, const FfSaved& f, const float* x, const nn::FeedForwardParams<float>& p,
                std::int64_t N, std::int64_t dim);
void ff_backward(nn::NnBackend& be, float* dx, const nn::FeedForwardParams<float>& g, const float* dy, const FfSaved& f,
                 const float* x, const nn::FeedForwardParams<float>& p, std::int64_t N, std::int64_t dim,
                 const GradScratch& t);

// model/encoder.h's encoder_forward, op for op: E [M r, dec_dim] from ids, mask [M, r] and ctx [M, cs, dec_dim]
// (backend memory), rot_r / rot_ctx the rotary tables of positions 0..r-1 and 0..cs-1; activations kept in `a`.
void encoder_forward(nn::NnBackend& be, float* E, const EncoderActs& a, const std::int32_t* ids,
                     const std::uint8_t* mask, const float* ctx, std::int64_t M, std::int64_t r,
                     const RetroParams<float>& p, const RetroConfig& c, const nn::RotaryView& rot_r,
                     const nn::RotaryView& rot_ctx);

}  // namespace retro::backend
