// T5 encoder forward in fp32 on the CPU (Raffel et al. 2020; transformers' T5EncoderModel):
//   x = shared[id]                                      (no scaling, no position embedding)
//   per layer:  x += Wo·Attn(RMS(x)·g0)  with scores q·k (no 1/√d) + bias[bucket(j - i), head]
//               x += wo·act(wi·RMS(x)·g1)                (v1.0, feed_forward_proj "relu")
//               x += wo·(act(wi_0·n) ⊙ wi_1·n), n = RMS(x)·g1   ("gated-gelu": gelu_new, v1.1)
//   out = RMS(x)·g_final,   RMS(x) = x / √(mean(x²) + eps)   (T5LayerNorm: no mean, no bias)
// No linear has a bias. The relative-position bias table [num_buckets, heads] lives in layer 0 and
// is shared by all layers; buckets are transformers' bidirectional _relative_position_bucket.
// Sequences are packed back to back as in bert_model.h (attention per sequence and head).
// Weights: model.safetensors of a T5EncoderModel or T5ForConditionalGeneration (its encoder), with
// or without a prefix ("0.auto_model." ...); F32/F16/BF16, kept as fp32.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "embed/activation.h"

namespace retro {

struct T5Config {
    int vocab_size = 0, d_model = 0, d_kv = 0, d_ff = 0, layers = 0, heads = 0;
    int num_buckets = 32, max_distance = 128;
    float eps = 1e-6f;
    std::string feed_forward_proj = "relu";   // [gated-]{relu, gelu, gelu_new, silu}; "gated-gelu" = gated gelu_new
    bool gated = false;
    Activation act = Activation::RELU;
    int inner() const { return heads * d_kv; }
};

// Reads config.json (T5Config fields as transformers writes them); UserError naming the file. A
// decoder config ("is_decoder": true) is refused.
T5Config t5_config_read(const std::string& path);

class T5Model {
public:
    // Reads dir/config.json and dir/model.safetensors; UserError naming a missing or bad file.
    explicit T5Model(const std::string& dir);
    const T5Config& config() const { return cfg_; }

    // Final-layer-normed hidden states of `count` sequences packed back to back:
    // ids[offsets[s] .. offsets[s+1]). out: [offsets[count], d_model].
    void forward(const std::int32_t* ids, const std::int64_t* offsets, int count, float* out) const;
    // forward, then the mean over each sequence's tokens (all real: eos included, no padding): [count, d_model].
    void forward_mean(const std::int32_t* ids, const std::int64_t* offsets, int count, float* out) const;
    // forward, then the element-wise max over each sequence's tokens (sentence-transformers max pooling).
    void forward_max(const std::int32_t* ids, const std::int64_t* offsets, int count, float* out) const;

private:
    struct Layer {
        std::vector<float> ln0, ln1;   // [d_model]
        std::vector<float> w_qkv;      // [3·inner, d_model]: q, k, v stacked
        std::vector<float> w_o;        // [d_model, inner]
        std::vector<float> w_i;        // [d_ff, d_model], or [2·d_ff, d_model]: wi_0 then wi_1 (gated)
        std::vector<float> w_out;      // [d_model, d_ff]
    };
    struct PackedLayers;
    const PackedLayers& packed() const;
    template <typename Pool>
    void forward_pool(const std::int32_t* ids, const std::int64_t* offsets, int count, float* out, Pool pool) const;

    T5Config cfg_;
    std::vector<float> embed_, rel_bias_, final_ln_;   // [vocab, d_model], [num_buckets, heads], [d_model]
    std::vector<Layer> layers_;
    std::shared_ptr<PackedLayers> packed_;
};

}  // namespace retro
