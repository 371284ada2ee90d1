// CLIP's two towers in fp32 on the CPU (Radford et al. 2021; transformers' CLIPModel):
//   vision: patches (conv stride P, no bias) -> [class token; patches] + position -> pre_layrnorm
//           -> encoder -> post_layernorm(class token) -> visual_projection (no bias)
//   text:   token + position embeddings -> encoder with a causal mask -> final_layer_norm ->
//           the hidden state at the end-of-text token -> text_projection (no bias)
//   encoder layer (pre-LN): x += out_proj(Attn(LN1(x)))  (q, k, v, out with biases, scores / √d);
//                           x += fc2(act(fc1(LN2(x))))    (act: quick_gelu or gelu per config)
// The end-of-text position is transformers' rule: with text_config eos_token_id 2 (checkpoints saved
// before transformers PR #24773) the argmax of the ids, otherwise the first eos_token_id.
// Either tower may be absent (CLIPTextModelWithProjection / CLIPVisionModelWithProjection
// checkpoints); using a missing one is a UserError naming the file. Sequences (texts) are packed
// back to back as in bert_model.h; images are a batch of equal-length sequences.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "embed/activation.h"

namespace retro {

namespace nn {
class PackedLinear;
}

struct ClipTowerConfig {
    bool present = false;
    int hidden = 0, intermediate = 0, layers = 0, heads = 0;
    float eps = 1e-5f;
    std::string hidden_act = "quick_gelu";
    Activation act = Activation::QUICK_GELU;
    // vision
    int channels = 3, image_size = 224, patch_size = 32;
    // text
    int vocab_size = 0, max_position = 77, eos_token_id = 49407;
    int patches() const { return (image_size / patch_size) * (image_size / patch_size); }
};

struct ClipConfig {
    ClipTowerConfig vision, text;
    int projection_dim = 512;
};

// Reads config.json: a CLIPConfig (vision_config, text_config, projection_dim), or a single
// tower's config (model_type clip_vision_model / clip_text_model). Absent fields take
// transformers' defaults. UserError naming the file.
ClipConfig clip_config_read(const std::string& path);

class ClipModel {
public:
    // Reads dir/config.json and dir/model.safetensors; the towers the config describes must be there.
    explicit ClipModel(const std::string& dir);
    const ClipConfig& config() const { return cfg_; }
    bool has_vision() const { return cfg_.vision.present; }
    bool has_text() const { return cfg_.text.present; }
    const std::string& weights_path() const { return st_path_; }

    // `count` images as pixel values [count, channels, image_size, image_size] -> projected
    // embeddings [count, projection_dim] (not normalised).
    void encode_images(const float* pixels, int count, float* out) const;
    // `count` token sequences packed back to back (ids[offsets[s] .. offsets[s+1])) -> projected
    // embeddings [count, projection_dim] (not normalised).
    void encode_texts(const std::int32_t* ids, const std::int64_t* offsets, int count, float* out) const;

private:
    struct Layer {
        std::vector<float> ln1_g, ln1_b, w_qkv, b_qkv, w_o, b_o, ln2_g, ln2_b, w_1, b_1, w_2, b_2;
    };
    struct Encoder {
        const ClipTowerConfig* cfg = nullptr;
        std::vector<Layer> layers;
        struct Packed;
        std::shared_ptr<Packed> packed;
        // x [offsets[count] - offsets[0], hidden] through every layer, in place. `pooled[s]`: the one row of
        // sequence s (an absolute index in [offsets[s], offsets[s+1])) whose final state the caller reads — the
        // class token, the end-of-text token: the last layer then runs its attention queries, output projection
        // and MLP for those rows alone (their keys and values still come from every row), and only those rows of
        // x hold the final state. Null: every row through every layer.
        void forward(float* x, const std::int64_t* offsets, int count, bool causal,
                     const std::int64_t* pooled = nullptr) const;
        const Packed& pack() const;
    };
    ClipConfig cfg_;
    std::string st_path_;
    Encoder vision_enc_, text_enc_;
    std::shared_ptr<const nn::PackedLinear> patch_;   // the vision tower's patch embedding, packed
    std::vector<float> class_emb_, vis_pos_, pre_ln_g_, pre_ln_b_, post_ln_g_, post_ln_b_, vis_proj_;
    std::vector<float> tok_emb_, txt_pos_, final_ln_g_, final_ln_b_, txt_proj_;
};

}  // namespace retro
