// Implementation of clip_model.h. An encoder layer runs in the three phases of bert_model.cpp:
// (A) LayerNorm and the fused QKV projection per row block, (B) attention per (sequence, head)
// (bert_attention.h; the causal mask of the text tower as an additive bias per key - query
// offset), (C) output projection + residual, LayerNorm, MLP + residual per row block. The dense
// layers are nn::PackedLinear with their biases, their rows spread over the threads in blocks
// (row_blocks.h) so that no row's bits depend on the thread count.
#include "embed/clip_model.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>

#include "core/blas_threads.h"
#include "core/error.h"
#include "core/manifest.h"
#include "core/safetensors.h"
#include "core/threads.h"
#include "embed/bert_attention.h"
#include "embed/checkpoint_tensor.h"
#include "embed/checkpoint_weights.h"
#include "embed/layer_norm.h"
#include "embed/pooled_attention.h"
#include "embed/row_blocks.h"
#include "nn/packed_linear.h"

namespace retro {

namespace {

namespace fs = std::filesystem;

constexpr std::int64_t ROW_BLOCK = 192;
constexpr float kMasked = -1e9f;   // a causal mask entry (exp underflows to nothing; HF uses finfo.min)

std::unique_ptr<float[]> scratch(std::int64_t n) { return std::unique_ptr<float[]>(new float[std::max<std::int64_t>(n, 1)]); }

void add_rows(float* x, const float* y, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) x[i] += y[i];
}

ClipTowerConfig tower_read(const nlohmann::json& j, const std::string& path, bool vision) {
    ClipTowerConfig c;
    c.present = true;
    // transformers' CLIPVisionConfig / CLIPTextConfig defaults (a saved config omits default values)
    if (vision) {
        c.hidden = 768, c.intermediate = 3072, c.layers = 12, c.heads = 12;
    } else {
        c.hidden = 512, c.intermediate = 2048, c.layers = 12, c.heads = 8, c.vocab_size = 49408;
    }
    const std::string where = vision ? "vision_config" : "text_config";
    auto get_int = [&](const char* key, int& out) {
        if (!j.contains(key)) return;
        if (!j[key].is_number_integer() || j[key].get<int>() < 0)
            user_error_in(path, where + "." + key + " is not a whole number", "give a CLIP config.json saved by transformers");
        out = j[key].get<int>();
    };
    get_int("hidden_size", c.hidden);
    get_int("intermediate_size", c.intermediate);
    get_int("num_hidden_layers", c.layers);
    get_int("num_attention_heads", c.heads);
    if (vision) {
        get_int("num_channels", c.channels);
        get_int("image_size", c.image_size);
        get_int("patch_size", c.patch_size);
        if (c.patch_size < 1 || c.image_size < c.patch_size || c.image_size % c.patch_size != 0)
            user_error_in(path, cat(where, ": image_size ", c.image_size, " is not a multiple of patch_size ", c.patch_size), "restore the checkpoint's own config.json");
        if (c.channels != 3) user_error_in(path, cat(where, ": num_channels is ", c.channels, "; images are RGB (3)"), "restore the checkpoint's own config.json");
    } else {
        get_int("vocab_size", c.vocab_size);
        get_int("max_position_embeddings", c.max_position);
        if (j.contains("eos_token_id") && j["eos_token_id"].is_number_integer()) c.eos_token_id = j["eos_token_id"].get<int>();
        if (c.max_position < 2) user_error_in(path, where + ": max_position_embeddings is below 2", "restore the checkpoint's own config.json");
    }
    if (c.hidden < 1 || c.heads < 1 || c.hidden % c.heads != 0)
        user_error_in(path, cat(where, ": hidden_size ", c.hidden, " is not a multiple of num_attention_heads ", c.heads), "restore the checkpoint's own config.json");
    if (c.intermediate < 1 || c.layers < 1) user_error_in(path, where + ": intermediate_size and num_hidden_layers must be positive", "restore the checkpoint's own config.json");
    if (j.contains("layer_norm_eps") && j["layer_norm_eps"].is_number()) c.eps = j["layer_norm_eps"].get<float>();
    if (j.contains("hidden_act") && j["hidden_act"].is_string()) c.hidden_act = j["hidden_act"].get<std::string>();
    if (!activation_from_name(c.hidden_act, c.act))
        user_error_in(path, where + ": hidden_act \"" + c.hidden_act + "\" is not supported", "use quick_gelu, gelu, gelu_new, relu or silu");
    return c;
}

}  // namespace

ClipConfig clip_config_read(const std::string& path) {
    if (!fs::exists(path)) user_error_in(path, "missing (a CLIP model folder needs config.json)", "copy the checkpoint's config.json beside model.safetensors");
    nlohmann::json j = json_read_file(path);
    if (!j.is_object()) user_error_in(path, "is not a JSON object", "restore the checkpoint's config.json");
    ClipConfig c;
    const std::string type = j.value("model_type", "");
    if (j.contains("vision_config") || j.contains("text_config") || type == "clip") {
        if (j.contains("vision_config") && j["vision_config"].is_object()) c.vision = tower_read(j["vision_config"], path, true);
        if (j.contains("text_config") && j["text_config"].is_object()) c.text = tower_read(j["text_config"], path, false);
        if (!j.contains("vision_config") && !j.contains("text_config")) {   // all defaults
            c.vision = tower_read(nlohmann::json::object(), path, true);
            c.text = tower_read(nlohmann::json::object(), path, false);
        }
    } else if (type == "clip_vision_model") {
        c.vision = tower_read(j, path, true);
    } else if (type == "clip_text_model") {
        c.text = tower_read(j, path, false);
    } else {
        user_error_in(path, "is not a CLIP config (no vision_config or text_config, model_type \"" + type + "\")",
                      "give a CLIPModel checkpoint saved by transformers");
    }
    if (j.contains("projection_dim") && j["projection_dim"].is_number_integer()) c.projection_dim = j["projection_dim"].get<int>();
    if (c.projection_dim < 1) user_error_in(path, "projection_dim must be positive", "restore the checkpoint's own config.json");
    return c;
}

struct ClipModel::Encoder::Packed {
    struct Layer {
        nn::PackedLinear qkv, o, fc1, fc2;
    };
    std::once_flag once;
    std::vector<Layer> layers;
};

const ClipModel::Encoder::Packed& ClipModel::Encoder::pack() const {
    std::call_once(packed->once, [&] {   // built aside and moved in, as BertModel::packed
        const int H = cfg->hidden, I = cfg->intermediate;
        std::vector<Packed::Layer> built;
        built.reserve(layers.size());
        for (const Layer& L : layers)
            built.push_back({nn::PackedLinear(L.w_qkv.data(), L.b_qkv.data(), 3 * H, H), nn::PackedLinear(L.w_o.data(), L.b_o.data(), H, H),
                             nn::PackedLinear(L.w_1.data(), L.b_1.data(), I, H), nn::PackedLinear(L.w_2.data(), L.b_2.data(), H, I)});
        packed->layers = std::move(built);
    });
    return *packed;
}

ClipModel::ClipModel(const std::string& dir) {
    cfg_ = clip_config_read((fs::path(dir) / "config.json").string());
    CheckpointWeights st(dir, "a CLIP model folder");
    st_path_ = st.path();
    const std::int64_t P = cfg_.projection_dim;
    auto tower = [&](ClipTowerConfig& c, Encoder& enc, const std::string& key, const std::string& tower_name,
                     const std::string& proj_name, std::vector<float>& proj, auto&& load_embeddings) {
        if (!c.present) return;
        std::string prefix;
        if (!checkpoint_prefix(st, key, prefix))
            user_error_in(st_path_, "has no " + tower_name + " tower (no tensor '" + key + "') though config.json describes one",
                          "keep config.json and model.safetensors from the same checkpoint");
        auto load = [&](const std::string& name, const std::vector<std::int64_t>& shape) {
            if (!st.has(prefix + name))
                user_error_in(st_path_, "has no tensor '" + prefix + name + "'", "give a complete CLIP checkpoint saved by transformers");
            return checkpoint_tensor_f32(st, prefix + name, shape);
        };
        const std::int64_t H = c.hidden, I = c.intermediate;
        const std::string base = tower_name == "vision" ? "vision_model." : "text_model.";
        if (st.has(prefix + base + cat("encoder.layers.", c.layers, ".self_attn.q_proj.weight")))
            user_error_in(st_path_, cat("has more ", tower_name, " layers than num_hidden_layers ", c.layers, " in config.json"),
                          "keep config.json and model.safetensors from the same checkpoint");
        enc.cfg = &c;
        enc.packed = std::make_shared<Encoder::Packed>();
        enc.layers.resize(c.layers);
        for (int l = 0; l < c.layers; ++l) {
            const std::string p = base + cat("encoder.layers.", l, ".");
            Layer& L = enc.layers[l];
            for (const char* m : {"q", "k", "v"}) {
                auto w = load(p + "self_attn." + m + "_proj.weight", {H, H});
                auto b = load(p + "self_attn." + m + "_proj.bias", {H});
                L.w_qkv.insert(L.w_qkv.end(), w.begin(), w.end());
                L.b_qkv.insert(L.b_qkv.end(), b.begin(), b.end());
            }
            L.w_o = load(p + "self_attn.out_proj.weight", {H, H});
            L.b_o = load(p + "self_attn.out_proj.bias", {H});
            L.ln1_g = load(p + "layer_norm1.weight", {H});
            L.ln1_b = load(p + "layer_norm1.bias", {H});
            L.ln2_g = load(p + "layer_norm2.weight", {H});
            L.ln2_b = load(p + "layer_norm2.bias", {H});
            L.w_1 = load(p + "mlp.fc1.weight", {I, H});
            L.b_1 = load(p + "mlp.fc1.bias", {I});
            L.w_2 = load(p + "mlp.fc2.weight", {H, I});
            L.b_2 = load(p + "mlp.fc2.bias", {H});
        }
        load_embeddings(load, base);
        // visual_projection / text_projection sit beside vision_model / text_model
        if (!st.has(prefix + proj_name))
            user_error_in(st_path_, "has no tensor '" + prefix + proj_name + "' (the " + tower_name + " projection)",
                          "give a CLIPModel (or CLIP*ModelWithProjection) checkpoint");
        proj = checkpoint_tensor_f32(st, prefix + proj_name, {P, H});
    };
    tower(cfg_.vision, vision_enc_, "vision_model.embeddings.class_embedding", "vision", "visual_projection.weight", vis_proj_,
          [&](auto& load, const std::string& b) {
              const std::int64_t H = cfg_.vision.hidden, C = cfg_.vision.channels, Ps = cfg_.vision.patch_size;
              // the conv (kernel = stride = P, no bias) as a linear layer over flattened patches [c, ky, kx],
              // packed once here rather than for every batch of images
              const auto patch_w = load(b + "embeddings.patch_embedding.weight", {H, C, Ps, Ps});
              patch_ = std::make_shared<const nn::PackedLinear>(patch_w.data(), nullptr, static_cast<int>(H),
                                                                static_cast<int>(C * Ps * Ps));
              class_emb_ = load(b + "embeddings.class_embedding", {H});
              vis_pos_ = load(b + "embeddings.position_embedding.weight", {cfg_.vision.patches() + 1, H});
              pre_ln_g_ = load(b + "pre_layrnorm.weight", {H});
              pre_ln_b_ = load(b + "pre_layrnorm.bias", {H});
              post_ln_g_ = load(b + "post_layernorm.weight", {H});
              post_ln_b_ = load(b + "post_layernorm.bias", {H});
          });
    tower(cfg_.text, text_enc_, "text_model.embeddings.token_embedding.weight", "text", "text_projection.weight", txt_proj_,
          [&](auto& load, const std::string& b) {
              const std::int64_t H = cfg_.text.hidden;
              tok_emb_ = load(b + "embeddings.token_embedding.weight", {cfg_.text.vocab_size, H});
              txt_pos_ = load(b + "embeddings.position_embedding.weight", {cfg_.text.max_position, H});
              final_ln_g_ = load(b + "final_layer_norm.weight", {H});
              final_ln_b_ = load(b + "final_layer_norm.bias", {H});
          });
    if (!has_vision() && !has_text()) user_error_in((fs::path(dir) / "config.json").string(), "describes neither a vision nor a text tower", "restore the checkpoint's own config.json");
}

void ClipModel::Encoder::forward(float* x, const std::int64_t* offsets, int count, bool causal,
                                 const std::int64_t* pooled) const {
    const int H = cfg->hidden, I = cfg->intermediate, heads = cfg->heads, d = H / heads;
    const std::int64_t base = offsets[0], N = offsets[count] - base;
    if (N == 0) return;
    int max_len = 0;
    for (int s = 0; s < count; ++s) max_len = std::max(max_len, static_cast<int>(offsets[s + 1] - offsets[s]));
    BlasSingleThread one_blas_thread;
    const Packed& P_all = pack();
    const float eps = cfg->eps, scale = 1.0f / std::sqrt(static_cast<float>(d));
    // causal: bias[max_len - 1 + (j - i)] = 0 for j <= i, masked for j > i; a sequence of length len reads from max_len - len on
    std::vector<float> mask;
    if (causal) {
        mask.assign(2 * static_cast<std::size_t>(max_len) - 1, 0.0f);
        std::fill(mask.begin() + max_len, mask.end(), kMasked);
    }
    auto qkv = scratch(N * 3 * H), ctx = scratch(N * H);
    const int threads = thread_count();
    std::vector<std::unique_ptr<float[]>> y_buf(threads), mid_buf(threads);
    std::vector<AttentionScratch> attention_scratch(threads);
    for (int t = 0; t < threads; ++t) {
        y_buf[t] = scratch(std::min(ROW_BLOCK, N) * H);
        mid_buf[t] = scratch(std::min(ROW_BLOCK, N) * I);
    }
    const bool erf_tile = cfg->act == Activation::GELU_ERF;
    const bool row_invariant = P_all.layers[0].o.uses_avx512();   // row_blocks.h
    // The last layer with `pooled`: one query row a sequence (the pooled one; causal: keys up to it, which is the
    // mask's effect, a masked key's exp(-1e9 - max) being 0), and (C) over those rows gathered into xs.
    PooledRows pooled_rows;
    std::unique_ptr<float[]> xs;
    if (pooled) {
        for (int s = 0; s < count; ++s) {
            RETRO_CHECK(pooled[s] >= offsets[s] && pooled[s] < offsets[s + 1], "pooled row ", pooled[s], " outside sequence ",
                        s, " [", offsets[s], ", ", offsets[s + 1], ")");   // so count <= N: the row buffers hold the gathered rows
            pooled_rows.add(pooled[s] - base, offsets[s] - base, causal ? pooled[s] - offsets[s] + 1 : offsets[s + 1] - offsets[s]);
        }
        xs = scratch(static_cast<std::int64_t>(count) * H);
    }
    for (std::size_t l = 0; l < layers.size(); ++l) {
        const Layer& L = layers[l];
        const Packed::Layer& P = P_all.layers[l];
        const bool pooled_only = pooled && l + 1 == layers.size();
        parallel_row_blocks(N, ROW_BLOCK, row_invariant, [&](std::int64_t r0, std::int64_t rows, int thread) {   // (A): every row's keys and values
            float* y = y_buf[thread].get();
            layer_norm_rows(x + r0 * H, y, rows, H, L.ln1_g.data(), L.ln1_b.data(), eps);
            P.qkv.apply(y, rows, qkv.get() + r0 * 3 * H);
        });
        if (pooled_only) {   // (B) for the pooled rows alone: ctx [count, H]
            pooled_attention(qkv.get(), H, heads, scale, pooled_rows, ctx.get());
        } else {
            parallel_ranges(static_cast<std::int64_t>(count) * heads, [&](std::int64_t t0, std::int64_t t1, int thread) {   // (B)
                for (std::int64_t t = t0; t < t1; ++t) {
                    const std::int64_t s = t / heads, h = t % heads;
                    const int len = static_cast<int>(offsets[s + 1] - offsets[s]);
                    const float* q = qkv.get() + (offsets[s] - base) * 3 * H + h * d;
                    bert_attention_head(q, q + H, q + 2 * H, 3 * H, len, d, scale, ctx.get() + (offsets[s] - base) * H + h * d,
                                        H, attention_scratch[thread], causal ? mask.data() + (max_len - len) : nullptr);
                }
            });
        }
        // (C) rows xr [n, H] with their attention ctx: output projection + residual, LayerNorm, MLP + residual
        const auto dense = [&](float* xr, std::int64_t n) {
            parallel_row_blocks(n, ROW_BLOCK, row_invariant, [&](std::int64_t r0, std::int64_t rows, int thread) {
                float* y = y_buf[thread].get();
                float* mid = mid_buf[thread].get();
                float* xb = xr + r0 * H;
                P.o.apply(ctx.get() + r0 * H, rows, y);
                add_rows(xb, y, rows * H);
                layer_norm_rows(xb, y, rows, H, L.ln2_g.data(), L.ln2_b.data(), eps);
                P.fc1.apply(y, rows, mid, erf_tile ? nn::LinearEpilogue::GELU_ERF : nn::LinearEpilogue::NONE);
                if (!erf_tile)   // row by row: modernbert_model.cpp says why
                    for (std::int64_t r = 0; r < rows; ++r) activation_inplace(mid + r * I, I, cfg->act);
                P.fc2.apply(mid, rows, y);
                add_rows(xb, y, rows * H);
            });
        };
        if (pooled_only) pooled_rows_apply(x, H, pooled_rows, xs.get(), dense);
        else dense(x, N);
    }
}

namespace {
// out[count, P] = rows[count, H] · W^T (W [P, H], no bias), one row at a time (a handful of rows).
void project(const float* rows, int count, int H, const std::vector<float>& w, int P, float* out) {
    for (int s = 0; s < count; ++s)
        for (int p = 0; p < P; ++p) {
            double acc = 0;
            for (int j = 0; j < H; ++j) acc += static_cast<double>(rows[s * H + j]) * w[static_cast<std::size_t>(p) * H + j];
            out[static_cast<std::size_t>(s) * P + p] = static_cast<float>(acc);
        }
}
}  // namespace

void ClipModel::encode_images(const float* pixels, int count, float* out) const {
    if (!has_vision()) user_error_in(st_path_, "holds no vision tower (a text-only CLIP checkpoint)", "give a CLIPModel checkpoint with vision_model");
    const ClipTowerConfig& c = cfg_.vision;
    const int H = c.hidden, Ps = c.patch_size, side = c.image_size / Ps, np = c.patches(), T = np + 1, K = 3 * Ps * Ps;
    const std::int64_t N = static_cast<std::int64_t>(count) * T;
    auto x = scratch(N * H);
    std::vector<std::int64_t> offsets(count + 1);
    for (int s = 0; s <= count; ++s) offsets[s] = static_cast<std::int64_t>(s) * T;
    const nn::PackedLinear& patch = *patch_;   // the patch embedding (the constructor's comment)
    BlasSingleThread one_blas_thread;
    parallel_for(count, [&](std::int64_t s) {
        const float* img = pixels + s * 3 * static_cast<std::int64_t>(c.image_size) * c.image_size;
        std::vector<float> flat(static_cast<std::size_t>(np) * K);
        for (int py = 0; py < side; ++py)
            for (int px = 0; px < side; ++px) {
                float* f = flat.data() + static_cast<std::size_t>(py * side + px) * K;
                for (int ch = 0; ch < 3; ++ch)
                    for (int ky = 0; ky < Ps; ++ky)
                        for (int kx = 0; kx < Ps; ++kx)
                            f[(ch * Ps + ky) * Ps + kx] = img[(static_cast<std::int64_t>(ch) * c.image_size + py * Ps + ky) * c.image_size + px * Ps + kx];
            }
        float* xs = x.get() + s * T * H;
        std::copy(class_emb_.begin(), class_emb_.end(), xs);
        patch.apply(flat.data(), np, xs + H);
        for (std::int64_t i = 0; i < static_cast<std::int64_t>(T) * H; ++i) xs[i] += vis_pos_[i];
        add_layer_norm_rows(xs, nullptr, T, H, pre_ln_g_.data(), pre_ln_b_.data(), c.eps);
    });
    std::vector<std::int64_t> class_rows(count);   // the class token: each image's row 0
    for (int s = 0; s < count; ++s) class_rows[s] = offsets[s];
    vision_enc_.forward(x.get(), offsets.data(), count, false, class_rows.data());
    std::vector<float> pooled(static_cast<std::size_t>(count) * H);
    for (int s = 0; s < count; ++s)
        layer_norm_rows(x.get() + static_cast<std::int64_t>(s) * T * H, pooled.data() + static_cast<std::size_t>(s) * H, 1, H,
                        post_ln_g_.data(), post_ln_b_.data(), c.eps);
    project(pooled.data(), count, H, vis_proj_, cfg_.projection_dim, out);
}

void ClipModel::encode_texts(const std::int32_t* ids, const std::int64_t* offsets, int count, float* out) const {
    if (!has_text()) user_error_in(st_path_, "holds no text tower (a vision-only CLIP checkpoint)", "give a CLIPModel checkpoint with text_model");
    const ClipTowerConfig& c = cfg_.text;
    const int H = c.hidden;
    const std::int64_t base = offsets[0], N = offsets[count] - base;
    for (int s = 0; s < count; ++s)
        RETRO_CHECK(offsets[s + 1] - offsets[s] >= 1 && offsets[s + 1] - offsets[s] <= c.max_position, "text ", s, " has ",
                    offsets[s + 1] - offsets[s], " tokens, the model at most ", c.max_position);
    for (std::int64_t i = 0; i < N; ++i)
        RETRO_CHECK(ids[base + i] >= 0 && ids[base + i] < c.vocab_size, "token id ", ids[base + i], " outside the vocabulary of ", c.vocab_size);
    auto x = scratch(N * H);
    for (int s = 0; s < count; ++s)
        for (std::int64_t t = offsets[s]; t < offsets[s + 1]; ++t) {
            const float* e = tok_emb_.data() + static_cast<std::int64_t>(ids[t]) * H;
            const float* p = txt_pos_.data() + (t - offsets[s]) * H;
            float* row = x.get() + (t - base) * H;
            for (int j = 0; j < H; ++j) row[j] = e[j] + p[j];
        }
    std::vector<std::int64_t> eos_rows(count);   // transformers' pooling position (clip_model.h)
    for (int s = 0; s < count; ++s) {
        std::int64_t at = offsets[s];
        if (c.eos_token_id == 2) {
            for (std::int64_t t = offsets[s]; t < offsets[s + 1]; ++t)
                if (ids[t] > ids[at]) at = t;
        } else {
            for (std::int64_t t = offsets[s]; t < offsets[s + 1]; ++t)
                if (ids[t] == c.eos_token_id) {
                    at = t;
                    break;
                }
        }
        eos_rows[s] = at;
    }
    text_enc_.forward(x.get(), offsets, count, true, eos_rows.data());
    std::vector<float> pooled(static_cast<std::size_t>(count) * H);
    for (int s = 0; s < count; ++s)
        layer_norm_rows(x.get() + (eos_rows[s] - base) * H, pooled.data() + static_cast<std::size_t>(s) * H, 1, H,
                        final_ln_g_.data(), final_ln_b_.data(), c.eps);
    project(pooled.data(), count, H, txt_proj_, cfg_.projection_dim, out);
}

}  // namespace retro
