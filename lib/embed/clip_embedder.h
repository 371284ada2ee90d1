// The `clip` embedder: a local Hugging Face CLIPModel folder (config.json, model.safetensors,
// vocab.json + merges.txt, preprocessor_config.json) embeds images and texts into one space:
//   image file -> RGB8 (image_decode.h) -> resize, crop, normalise (clip_image.h) -> vision tower
//   chunk ids -> text (the database's decode) -> CLIP BPE (clip_bpe.h) -> text tower
// each followed by its projection and L2 normalisation (clip_model.h). As an Embedder it embeds
// chunks (a clip text index); retro-index --images builds an image index with embed_images, and
// `retro-index query --image` embeds a query image. CPU only.
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "embed/clip_image.h"
#include "embed/clip_model.h"
#include "embed/embedder.h"
#include "text/clip_bpe.h"

namespace retro {

struct ClipEmbedderOptions {
    std::string model_dir;
    // BPE tokens per text, <|startoftext|> and <|endoftext|> included: at most the model's text positions (a larger
    // value is lowered with a warning); 0 = the model's positions (the tools' default: 77 for every CLIP)
    int max_length = 77;
    int batch = 32;        // texts or images per forward pass
};

class ClipEmbedder : public Embedder {
public:
    // Loads the folder; UserError naming a missing or inconsistent file.
    explicit ClipEmbedder(const ClipEmbedderOptions& opts, const Tokenizer* tokenizer = nullptr);
    std::string name() const override { return "clip"; }
    int dim() const override { return model_.config().projection_dim; }
    // Chunk ids -> text -> the text tower; a chunk with no text gets a zero row.
    void embed(const std::int32_t* tokens, std::int64_t n, int chunk_size, float* out) const override;
    // {"name":"clip","model","max_length","batch","dim","fingerprint"}
    nlohmann::json to_json() const override;

    void embed_texts(const std::vector<std::string>& texts, float* out) const;
    // Decodes, preprocesses and embeds each file (UserError naming a file that is not a usable image).
    void embed_images(const std::vector<std::string>& paths, float* out) const;
    // Pixel values [count, 3, image_size, image_size] (clip_pixel_values) -> unit rows.
    void embed_pixels(const float* pixels, int count, float* out) const;

    const ClipModel& model() const { return model_; }
    const ClipImageConfig& image_config() const { return image_cfg_; }
    const ClipBpeTokenizer& tokenizer() const;   // UserError when the folder has no text tower
    const std::string& fingerprint() const { return fingerprint_; }
    int max_length() const { return opts_.max_length; }

private:
    ClipEmbedderOptions opts_;
    const Tokenizer* tokenizer_;
    ClipModel model_;
    ClipImageConfig image_cfg_;
    std::optional<ClipBpeTokenizer> bpe_;
    std::string fingerprint_, config_fingerprint_;   // (encoder_settings.h)
    std::vector<std::string> image_refusal_;           // {where, what, fix} where images cannot be preprocessed
    // UserError (image_refusal_) where the folder's preprocessing does not give the vision tower's input size.
    void require_image_preprocessing() const;
};

std::unique_ptr<Embedder> make_clip_embedder(const ClipEmbedderOptions& opts, const Tokenizer* tokenizer);
// Rebuilds from the settings ClipEmbedder::to_json wrote; refuses a model whose fingerprint changed.
std::unique_ptr<ClipEmbedder> make_clip_embedder_from_json(const nlohmann::json& j, const Tokenizer* tokenizer);

}  // namespace retro
