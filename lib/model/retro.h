// The RETRO model on the CPU: RETRO-pytorch 0.3.9's architecture (ARCHITECTURE.md Decision 1, RETRO.md B),
// forward and backward, float or double, over one flat parameter buffer (model/params.h).
//   embed  = token_emb[seq] + pos_emb[0..n-1]                                      [B, n, enc_dim]
//   x      = to_decoder_model_dim(embed)   (Linear + bias, identity when enc_dim == dec_dim)
//   decoder layer i: x += SelfAttn(RMS x) (causal, rotary 0..n-1)
//                    if i is a CCA layer and neighbours are given:
//                        first such layer: E = Encoder(token_emb[retrieved], ctx = x chunks)   (B.7)
//                        x += CCA(RMS x, E)                                          (B.6, nn/chunked_cross_attention.h)
//                    x += FFN(RMS x)
//   logits = to_logits(RMS x) (+ the copy head's gates with config copy_head, nn/copy_head.h);
//   loss = mean CE over labels != pad_id
//   encoder layer j over [B*l*k, r] neighbour tokens (no absolute positions):
//       h += SelfAttn(RMS h; pad mask, rotary 0..r-1);  h += CrossAttn(RMS h, ctx; q rotary 0..r-1,
//       k rotary 0..cs-1) on enc_cross_attn_layers;  h += FFN(RMS h);   E = project_out(RMS h)  [.., dec_dim]
// The encoder's context is the raw decoder residual stream after the first CCA layer's self-attention,
// chunk u repeated for each of its k neighbours. Without neighbours the model is a plain decoder.
// The encoder is model/encoder.h, CCA nn/chunked_cross_attention.h, the layer shapes model/layer_shapes.h:
// the same code generate/cached_decoder.h runs when decoding.
#pragma once
#include <cstdint>
#include <vector>

#include "model/config.h"
#include "model/encoder.h"
#include "model/layer_params.h"
#include "model/params.h"
#include "nn/attention_layer.h"
#include "nn/chunked_cross_attention.h"
#include "nn/copy_head.h"
#include "nn/feed_forward.h"
#include "nn/rotary.h"

namespace retro {

// One batch as RP's forward(seq, retrieved, return_loss=True) takes it.
struct RetroBatch {
    std::int64_t B = 0;                   // batch size
    std::int64_t n = 0;                   // input length (seq holds n + 1 ids)
    std::vector<std::int32_t> seq;        // [B, n + 1]: inputs seq[:, :n], labels seq[:, 1:]
    std::vector<std::int32_t> retrieved;  // [B, floor(n/cs), k, r] neighbour + continuation ids; empty = none
    std::int64_t k = 0, r = 0;            // neighbours per chunk, retrieved tokens per neighbour
    bool has_retrieval() const { return !retrieved.empty(); }
};

template <typename T>
class RetroModel {
public:
    explicit RetroModel(const RetroConfig& config);
    RetroModel(const RetroModel&) = delete;   // the bound pointers point into this object's buffers
    RetroModel& operator=(const RetroModel&) = delete;

    const RetroConfig& config() const { return config_; }
    const ParamLayout& layout() const { return layout_; }
    std::vector<T>& params() { return params_; }
    const std::vector<T>& params() const { return params_; }
    std::vector<T>& grads() { return grads_; }
    T* param(const std::string& name) { return params_.data() + layout_.offset(name); }
    T* grad(const std::string& name) { return grads_.data() + layout_.offset(name); }
    void zero_grad();

    // Which tensors need gradients (one flag per layout entry; 0 = frozen by the trainer, model/param_groups.h).
    // backward() then skips work that only feeds frozen tensors: the output head's weight gradient, the encoder
    // when frozen and nothing below it trains, every block below the lowest trainable one. Frozen tensors'
    // grads() are unspecified afterwards; trainable ones are bit-identical to a backward without flags.
    void set_trainable(const std::vector<std::uint8_t>& per_entry);

    // Forward pass; keeps the activations for backward. Returns the loss (mean CE over non-pad labels).
    T forward(const RetroBatch& batch);
    // Adds d loss / d params (times `scale`, e.g. 1/accumulation steps) into grads().
    void backward(T scale = T(1));
    const std::vector<T>& logits() const { return logits_; }   // [B, n, num_tokens] after forward
    std::int64_t label_count() const { return valid_; }        // non-pad labels of the last forward

    // The parameters bound by name (model/layer_params.h); read by generate/cached_decoder.h.
    const RetroParams<T>& bound() const { return p_; }

private:
    struct DecoderActivations {   // one decoder layer's, kept for backward
        std::vector<T> x0, n0, r0, x1, n1, r1, x2, n2, r2;
        nn::AttentionLayerCache<T> attn_cache;
        nn::CcaCache<T> cca_cache;
        nn::FeedForwardCache<T> ff_cache;
    };

    RetroConfig config_;
    ParamLayout layout_;
    std::vector<T> params_, grads_;
    RetroParams<T> p_, g_;   // g_: the same structure pointing into grads_
    std::vector<DecoderActivations> dec_;
    EncoderCache<T> enc_;
    // set_trainable's plan. Blocks bottom-up: 0 = embeddings (and to_decoder_model_dim); decoder layer i:
    // 3i+1 self-attention, 3i+2 CCA (the encoder runs in the first CCA layer's), 3i+3 feed-forward;
    // 3*dec_depth+1 = norm_out and the head. backward stops below lowest_trainable_.
    std::int64_t lowest_trainable_ = 0;
    bool head_trainable_ = true, encoder_trainable_ = true;

    // activations of the last forward
    std::int64_t B_ = 0, n_ = 0, l_ = 0, k_ = 0, r_ = 0, M_ = 0;
    bool retrieval_ = false;
    std::vector<std::int32_t> inputs_, labels_, retrieved_;
    std::vector<std::uint8_t> mask_;
    std::vector<T> embed_, x_final_, xn_final_, rms_final_, logits_, lse_;
    std::vector<T> ctx_, E_;   // encoder context [M, cs, Cd], output [M, r, Cd]
    std::int64_t valid_ = 0;
    nn::RotaryTable<T> rot_dec_;
    bool copy_active_ = false;                   // config copy_head with neighbours in the last forward
    std::vector<nn::CopyCandidate> copy_cand_;   // [B, n, k]
};

}  // namespace retro
