// Implementation of t5_model.h. A layer runs in three phases as in bert_model.cpp: (A) RMS norm and
// the fused QKV projection per row block, (B) attention per (sequence, head) with the relative
// bias (bert_attention.h, scale 1), (C) output projection + residual, RMS norm, feed-forward +
// residual, fused per row block. The dense layers are nn::PackedLinear without bias, their rows
// spread over the threads in blocks (row_blocks.h) so that no row's bits depend on the thread count.
#include "embed/t5_model.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
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
#include "embed/packed_batches.h"
#include "embed/relative_position.h"
#include "embed/row_blocks.h"
#include "nn/fast_math.h"
#include "nn/packed_linear.h"

namespace retro {

namespace {

namespace fs = std::filesystem;

constexpr std::int64_t ROW_BLOCK = 192;   // as bert_model.cpp: see the reasons there

std::unique_ptr<float[]> scratch(std::int64_t n) { return std::unique_ptr<float[]>(new float[std::max<std::int64_t>(n, 1)]); }

RETRO_FAST_MATH_BEGIN

// Y = g · X / sqrt(mean(X²) + eps), row by row (T5LayerNorm); Y may be X.
RETRO_SIMD_CLONES void rms_norm_rows(const float* X, float* Y, std::int64_t rows, int n, const float* g, float eps) {
    for (std::int64_t r = 0; r < rows; ++r) {
        const float* x = X + r * n;
        float* y = Y + r * n;
        float ss = 0;
#pragma omp simd reduction(+ : ss)
        for (int j = 0; j < n; ++j) ss += x[j] * x[j];
        const float inv = 1.0f / std::sqrt(ss / static_cast<float>(n) + eps);
#pragma omp simd
        for (int j = 0; j < n; ++j) y[j] = g[j] * (x[j] * inv);
    }
}

// x += y over n floats.
RETRO_SIMD_CLONES void add_rows(float* x, const float* y, std::int64_t n) {
#pragma omp simd
    for (std::int64_t i = 0; i < n; ++i) x[i] += y[i];
}

RETRO_FAST_MATH_END

// The gated feed-forward's product: g[r, f] = act(h[r, f]) · h[r, d_ff + f] for h [rows, 2·d_ff].
void gate_rows(float* h, std::int64_t rows, int d_ff, Activation act, float* g) {
    for (std::int64_t r = 0; r < rows; ++r) {
        float* a = h + r * 2 * d_ff;
        activation_inplace(a, d_ff, act);
        for (int f = 0; f < d_ff; ++f) g[r * d_ff + f] = a[f] * a[d_ff + f];
    }
}

}  // namespace

T5Config t5_config_read(const std::string& path) {
    if (!fs::exists(path))
        user_error_in(path, "missing (a T5 model folder needs config.json)", "copy the checkpoint's config.json beside model.safetensors");
    nlohmann::json j = json_read_file(path);
    if (!j.is_object()) user_error_in(path, "is not a JSON object", "restore the checkpoint's config.json");
    if (j.value("is_decoder", false))
        user_error_in(path, "describes a T5 decoder (\"is_decoder\": true); the t5 embedder needs an encoder",
                      "give a T5EncoderModel or T5ForConditionalGeneration checkpoint");
    T5Config c;
    auto get_int = [&](const char* key, int& out, bool required) {
        if (j.contains(key) && j[key].is_number_integer() && j[key].get<int>() > 0) {
            out = j[key].get<int>();
            return;
        }
        if (!required && !j.contains(key)) return;
        user_error_in(path, std::string("needs a positive integer \"") + key + "\"", "give a T5 config.json");
    };
    get_int("vocab_size", c.vocab_size, true);
    get_int("d_model", c.d_model, true);
    get_int("d_kv", c.d_kv, true);
    get_int("d_ff", c.d_ff, true);
    get_int("num_layers", c.layers, true);
    get_int("num_heads", c.heads, true);
    get_int("relative_attention_num_buckets", c.num_buckets, false);
    get_int("relative_attention_max_distance", c.max_distance, false);
    if (c.num_buckets < 4) user_error_in(path, cat("relative_attention_num_buckets ", c.num_buckets, " is below 4"), "restore the checkpoint's own config.json");
    if (j.contains("layer_norm_epsilon") && j["layer_norm_epsilon"].is_number()) c.eps = j["layer_norm_epsilon"].get<float>();
    if (j.contains("feed_forward_proj") && j["feed_forward_proj"].is_string()) c.feed_forward_proj = j["feed_forward_proj"].get<std::string>();
    // transformers' T5Config: "[gated-]ACT"; "gated-gelu" means gelu_new.
    std::string act = c.feed_forward_proj;
    if (act.rfind("gated-", 0) == 0) {
        c.gated = true;
        act = act.substr(6);
    }
    if (c.feed_forward_proj == "gated-gelu") act = "gelu_new";
    if (act.find('-') != std::string::npos || !activation_from_name(act, c.act))
        user_error_in(path, "feed_forward_proj \"" + c.feed_forward_proj + "\" is not supported",
                      "use a checkpoint with relu, gated-gelu, gelu, gelu_new or silu");
    return c;
}

struct T5Model::PackedLayers {
    struct Layer {
        nn::PackedLinear qkv, o, wi, wo;
    };
    std::once_flag once;
    std::vector<Layer> layers;
};

const T5Model::PackedLayers& T5Model::packed() const {
    std::call_once(packed_->once, [&] {   // built aside and moved in, as BertModel::packed
        const int D = cfg_.d_model, I = cfg_.inner(), F = cfg_.d_ff;
        std::vector<PackedLayers::Layer> built;
        built.reserve(layers_.size());
        for (const Layer& L : layers_)
            built.push_back({nn::PackedLinear(L.w_qkv.data(), nullptr, 3 * I, D), nn::PackedLinear(L.w_o.data(), nullptr, D, I),
                             nn::PackedLinear(L.w_i.data(), nullptr, cfg_.gated ? 2 * F : F, D),
                             nn::PackedLinear(L.w_out.data(), nullptr, D, F)});
        packed_->layers = std::move(built);
    });
    return *packed_;
}

T5Model::T5Model(const std::string& dir) : packed_(std::make_shared<PackedLayers>()) {
    cfg_ = t5_config_read((fs::path(dir) / "config.json").string());
    CheckpointWeights st(dir, "a T5 model folder");
    const std::string& st_path = st.path();
    const std::string key = "encoder.block.0.layer.0.SelfAttention.q.weight";
    std::string prefix;
    if (!checkpoint_prefix(st, key, prefix)) {
        bool decoder = false;
        for (const auto& [name, view] : st.tensors()) decoder |= name.find("decoder.block.") != std::string::npos;
        if (decoder)
            user_error_in(st_path, "holds T5 decoder tensors but no encoder ('" + key + "')",
                          "give a checkpoint with the encoder (T5EncoderModel or T5ForConditionalGeneration)");
        user_error_in(st_path, "has no tensor '" + key + "' (not a T5 encoder checkpoint)",
                      "give a T5EncoderModel or T5ForConditionalGeneration checkpoint saved by transformers");
    }
    auto load = [&](const std::string& name, const std::vector<std::int64_t>& shape) {
        if (!st.has(prefix + name))
            user_error_in(st_path, "has no tensor '" + prefix + name + "'", "give a complete T5 encoder checkpoint saved by transformers");
        return checkpoint_tensor_f32(st, prefix + name, shape);
    };
    const std::int64_t D = cfg_.d_model, I = cfg_.inner(), F = cfg_.d_ff;
    // T5EncoderModel ties encoder.embed_tokens to shared and saves one of the two.
    embed_ = load(st.has(prefix + "shared.weight") ? "shared.weight" : "encoder.embed_tokens.weight", {cfg_.vocab_size, D});
    rel_bias_ = load("encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight", {cfg_.num_buckets, cfg_.heads});
    final_ln_ = load("encoder.final_layer_norm.weight", {D});
    if (st.has(prefix + cat("encoder.block.", cfg_.layers, ".layer.0.SelfAttention.q.weight")))
        user_error_in(st_path, cat("has more encoder blocks than num_layers ", cfg_.layers, " in config.json"),
                      "keep config.json and model.safetensors from the same checkpoint");
    layers_.resize(cfg_.layers);
    for (int l = 0; l < cfg_.layers; ++l) {
        const std::string p = cat("encoder.block.", l, ".layer.");
        Layer& L = layers_[l];
        for (const char* m : {"q", "k", "v"}) {
            auto w = load(p + "0.SelfAttention." + m + ".weight", {I, D});
            L.w_qkv.insert(L.w_qkv.end(), w.begin(), w.end());
        }
        L.w_o = load(p + "0.SelfAttention.o.weight", {D, I});
        L.ln0 = load(p + "0.layer_norm.weight", {D});
        L.ln1 = load(p + "1.layer_norm.weight", {D});
        if (cfg_.gated) {
            L.w_i = load(p + "1.DenseReluDense.wi_0.weight", {F, D});
            auto w1 = load(p + "1.DenseReluDense.wi_1.weight", {F, D});
            L.w_i.insert(L.w_i.end(), w1.begin(), w1.end());
        } else {
            if (st.has(prefix + p + "1.DenseReluDense.wi_0.weight"))
                user_error_in(st_path, "holds a gated feed-forward (wi_0, wi_1) but config.json says feed_forward_proj \"" +
                                           cfg_.feed_forward_proj + "\"",
                              "keep config.json and model.safetensors from the same checkpoint");
            L.w_i = load(p + "1.DenseReluDense.wi.weight", {F, D});
        }
        L.w_out = load(p + "1.DenseReluDense.wo.weight", {D, F});
    }
}

void T5Model::forward(const std::int32_t* ids, const std::int64_t* offsets, int count, float* x) const {
    const int D = cfg_.d_model, I = cfg_.inner(), F = cfg_.d_ff, heads = cfg_.heads, d = cfg_.d_kv;
    const std::int64_t base = offsets[0], N = offsets[count] - base;
    if (N == 0) return;
    int max_len = 0;
    for (int s = 0; s < count; ++s) {
        const std::int64_t len = offsets[s + 1] - offsets[s];
        RETRO_CHECK(len >= 0 && len <= std::numeric_limits<int>::max() / 2, "sequence ", s, " has length ", len);
        max_len = std::max(max_len, static_cast<int>(len));
    }
    for (std::int64_t i = 0; i < N; ++i)
        RETRO_CHECK(ids[base + i] >= 0 && ids[base + i] < cfg_.vocab_size, "token id ", ids[base + i],
                    " outside the model's vocabulary of ", cfg_.vocab_size);
    BlasSingleThread one_blas_thread;
    const float eps = cfg_.eps;

    // Relative bias per head for every key - query offset of the longest sequence:
    // bias[h][max_len - 1 + (j - i)]; a sequence of length len reads from max_len - len on.
    const std::int64_t span = 2 * static_cast<std::int64_t>(max_len) - 1;
    const std::vector<float> bias = relative_bias_by_offset(rel_bias_, heads, cfg_.num_buckets, cfg_.max_distance, max_len);

    parallel_for(N, [&](std::int64_t r) {
        std::copy_n(embed_.data() + static_cast<std::int64_t>(ids[base + r]) * D, D, x + r * D);
    });

    const PackedLayers& P_all = packed();
    const bool row_invariant = P_all.layers[0].o.uses_avx512();
    const std::int64_t row_block = ROW_BLOCK;
    auto qkv = scratch(N * 3 * I), ctx = scratch(N * I);
    const int threads = thread_count();
    const int wi_out = cfg_.gated ? 2 * F : F;
    std::vector<std::unique_ptr<float[]>> y_buf(threads), mid_buf(threads), gate_buf(threads);
    std::vector<AttentionScratch> attention_scratch(threads);
    for (int t = 0; t < threads; ++t) {
        const std::int64_t rows = std::min(row_block, N);
        y_buf[t] = scratch(rows * D);
        mid_buf[t] = scratch(rows * wi_out);
        if (cfg_.gated) gate_buf[t] = scratch(rows * F);
    }
    for (std::size_t l = 0; l < layers_.size(); ++l) {
        const Layer& L = layers_[l];
        const PackedLayers::Layer& P = P_all.layers[l];
        // (A) QKV = RMS(X)·g0 · Wqkv^T
        parallel_row_blocks(N, row_block, row_invariant, [&](std::int64_t r0, std::int64_t rows, int thread) {
            float* y = y_buf[thread].get();
            rms_norm_rows(x + r0 * D, y, rows, D, L.ln0.data(), eps);
            P.qkv.apply(y, rows, qkv.get() + r0 * 3 * I);
        });
        // (B) per (sequence, head): ctx = softmax(Q K^T + bias) V over the sequence's tokens.
        parallel_ranges(static_cast<std::int64_t>(count) * heads, [&](std::int64_t t0, std::int64_t t1, int thread) {
            for (std::int64_t t = t0; t < t1; ++t) {
                const std::int64_t s = t / heads, h = t % heads;
                const int len = static_cast<int>(offsets[s + 1] - offsets[s]);
                const float* q = qkv.get() + (offsets[s] - base) * 3 * I + h * d;
                bert_attention_head(q, q + I, q + 2 * I, 3 * I, len, d, 1.0f, ctx.get() + (offsets[s] - base) * I + h * d, I,
                                    attention_scratch[thread], bias.data() + h * span + (max_len - len));
            }
        });
        // (C) X += ctx·Wo^T;  X += wo·ff(RMS(X)·g1), per row block.
        parallel_row_blocks(N, row_block, row_invariant, [&](std::int64_t r0, std::int64_t rows, int thread) {
            float* y = y_buf[thread].get();
            float* mid = mid_buf[thread].get();
            float* gate = gate_buf[thread].get();
            float* xb = x + r0 * D;
            P.o.apply(ctx.get() + r0 * I, rows, y);
            add_rows(xb, y, rows * D);
            rms_norm_rows(xb, y, rows, D, L.ln1.data(), eps);
            const bool erf_tile = !cfg_.gated && cfg_.act == Activation::GELU_ERF;
            P.wi.apply(y, rows, mid, erf_tile ? nn::LinearEpilogue::GELU_ERF : nn::LinearEpilogue::NONE);
            if (cfg_.gated) {
                gate_rows(mid, rows, F, cfg_.act, gate);
                P.wo.apply(gate, rows, y);
            } else {
                if (!erf_tile)   // row by row: modernbert_model.cpp says why
                    for (std::int64_t r = 0; r < rows; ++r) activation_inplace(mid + r * F, F, cfg_.act);
                P.wo.apply(mid, rows, y);
            }
            add_rows(xb, y, rows * D);
        });
    }
    parallel_ranges(N, [&](std::int64_t begin, std::int64_t end, int) {
        rms_norm_rows(x + begin * D, x + begin * D, end - begin, D, final_ln_.data(), eps);
    });
}

template <typename Pool>
void T5Model::forward_pool(const std::int32_t* ids, const std::int64_t* offsets, int count, float* out, Pool pool) const {
    const int D = cfg_.d_model;
    auto hidden = scratch((offsets[count] - offsets[0]) * D);
    forward(ids, offsets, count, hidden.get());
    parallel_for(count, [&](std::int64_t s) {
        pool(hidden.get() + (offsets[s] - offsets[0]) * D, offsets[s + 1] - offsets[s], D, out + s * D);
    });
}

void T5Model::forward_mean(const std::int32_t* ids, const std::int64_t* offsets, int count, float* out) const {
    forward_pool(ids, offsets, count, out, mean_pool_rows);
}

void T5Model::forward_max(const std::int32_t* ids, const std::int64_t* offsets, int count, float* out) const {
    forward_pool(ids, offsets, count, out, [](const float* rows, std::int64_t len, int D, float* o) {
        std::fill(o, o + D, -std::numeric_limits<float>::infinity());
        for (std::int64_t r = 0; r < len; ++r)
            for (int j = 0; j < D; ++j) o[j] = std::max(o[j], rows[r * D + j]);
    });
}

}  // namespace retro
