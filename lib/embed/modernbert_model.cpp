// ModernBERT inside BertModel (bert_model.h; Warner et al. 2024, "Smarter, Better, Faster, Longer"; transformers'
// ModernBertModel, 5.x): its config, its tensors and its forward on the CPU,
//   x = LN_emb(tok[id]);  per layer l:  x += Wo·attn(rope(Wqkv·LN_attn(x)))     (layer 0: no LN_attn)
//                                       x += Wo'·(act(u) ⊙ g),  [u | g] = Wi·LN_mlp(x)
//   out = LN_final(x)
// attn is softmax(q·k/√d) v over the sequence, restricted on the local layers to |i - j| <= local_attention / 2
// (transformers' sliding_window_bidirectional_overlay: distance <= sliding_window); rope rotates each head's halves
// (x1, x2) -> (x1·cos - x2·sin, x2·cos + x1·sin) at angle position · θ^(-2k/d), θ the global or the local layers'.
// Positions count from 0 in every sequence (the packed rows of one sequence), as HF's with right padding.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/blas_threads.h"
#include "core/error.h"
#include "core/threads.h"
#include "embed/activation.h"
#include "embed/bert_attention.h"
#include "embed/bert_model_internal.h"
#include "embed/layer_norm.h"
#include "embed/pooled_attention.h"
#include "embed/row_blocks.h"

namespace retro {

namespace {

// A local layer's sequence longer than this many windows goes through banded_attention_head: below it the fused
// kernel over the whole (short) sequence costs less than the band's GEMMs.
constexpr int kBandFrom = 4;

// One head of a local layer over a sequence much longer than its window: each block of query rows against its band of
// keys (|i - j| <= w), two GEMMs around a row softmax — O(len · w) work and scratch, where the masked path below
// (bert_attention_head with the window as a bias) computes every score, O(len²). Scores are q·k · scale as HF's eager
// attention; the softmax is exact (std::exp) over the window, zero outside.
void banded_attention_head(const float* q, const float* k, const float* v, std::int64_t ld, int len, int d, float scale, int w,
                           float* ctx, std::int64_t ldc, std::vector<float>& scores) {
    constexpr int kBlock = 64;
    for (int i0 = 0; i0 < len; i0 += kBlock) {
        const int i1 = std::min(len, i0 + kBlock), k0 = std::max(0, i0 - w), k1 = std::min(len, i1 + w);
        const int rows = i1 - i0, cols = k1 - k0;
        scores.resize(static_cast<std::size_t>(rows) * cols);
        float* sc = scores.data();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, cols, d, scale, q + i0 * ld, static_cast<int>(ld), k + k0 * ld,
                    static_cast<int>(ld), 0.0f, sc, cols);
        for (int r = 0; r < rows; ++r) {
            const int i = i0 + r, lo = std::max(k0, i - w) - k0, hi = std::min(k1, i + w + 1) - k0;   // the row's window
            float* row = sc + static_cast<std::size_t>(r) * cols;
            float m = -std::numeric_limits<float>::infinity();
            for (int j = lo; j < hi; ++j) m = std::max(m, row[j]);
            double sum = 0;
            for (int j = lo; j < hi; ++j) sum += (row[j] = std::exp(row[j] - m));
            const float inv = static_cast<float>(1.0 / sum);
            for (int j = 0; j < cols; ++j) row[j] = j >= lo && j < hi ? row[j] * inv : 0.0f;
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, d, cols, 1.0f, sc, cols, v + k0 * ld, static_cast<int>(ld),
                    0.0f, ctx + i0 * ldc, static_cast<int>(ldc));
    }
}

}  // namespace

namespace bert_detail {

void modernbert_config_read(const std::string& path, const nlohmann::json& j, BertConfig& c) {
    const auto flag = [&](const char* key, bool& out) {
        if (j.contains(key) && j[key].is_boolean()) out = j[key].get<bool>();
    };
    c.type_vocab = 0;
    if (!j.contains("max_position_embeddings")) c.max_position = 8192;
    c.layer_norm_eps = 1e-5f;
    if (j.contains("norm_eps") && j["norm_eps"].is_number()) c.layer_norm_eps = j["norm_eps"].get<float>();
    c.hidden_act = "gelu";
    if (j.contains("hidden_activation") && j["hidden_activation"].is_string()) c.hidden_act = j["hidden_activation"].get<std::string>();
    flag("norm_bias", c.norm_bias);
    flag("attention_bias", c.attention_bias);
    flag("mlp_bias", c.mlp_bias);
    std::int64_t local = 128;
    if (j.contains("local_attention") && j["local_attention"].is_number_integer()) local = j["local_attention"].get<std::int64_t>();
    if (local < 2 || local > (std::int64_t(1) << 30))
        user_error_in(path, cat("local_attention is ", local, ": ModernBERT's window needs at least 2 tokens"), "give the checkpoint's config.json");
    c.sliding_window = static_cast<int>(local / 2);
    // which layers attend globally: transformers 5's layer_types, else global_attn_every_n_layers (layer i % n == 0)
    c.layer_global.assign(static_cast<std::size_t>(c.layers), 0);
    if (j.contains("layer_types") && !j["layer_types"].is_null()) {
        const nlohmann::json& t = j["layer_types"];
        if (!t.is_array() || t.size() != static_cast<std::size_t>(c.layers))
            user_error_in(path, cat("layer_types is not a list of ", c.layers, " layer types (num_hidden_layers)"), "give the checkpoint's config.json");
        for (std::size_t i = 0; i < t.size(); ++i) {
            if (t[i] == "full_attention") c.layer_global[i] = 1;
            else if (t[i] != "sliding_attention")
                user_error_in(path, "layer_types holds " + t[i].dump() + " (full_attention or sliding_attention)", "give the checkpoint's config.json");
        }
    } else {
        std::int64_t every = 3;
        if (j.contains("global_attn_every_n_layers") && j["global_attn_every_n_layers"].is_number_integer())
            every = j["global_attn_every_n_layers"].get<std::int64_t>();
        if (every < 1) user_error_in(path, cat("global_attn_every_n_layers is ", every), "give the checkpoint's config.json");
        for (int i = 0; i < c.layers; ++i) c.layer_global[static_cast<std::size_t>(i)] = i % every == 0;
    }
    // rotary bases: transformers 5's rope_parameters per layer type, else 4.x's global_rope_theta / local_rope_theta
    // (a null local one: the global one, as 4.x's attention took it)
    if (j.contains("rope_scaling") && !j["rope_scaling"].is_null())
        user_error_in(path, "has rope_scaling " + j["rope_scaling"].dump().substr(0, 80) + ", which the bert embedder does not apply",
                      "use a checkpoint with plain rotary positions");
    if (j.contains("global_rope_theta") && j["global_rope_theta"].is_number()) c.rope_theta_global = j["global_rope_theta"].get<double>();
    if (j.contains("local_rope_theta")) {
        if (j["local_rope_theta"].is_number()) c.rope_theta_local = j["local_rope_theta"].get<double>();
        else if (j["local_rope_theta"].is_null()) c.rope_theta_local = c.rope_theta_global;
    }
    if (j.contains("rope_parameters") && j["rope_parameters"].is_object())
        for (const auto& [type, theta] : {std::pair<const char*, double*>{"full_attention", &c.rope_theta_global},
                                          std::pair<const char*, double*>{"sliding_attention", &c.rope_theta_local}}) {
            const nlohmann::json& r = j["rope_parameters"];
            if (!r.contains(type) || !r[type].is_object()) continue;
            if (r[type].contains("rope_type") && r[type]["rope_type"] != "default")
                user_error_in(path, std::string("rope_parameters.") + type + ".rope_type is " + r[type]["rope_type"].dump() +
                                        ", which the bert embedder does not apply",
                              "use a checkpoint with plain rotary positions (rope_type default)");
            if (r[type].contains("rope_theta") && r[type]["rope_theta"].is_number()) *theta = r[type]["rope_theta"].get<double>();
        }
    if (!(c.rope_theta_global > 1.0) || !(c.rope_theta_local > 1.0))
        user_error_in(path, cat("has rotary bases ", c.rope_theta_global, " and ", c.rope_theta_local, " (each must be above 1)"),
                      "give the checkpoint's config.json");
    if (c.heads > 0 && (c.hidden / c.heads) % 2 != 0)
        user_error_in(path, cat("has heads of ", c.hidden / c.heads, " dimensions: rotary positions need an even head size"),
                      "give the checkpoint's config.json");
}

}  // namespace bert_detail

void BertModel::load_modernbert(const CheckpointWeights& st, const std::string& prefix) {
    using bert_detail::load;
    const std::int64_t H = cfg_.hidden, I = cfg_.intermediate;
    const auto zeros = [](std::int64_t n) { return std::vector<float>(static_cast<std::size_t>(n), 0.0f); };
    // a LayerNorm's weight, and its bias where norm_bias says the checkpoint has one (zeros otherwise)
    const auto norm = [&](const std::string& name, std::vector<float>& g, std::vector<float>& b) {
        g = load(st, prefix, name + ".weight", {H});
        b = cfg_.norm_bias ? load(st, prefix, name + ".bias", {H}) : zeros(H);
    };
    const auto linear = [&](const std::string& name, std::int64_t out, std::int64_t in, bool bias, std::vector<float>& w,
                            std::vector<float>& b) {
        w = load(st, prefix, name + ".weight", {out, in});
        b = bias ? load(st, prefix, name + ".bias", {out}) : zeros(out);
    };
    word_ = load(st, prefix, "embeddings.tok_embeddings.weight", {cfg_.vocab_size, H});
    norm("embeddings.norm", emb_ln_g_, emb_ln_b_);
    norm("final_norm", final_ln_g_, final_ln_b_);
    type_ = zeros(H);
    layers_.resize(static_cast<std::size_t>(cfg_.layers));
    for (int l = 0; l < cfg_.layers; ++l) {
        const std::string p = "layers." + std::to_string(l) + ".";
        Layer& L = layers_[static_cast<std::size_t>(l)];
        if (l > 0) norm(p + "attn_norm", L.ln1_g, L.ln1_b);   // layer 0 attends to the embeddings' norm as it is
        linear(p + "attn.Wqkv", 3 * H, H, cfg_.attention_bias, L.w_qkv, L.b_qkv);
        linear(p + "attn.Wo", H, H, cfg_.attention_bias, L.w_o, L.b_o);
        norm(p + "mlp_norm", L.ln2_g, L.ln2_b);
        linear(p + "mlp.Wi", 2 * I, H, cfg_.mlp_bias, L.w_1, L.b_1);
        linear(p + "mlp.Wo", H, I, cfg_.mlp_bias, L.w_2, L.b_2);
    }
}

void BertModel::forward_modernbert(const std::int32_t* ids, const std::int64_t* offsets, int count, float* x,
                                   bool first_rows_only) const {
    using bert_detail::scratch;
    const int H = cfg_.hidden, I = cfg_.intermediate, heads = cfg_.heads, d = H / heads, half = d / 2;
    const std::int64_t base = offsets[0], N = offsets[count] - offsets[0];
    if (N == 0) return;
    const int max_len = checked_batch(ids, offsets, count);
    BlasSingleThread one_blas_thread;
    const float eps = cfg_.layer_norm_eps;
    Activation act = Activation::GELU_ERF;
    activation_from_name(cfg_.hidden_act, act);   // checked by bert_config_read

    // embeddings: LayerNorm of the token's row (no positions: they enter through the rotation)
    parallel_ranges(N, [&](std::int64_t r0, std::int64_t r1, int) {
        for (std::int64_t r = r0; r < r1; ++r) {
            float* row = x + r * H;
            std::memcpy(row, word_.data() + static_cast<std::int64_t>(ids[base + r]) * H, sizeof(float) * static_cast<std::size_t>(H));
            add_layer_norm_rows(row, nullptr, 1, H, emb_ln_g_.data(), emb_ln_b_.data(), eps);
        }
    });

    // cos / sin of every position and frequency, per base (transformers' float32 inv_freq and angle)
    const auto rotary_table = [&](double theta, std::vector<float>& cs, std::vector<float>& sn) {
        cs.resize(static_cast<std::size_t>(max_len) * half);
        sn.resize(cs.size());
        for (int k = 0; k < half; ++k) {
            const float inv = 1.0f / std::pow(static_cast<float>(theta), static_cast<float>(2 * k) / static_cast<float>(d));
            for (int p = 0; p < max_len; ++p) {
                const float angle = static_cast<float>(p) * inv;
                cs[static_cast<std::size_t>(p) * half + k] = static_cast<float>(std::cos(static_cast<double>(angle)));
                sn[static_cast<std::size_t>(p) * half + k] = static_cast<float>(std::sin(static_cast<double>(angle)));
            }
        }
    };
    std::vector<float> cos_global, sin_global, cos_local, sin_local;
    rotary_table(cfg_.rope_theta_global, cos_global, sin_global);
    rotary_table(cfg_.rope_theta_local, cos_local, sin_local);
    // the local layers' window as an additive bias by offset j - i (bert_attention.h): 0 within it, a large negative
    // number outside (the kernels' exponent clamps it to a weight of ~1e-38, nothing beside the diagonal's 1)
    const std::int64_t span = 2 * static_cast<std::int64_t>(max_len) - 1;
    std::vector<float> window(static_cast<std::size_t>(span));
    for (std::int64_t o = -(max_len - 1); o <= max_len - 1; ++o)
        window[static_cast<std::size_t>(max_len - 1 + o)] = std::llabs(o) <= cfg_.sliding_window ? 0.0f : -1e30f;

    const PackedLayers& packed_layers = packed();
    auto h = scratch(N * H), qkv = scratch(N * 3 * H), ctx = scratch(N * H);
    const int threads = thread_count();
    // Rows spread over the threads in blocks (row_blocks.h: no row's bits depend on the thread count), as BertModel's
    // phases A and C: a block's activations stay near the core.
    constexpr std::int64_t kRowBlock = 192;
    const bool row_invariant = packed_layers.layers[0].qkv.uses_avx512();
    std::vector<std::unique_ptr<float[]>> y_buf(static_cast<std::size_t>(threads)), g_buf(static_cast<std::size_t>(threads)),
        m_buf(static_cast<std::size_t>(threads));
    for (int t = 0; t < threads; ++t) {
        const std::int64_t rows = std::min(kRowBlock, N);
        y_buf[static_cast<std::size_t>(t)] = scratch(rows * H);
        g_buf[static_cast<std::size_t>(t)] = scratch(rows * 2 * I);
        m_buf[static_cast<std::size_t>(t)] = scratch(rows * I);
    }
    std::vector<AttentionScratch> attention_scratch(static_cast<std::size_t>(threads));
    std::vector<std::vector<float>> band_scratch(static_cast<std::size_t>(threads));
    const float scale = 1.0f / std::sqrt(static_cast<float>(d));
    // each packed row's position in its sequence
    std::vector<std::int32_t> position(static_cast<std::size_t>(N));
    for (int s = 0; s < count; ++s)
        for (std::int64_t r = offsets[s]; r < offsets[s + 1]; ++r) position[static_cast<std::size_t>(r - base)] = static_cast<std::int32_t>(r - offsets[s]);

    // first_rows_only (CLS pooling: gte-modernbert): the last layer's queries, output projection and feed-forward for
    // each non-empty sequence's first row alone (position 0: a local layer's window holds keys 0 .. sliding_window)
    PooledRows first, first_local;   // a local layer's: keys cut at the window
    std::unique_ptr<float[]> xs;
    if (first_rows_only) {
        first = first_local = pooled_first_rows(offsets, count);
        for (auto& k : first_local.key_count) k = std::min<std::int64_t>(k, cfg_.sliding_window + 1);
        xs = scratch(first.size() * H);
    }
    for (std::size_t l = 0; l < layers_.size(); ++l) {
        const Layer& L = layers_[l];
        const PackedLayers::Layer& P = packed_layers.layers[l];
        const bool global = cfg_.layer_global[l] != 0;
        const bool pooled_only = xs && l + 1 == layers_.size();
        const std::vector<float>& cs = global ? cos_global : cos_local;
        const std::vector<float>& sn = global ? sin_global : sin_local;
        // qkv = Wqkv · LN_attn(x) + b, then q and k rotated by their row's position
        parallel_row_blocks(N, kRowBlock, row_invariant, [&](std::int64_t r0, std::int64_t rows, int) {
            const std::int64_t r1 = r0 + rows;
            const float* in = x + r0 * H;
            if (l > 0) {
                layer_norm_rows(x + r0 * H, h.get() + r0 * H, rows, H, L.ln1_g.data(), L.ln1_b.data(), eps);
                in = h.get() + r0 * H;
            }
            P.qkv.apply(in, rows, qkv.get() + r0 * 3 * H);
            for (std::int64_t r = r0; r < r1; ++r) {
                const float* c = cs.data() + static_cast<std::size_t>(position[static_cast<std::size_t>(r)]) * half;
                const float* sv = sn.data() + static_cast<std::size_t>(position[static_cast<std::size_t>(r)]) * half;
                for (int part = 0; part < 2; ++part)   // q, then k
                    for (int hd = 0; hd < heads; ++hd) {
                        float* v = qkv.get() + r * 3 * H + part * H + hd * d;
                        for (int k = 0; k < half; ++k) {
                            const float x1 = v[k], x2 = v[k + half];
                            v[k] = x1 * c[k] - x2 * sv[k];
                            v[k + half] = x2 * c[k] + x1 * sv[k];
                        }
                    }
            }
        });
        if (pooled_only) {   // the first rows' queries alone: ctx [first.size(), H]
            pooled_attention(qkv.get(), H, heads, scale, global ? first : first_local, ctx.get());
        } else {
            // attention per (sequence, head), the local layers within the window: as a band of keys where the sequence
            // is far longer than the window, else the fused kernel with the window as a bias
            parallel_ranges(static_cast<std::int64_t>(count) * heads, [&](std::int64_t t0, std::int64_t t1, int thread) {
                for (std::int64_t t = t0; t < t1; ++t) {
                    const std::int64_t s = t / heads, hd = t % heads;
                    const int len = static_cast<int>(offsets[s + 1] - offsets[s]);
                    const float* q = qkv.get() + (offsets[s] - base) * 3 * H + hd * d;
                    float* out = ctx.get() + (offsets[s] - base) * H + hd * d;
                    const bool windowed = !global && len - 1 > cfg_.sliding_window;
                    if (windowed && len > kBandFrom * cfg_.sliding_window) {
                        banded_attention_head(q, q + H, q + 2 * H, 3 * H, len, d, scale, cfg_.sliding_window, out, H,
                                              band_scratch[static_cast<std::size_t>(thread)]);
                        continue;
                    }
                    bert_attention_head(q, q + H, q + 2 * H, 3 * H, len, d, scale, out, H, attention_scratch[static_cast<std::size_t>(thread)],
                                        windowed ? window.data() + (max_len - len) : nullptr);
                }
            });
        }
        // rows xr [n, H] with their ctx: x += Wo·ctx + b;  x += Wo'·(act(u) ⊙ g) + b', [u | g] = Wi·LN_mlp(x) + bi,
        // per row block
        const auto dense = [&](float* xr, std::int64_t n) {
            parallel_row_blocks(n, kRowBlock, row_invariant, [&](std::int64_t r0, std::int64_t rows, int thread) {
                float* y = y_buf[static_cast<std::size_t>(thread)].get();
                float* g = g_buf[static_cast<std::size_t>(thread)].get();
                float* m = m_buf[static_cast<std::size_t>(thread)].get();
                float* xb = xr + r0 * H;
                P.o.apply(ctx.get() + r0 * H, rows, y);
                for (std::int64_t i = 0; i < rows * H; ++i) xb[i] += y[i];
                layer_norm_rows(xb, y, rows, H, L.ln2_g.data(), L.ln2_b.data(), eps);
                P.ffn1.apply(y, rows, g);
                for (std::int64_t r = 0; r < rows; ++r) std::memcpy(m + r * I, g + r * 2 * I, sizeof(float) * static_cast<std::size_t>(I));
                // row by row: a row's bits then depend on neither the row block it is in nor the batch (a vectorised
                // loop's remainder is computed in other bits than its body; over rows * I at once, ModernBERT's
                // embeddings differed at 3 threads and with another --batch: a helper's campaign, session 56)
                for (std::int64_t r = 0; r < rows; ++r) activation_inplace(m + r * I, I, act);
                for (std::int64_t r = 0; r < rows; ++r)
                    for (int k = 0; k < I; ++k) m[r * I + k] *= g[r * 2 * I + I + k];
                P.ffn2.apply(m, rows, y);
                for (std::int64_t i = 0; i < rows * H; ++i) xb[i] += y[i];
            });
        };
        if (pooled_only) pooled_rows_apply(x, H, first, xs.get(), dense);
        else dense(x, N);
    }
    parallel_ranges(N, [&](std::int64_t r0, std::int64_t r1, int) {
        add_layer_norm_rows(x + r0 * H, nullptr, r1 - r0, H, final_ln_g_.data(), final_ln_b_.data(), eps);
    });
}

}  // namespace retro
