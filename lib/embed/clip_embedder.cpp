// Implementation of clip_embedder.h.
#include "embed/clip_embedder.h"

#include <algorithm>
#include <filesystem>

#include "core/error.h"
#include "core/log.h"
#include "core/fingerprint.h"
#include "core/memory_budget.h"
#include "core/threads.h"
#include "embed/bert_attention.h"
#include "embed/checkpoint_weights.h"
#include "embed/encoder_settings.h"
#include "embed/model_folder.h"
#include "embed/packed_batches.h"

namespace retro {

namespace {

namespace fs = std::filesystem;

ClipEmbedderOptions checked(ClipEmbedderOptions o) {
    o.model_dir = embedder_model_folder("clip", o.model_dir);
    embedder_folder_kind_check("clip", o.model_dir);
    if (o.max_length != 0 && o.max_length < 3) user_error_in("--max-length", cat("is ", o.max_length, ", needs at least 3 (start, a token, end)"));
    if (o.batch < 1) user_error_in("--batch", cat("is ", o.batch, ", needs at least 1"));
    return o;
}

// Bytes a forward of `batch` items of `tokens` tokens takes in one tower (clip_model.cpp): each token's x, q|k|v, ctx
// and the pre-norm copy (6 hidden floats), `per_item` floats more an item (a vision batch's pixels), each thread's
// row block of the MLP and its attention scratch (bert_attention.h).
double tower_bytes(const ClipTowerConfig& c, int batch, int tokens, double per_item) {
    const double rows = static_cast<double>(batch) * tokens;
    const double per_thread = 192.0 * (c.hidden + c.intermediate) +
                              static_cast<double>(bert_attention_scratch_floats(tokens, c.hidden / std::max(1, c.heads)));
    return 4.0 * (rows * 6.0 * c.hidden + batch * per_item + thread_count() * per_thread);
}

}  // namespace

ClipEmbedder::ClipEmbedder(const ClipEmbedderOptions& opts, const Tokenizer* tokenizer)
    : opts_(checked(opts)), tokenizer_(tokenizer), model_(opts_.model_dir) {
    const std::string pre = (fs::path(opts_.model_dir) / "preprocessor_config.json").string();
    std::string all = CheckpointWeights::fingerprint(opts_.model_dir);
    if (model_.has_vision()) {
        image_cfg_ = clip_image_config_read(pre);
        const int side = model_.config().vision.image_size;
        // refused when an image is embedded (a text index of the same folder needs no preprocessing)
        if (image_cfg_.do_center_crop ? (image_cfg_.crop_height != side || image_cfg_.crop_width != side) : true)
            image_refusal_ = {pre, fs::exists(pre) ? cat("crops to ", image_cfg_.crop_height, " x ", image_cfg_.crop_width,
                                                         " (or does not crop), the vision tower takes ", side, " x ", side)
                                                   : cat("missing, and CLIP's default preprocessing crops to ", image_cfg_.crop_height,
                                                         " x ", image_cfg_.crop_width, " where the vision tower takes ", side, " x ", side),
                              fs::exists(pre) ? "keep preprocessor_config.json and config.json from the same checkpoint"
                                              : "copy the checkpoint's preprocessor_config.json into the folder"};
        if (fs::exists(pre)) all += " " + fingerprint_file(pre);
    }
    if (opts_.max_length == 0) opts_.max_length = model_.has_text() ? model_.config().text.max_position : 77;
    if (model_.has_text()) {
        bpe_.emplace(opts_.model_dir);
        if (bpe_->vocab_size() > model_.config().text.vocab_size)
            user_error_in((fs::path(opts_.model_dir) / "vocab.json").string(),
                          cat("has ids up to ", bpe_->vocab_size() - 1, ", config.json says vocab_size ", model_.config().text.vocab_size),
                          "keep the tokenizer files and the weights from the same checkpoint");
        if (opts_.max_length > model_.config().text.max_position) {
            log_warn(cat("--max-length ", opts_.max_length, " is more than ", opts_.model_dir, "'s ",
                         model_.config().text.max_position, " text positions: ", model_.config().text.max_position,
                         " is used"));
            opts_.max_length = model_.config().text.max_position;
        }
        all += " " + fingerprint_file((fs::path(opts_.model_dir) / "vocab.json").string()) + " " +
               fingerprint_file((fs::path(opts_.model_dir) / "merges.txt").string());
    }
    fingerprint_ = fingerprint_bytes(all.data(), all.size());
    config_fingerprint_ = encoder_config_fingerprint(opts_.model_dir, opts_.model_dir);
    // the larger tower's forward of --batch texts or images, refused before the first batch (not ended by the OOM killer)
    const ClipConfig& c = model_.config();
    double bytes = 0;
    if (model_.has_text()) bytes = tower_bytes(c.text, opts_.batch, opts_.max_length, 0);
    if (model_.has_vision())
        bytes = std::max(bytes, tower_bytes(c.vision, opts_.batch, c.vision.patches() + 1,
                                            3.0 * c.vision.image_size * c.vision.image_size));
    memory_require("--batch", bytes, cat("a forward pass over --batch ", opts_.batch, " texts or images"),
                   "lower --batch");
}

void ClipEmbedder::require_image_preprocessing() const {
    if (!image_refusal_.empty()) user_error_in(image_refusal_[0], image_refusal_[1], image_refusal_[2]);
}

const ClipBpeTokenizer& ClipEmbedder::tokenizer() const {
    if (!bpe_) user_error_in(model_.weights_path(), "holds no text tower (a vision-only CLIP checkpoint)", "give a CLIPModel checkpoint with text_model");
    return *bpe_;
}

void ClipEmbedder::embed_texts(const std::vector<std::string>& texts, float* out) const {
    const ClipBpeTokenizer& bpe = tokenizer();
    embed_packed_batches(encoder_text_ids(texts, [&](const std::string& t) { return bpe.encode(t, opts_.max_length); }), opts_.batch, dim(),
                         [&](const std::int32_t* ids, const std::int64_t* offsets, int count, float* pooled) {
                             model_.encode_texts(ids, offsets, count, pooled);
                         },
                         out);
}

void ClipEmbedder::embed(const std::int32_t* tokens, std::int64_t n, int chunk_size, float* out) const {
    RETRO_CHECK(tokenizer_ != nullptr, "the clip embedder needs the database's tokenizer to decode chunks");
    const ClipBpeTokenizer& bpe = tokenizer();
    embed_packed_batches(encoder_chunk_ids(*tokenizer_, tokens, n, chunk_size, 2,
                                           [&](const std::string& t) { return bpe.encode(t, opts_.max_length); }),
                         opts_.batch, dim(),
                         [&](const std::int32_t* ids, const std::int64_t* offsets, int count, float* pooled) {
                             model_.encode_texts(ids, offsets, count, pooled);
                         },
                         out);
}

void ClipEmbedder::embed_pixels(const float* pixels, int count, float* out) const {
    require_image_preprocessing();
    model_.encode_images(pixels, count, out);
    for (int i = 0; i < count; ++i) l2_normalise(out + static_cast<std::size_t>(i) * dim(), dim(), out + static_cast<std::size_t>(i) * dim());
}

void ClipEmbedder::embed_images(const std::vector<std::string>& paths, float* out) const {
    if (!model_.has_vision()) user_error_in(model_.weights_path(), "holds no vision tower (a text-only CLIP checkpoint)", "give a CLIPModel checkpoint with vision_model");
    require_image_preprocessing();
    const int side = model_.config().vision.image_size;
    const std::size_t per = 3 * static_cast<std::size_t>(side) * side;
    std::vector<float> pixels;
    for (std::size_t b0 = 0; b0 < paths.size(); b0 += static_cast<std::size_t>(opts_.batch)) {
        const std::size_t b1 = std::min(paths.size(), b0 + static_cast<std::size_t>(opts_.batch));
        pixels.resize((b1 - b0) * per);
        parallel_for(static_cast<std::int64_t>(b1 - b0), [&](std::int64_t i) {
            clip_pixel_values(image_decode(paths[b0 + i]), image_cfg_, pixels.data() + i * per, paths[b0 + i]);
        });
        embed_pixels(pixels.data(), static_cast<int>(b1 - b0), out + b0 * dim());
    }
}

nlohmann::json ClipEmbedder::to_json() const {
    return {{"name", "clip"}, {"model", opts_.model_dir}, {"max_length", opts_.max_length},
            {"batch", opts_.batch}, {"dim", dim()},        {"fingerprint", fingerprint_},
            {"config_fingerprint", config_fingerprint_}};
}

std::unique_ptr<Embedder> make_clip_embedder(const ClipEmbedderOptions& opts, const Tokenizer* tokenizer) {
    return std::make_unique<ClipEmbedder>(opts, tokenizer);
}

std::unique_ptr<ClipEmbedder> make_clip_embedder_from_json(const nlohmann::json& j, const Tokenizer* tokenizer) {
    const EncoderSettings s = encoder_settings_read(j, "clip");
    auto e = std::make_unique<ClipEmbedder>(ClipEmbedderOptions{s.model_dir, s.max_length, s.batch}, tokenizer);
    encoder_settings_check(s, e->fingerprint(), e->dim(), e->to_json()["model"].get<std::string>() + " (weights, tokenizer and preprocessor files)");
    encoder_config_check(j, e->to_json()["config_fingerprint"].get<std::string>(), s.model_dir);
    return e;
}

}  // namespace retro
