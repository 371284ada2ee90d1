// Implementation of bert_model.h. A layer runs in three phases: (A) fused QKV projection over row
// blocks, (B) attention per (sequence, head) (bert_attention.h: fused AVX-512 kernels), (C) output projection +
// residual + LayerNorm + FFN + residual + LayerNorm fused per row block, so each block's
// activations stay in cache. The dense layers are nn::PackedLinear (weights packed once on first
// use, an AVX-512 kernel, or single-threaded OpenBLAS without AVX-512), their rows spread over the threads in blocks
// (row_blocks.h) so that no row's bits depend on the thread count.
#include "embed/bert_model.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <bit>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>

#include "core/blas_threads.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/safetensors.h"
#include "core/threads.h"
#include "embed/activation.h"
#include "embed/bert_attention.h"
#include "embed/checkpoint_tensor.h"
#include "embed/checkpoint_weights.h"
#include "embed/bert_model_internal.h"
#include "embed/layer_norm.h"
#include "embed/packed_batches.h"
#include "embed/pooled_attention.h"
#include "embed/relative_position.h"
#include "embed/row_blocks.h"
#include "nn/fast_math.h"
#include "nn/packed_linear.h"

namespace retro {

namespace {

namespace fs = std::filesystem;

// Rows per fused block in phases A and C: a block's activations (mid: rows x intermediate) stay near the core. The
// OpenBLAS fallback takes blocks of at most 128 rows (row_blocks.h: its packing of the weights on every call costs
// nothing measurable there against 1,024-row blocks; 64-row blocks ~10 %).
constexpr std::int64_t ROW_BLOCK = 192;

using bert_detail::scratch;
using bert_detail::load;

}  // namespace

namespace bert_detail {

std::vector<float> load(const CheckpointWeights& st, const std::string& prefix, const std::string& name,
                        const std::vector<std::int64_t>& shape) {
    std::string full = prefix + name;
    if (!st.has(full)) {
        std::string alt = full;
        auto swap_suffix = [&](const std::string& from, const std::string& to) {
            if (alt.size() >= from.size() && alt.compare(alt.size() - from.size(), from.size(), from) == 0)
                alt = alt.substr(0, alt.size() - from.size()) + to;
        };
        if (name.find("LayerNorm") != std::string::npos) {
            swap_suffix(".weight", ".gamma");
            swap_suffix(".bias", ".beta");
        }
        if (st.has(alt)) full = alt;
    }
    if (!st.has(full))
        user_error_in(st.path(), "has no tensor '" + prefix + name + "'",
                      "give a BERT checkpoint saved by transformers (BertModel or BertForXxx)");
    return checkpoint_tensor_f32(st, full, shape);
}

}  // namespace bert_detail

const BertModel::PackedLayers& BertModel::packed() const {
    // Built aside and moved in: if packing throws (out of memory), call_once lets the next call retry
    // from scratch instead of appending to a partial list.
    std::call_once(packed_->once, [&] {
        const int H = cfg_.hidden, I = cfg_.intermediate;
        std::vector<PackedLayers::Layer> built;
        built.reserve(layers_.size());
        for (const Layer& L : layers_)
            built.push_back({nn::PackedLinear(L.w_qkv.data(), L.b_qkv.data(), 3 * H, H),
                             nn::PackedLinear(L.w_o.data(), L.b_o.data(), H, H),
                             nn::PackedLinear(L.w_1.data(), L.b_1.data(), cfg_.modernbert ? 2 * I : I, H),
                             nn::PackedLinear(L.w_2.data(), L.b_2.data(), H, I)});
        packed_->layers = std::move(built);
    });
    return *packed_;
}

BertConfig bert_config_read(const std::string& path) {
    if (!fs::exists(path))
        user_error_in(path, "missing (a BERT model folder needs config.json)",
                      "copy the checkpoint's config.json beside model.safetensors");
    nlohmann::json j;
    try {
        std::ifstream in(path);
        j = nlohmann::json::parse(in);
    } catch (const std::exception& e) {
        user_error_in(path, std::string("is not valid JSON: ") + e.what(), "restore the checkpoint's config.json");
    }
    BertConfig c;
    // another architecture's config (roberta, camembert, deberta: other positions, attention or tokenizer) would
    // load as BERT where its tensor names happen to agree, and embed wrongly
    const std::string model_type = j.is_object() && j.contains("model_type") && j["model_type"].is_string()
                                       ? j["model_type"].get<std::string>() : std::string("bert");
    // ELECTRA's encoder is BERT's under BERT's names, where its embeddings need no projection to the hidden size
    if (model_type != "bert" && model_type != "distilbert" && model_type != "electra" && model_type != "mpnet" &&
        model_type != "roberta" && model_type != "xlm-roberta" && model_type != "modernbert")
        user_error_in(path, "is a \"" + model_type + "\" checkpoint, not BERT, DistilBERT, ELECTRA, MPNet, RoBERTa, XLM-RoBERTa or ModernBERT",
                      "give a BERT-family checkpoint (model_type bert, distilbert, electra, mpnet, roberta, xlm-roberta or modernbert), or a T5 one with --embedder t5");
    if (model_type == "electra" && j.contains("embedding_size") && j.contains("hidden_size") && j["embedding_size"] != j["hidden_size"])
        user_error_in(path, "is an ELECTRA checkpoint whose embedding_size " + j["embedding_size"].dump() + " is not its hidden_size " +
                                j["hidden_size"].dump() + " (an embeddings_project layer the bert embedder does not apply)",
                      "use ELECTRA base or large, or a BERT checkpoint");
    c.distilbert = model_type == "distilbert";
    c.mpnet = model_type == "mpnet";
    c.modernbert = model_type == "modernbert";
    c.model_type = model_type;
    const bool fairseq_positions = model_type == "roberta" || model_type == "xlm-roberta";
    auto get_int = [&](const char* key, int& out, bool required) {
        if (j.contains(key) && j[key].is_number_integer()) {
            const std::int64_t wide = j[key].get<std::int64_t>();   // get<int> would wrap 2^32 + 1 to 1
            out = wide > std::numeric_limits<int>::max() ? 0 : static_cast<int>(wide);
            if (out > 0) return;
        } else if (!required) {
            return;
        }
        user_error_in(path, std::string("needs a positive integer \"") + key + "\"", "give a BERT config.json");
    };
    get_int("vocab_size", c.vocab_size, true);
    get_int("max_position_embeddings", c.max_position, false);
    if (c.distilbert) {   // DistilBertConfig's names; its LayerNorms are nn.LayerNorm(eps=1e-12)
        get_int("dim", c.hidden, true);
        get_int("n_layers", c.layers, true);
        get_int("n_heads", c.heads, true);
        get_int("hidden_dim", c.intermediate, true);
        c.type_vocab = 0;
        if (j.contains("activation") && j["activation"].is_string()) c.hidden_act = j["activation"].get<std::string>();
    } else {
        get_int("hidden_size", c.hidden, true);
        get_int("num_hidden_layers", c.layers, true);
        get_int("num_attention_heads", c.heads, true);
        get_int("intermediate_size", c.intermediate, true);
        get_int("type_vocab_size", c.type_vocab, false);
        if (c.mpnet) {   // MPNetConfig: no token types; transformers' MPNetEncoder buckets relative positions into 32
            c.type_vocab = 0;
            c.relative_buckets = 32;
            get_int("relative_attention_num_buckets", c.relative_buckets, false);
            if (c.relative_buckets < 32)
                user_error_in(path, cat("relative_attention_num_buckets is ", c.relative_buckets,
                                        ": transformers' MPNet reads 32 buckets of the table"), "give an MPNet config.json");
            c.position_padding_idx = 1;   // MPNetEmbeddings.padding_idx, whatever pad_token_id says
        }
        if (fairseq_positions) {   // RobertaEmbeddings.padding_idx = pad_token_id (1 in every RoBERTa and XLM-R)
            c.position_padding_idx = 1;
            std::int64_t pad = 1;
            if (j.contains("pad_token_id") && j["pad_token_id"].is_number_integer()) pad = j["pad_token_id"].get<std::int64_t>();
            if (pad < 0 || pad >= c.vocab_size)
                user_error_in(path, cat("pad_token_id is ", pad, ": RoBERTa's positions follow it, a token id below vocab_size ", c.vocab_size),
                              "give the checkpoint's config.json");
            c.position_padding_idx = static_cast<int>(pad);
        }
        if (c.position_padding_idx >= 0 && c.max_tokens() < 1)
            user_error_in(path, cat("max_position_embeddings is ", c.max_position, ": the positions start at ", c.position_padding_idx + 1),
                          "give the checkpoint's config.json");
        if (j.contains("layer_norm_eps") && j["layer_norm_eps"].is_number()) c.layer_norm_eps = j["layer_norm_eps"].get<float>();
        if (j.contains("hidden_act") && j["hidden_act"].is_string()) c.hidden_act = j["hidden_act"].get<std::string>();
        if (c.modernbert) bert_detail::modernbert_config_read(path, j, c);
    }
    Activation act;
    if (!activation_from_name(c.hidden_act, act))
        user_error_in(path, "hidden_act \"" + c.hidden_act + "\" is not supported",
                      "use a checkpoint with gelu, gelu_new or relu");
    if (!c.modernbert && j.contains("position_embedding_type") && j["position_embedding_type"] != "absolute")
        user_error_in(path, "position_embedding_type " + j["position_embedding_type"].dump() + " is not supported",
                      "use a checkpoint with absolute position embeddings");
    if (c.hidden % c.heads != 0)
        user_error_in(path, cat("hidden_size ", c.hidden, " is not a multiple of num_attention_heads ", c.heads));
    return c;
}

void bert_position_ids(const BertConfig& config, const std::int32_t* ids, std::int64_t len, std::int32_t* positions) {
    const int pad = config.position_padding_idx;
    std::int32_t seen = 0;
    for (std::int64_t t = 0; t < len; ++t)
        positions[t] = pad < 0 ? static_cast<std::int32_t>(t) : ids[t] == pad ? pad : pad + ++seen;
}

BertModel::BertModel(const std::string& dir) : packed_(std::make_shared<PackedLayers>()) {
    cfg_ = bert_config_read((fs::path(dir) / "config.json").string());
    CheckpointWeights st(dir, "a BERT model folder");
    const std::string& st_path = st.path();
    // The prefix in front of "embeddings.word_embeddings.weight": "" (BertModel), "bert." (BertForXxx), ...
    std::string prefix;
    const std::string key = cfg_.modernbert ? "embeddings.tok_embeddings.weight" : "embeddings.word_embeddings.weight";
    const bool found = checkpoint_prefix(st, key, prefix);
    if (!found)
        user_error_in(st_path, "has no tensor '" + key + "'", "give a BERT checkpoint saved by transformers");
    if (cfg_.modernbert) {
        load_modernbert(st, prefix);
        return;
    }
    const std::int64_t H = cfg_.hidden, I = cfg_.intermediate;
    word_ = load(st, prefix, "embeddings.word_embeddings.weight", {cfg_.vocab_size, H});
    pos_ = load(st, prefix, "embeddings.position_embeddings.weight", {cfg_.max_position, H});
    // DistilBERT and MPNet have no token type embeddings: type 0's row is zeros
    type_ = cfg_.type_vocab == 0 ? std::vector<float>(static_cast<std::size_t>(H), 0.0f)
                                 : load(st, prefix, "embeddings.token_type_embeddings.weight", {cfg_.type_vocab, H});
    emb_ln_g_ = load(st, prefix, "embeddings.LayerNorm.weight", {H});
    emb_ln_b_ = load(st, prefix, "embeddings.LayerNorm.bias", {H});
    // a layer's tensors, BERT's names and DistilBERT's (transformers' modeling_distilbert.TransformerBlock)
    struct Names {
        const char *layer, *q, *k, *v, *out, *ln1, *ff1, *ff2, *ln2;
    };
    static constexpr Names kBert{"encoder.layer.", "attention.self.query", "attention.self.key", "attention.self.value",
                                 "attention.output.dense", "attention.output.LayerNorm", "intermediate.dense",
                                 "output.dense", "output.LayerNorm"};
    static constexpr Names kDistil{"transformer.layer.", "attention.q_lin", "attention.k_lin", "attention.v_lin",
                                   "attention.out_lin", "sa_layer_norm", "ffn.lin1", "ffn.lin2", "output_layer_norm"};
    static constexpr Names kMpnet{"encoder.layer.", "attention.attn.q", "attention.attn.k", "attention.attn.v",
                                  "attention.attn.o", "attention.LayerNorm", "intermediate.dense", "output.dense",
                                  "output.LayerNorm"};
    const Names& n = cfg_.distilbert ? kDistil : cfg_.mpnet ? kMpnet : kBert;
    if (cfg_.mpnet) rel_bias_ = load(st, prefix, "encoder.relative_attention_bias.weight", {cfg_.relative_buckets, cfg_.heads});
    layers_.resize(cfg_.layers);
    for (int l = 0; l < cfg_.layers; ++l) {
        const std::string p = n.layer + std::to_string(l) + ".";
        Layer& L = layers_[l];
        for (const char* qkv : {n.q, n.k, n.v}) {
            auto w = load(st, prefix, p + qkv + ".weight", {H, H});
            auto b = load(st, prefix, p + qkv + ".bias", {H});
            L.w_qkv.insert(L.w_qkv.end(), w.begin(), w.end());
            L.b_qkv.insert(L.b_qkv.end(), b.begin(), b.end());
        }
        L.w_o = load(st, prefix, p + n.out + ".weight", {H, H});
        L.b_o = load(st, prefix, p + n.out + ".bias", {H});
        L.ln1_g = load(st, prefix, p + n.ln1 + ".weight", {H});
        L.ln1_b = load(st, prefix, p + n.ln1 + ".bias", {H});
        L.w_1 = load(st, prefix, p + n.ff1 + ".weight", {I, H});
        L.b_1 = load(st, prefix, p + n.ff1 + ".bias", {I});
        L.w_2 = load(st, prefix, p + n.ff2 + ".weight", {H, I});
        L.b_2 = load(st, prefix, p + n.ff2 + ".bias", {H});
        L.ln2_g = load(st, prefix, p + n.ln2 + ".weight", {H});
        L.ln2_b = load(st, prefix, p + n.ln2 + ".bias", {H});
    }
}

int BertModel::checked_batch(const std::int32_t* ids, const std::int64_t* offsets, int count) const {
    int max_len = 0;
    for (int s = 0; s < count; ++s) {
        const std::int64_t len = offsets[s + 1] - offsets[s];
        RETRO_CHECK(len >= 0 && len <= cfg_.max_tokens(), "sequence ", s, " has length ", len, ", the model allows ",
                    cfg_.max_tokens());
        max_len = std::max(max_len, static_cast<int>(len));
    }
    for (std::int64_t i = offsets[0]; i < offsets[count]; ++i)
        RETRO_CHECK(ids[i] >= 0 && ids[i] < cfg_.vocab_size, "token id ", ids[i], " outside the model's vocabulary of ", cfg_.vocab_size);
    return max_len;
}

void BertModel::forward(const std::int32_t* ids, const std::int64_t* offsets, int count, float* x) const {
    forward_rows(ids, offsets, count, x, false);
}

void BertModel::forward_rows(const std::int32_t* ids, const std::int64_t* offsets, int count, float* x,
                             bool first_rows_only) const {
    if (cfg_.modernbert) {
        forward_modernbert(ids, offsets, count, x, first_rows_only);
        return;
    }
    const int H = cfg_.hidden, I = cfg_.intermediate, heads = cfg_.heads, d = H / heads;
    const std::int64_t N = offsets[count] - offsets[0];
    const std::int64_t base = offsets[0];
    if (N == 0) return;
    const int max_len = checked_batch(ids, offsets, count);
    BlasSingleThread one_blas_thread;
    const float eps = cfg_.layer_norm_eps;
    Activation act = Activation::GELU_ERF;
    activation_from_name(cfg_.hidden_act, act);   // checked by bert_config_read

    // Embeddings: word + position (bert_position_ids: from 0, or fairseq's) + token type 0, then LayerNorm.
    parallel_for(count, [&](std::int64_t s) {
        std::vector<std::int32_t> positions(static_cast<std::size_t>(offsets[s + 1] - offsets[s]));
        bert_position_ids(cfg_, ids + offsets[s], offsets[s + 1] - offsets[s], positions.data());
        for (std::int64_t r = offsets[s]; r < offsets[s + 1]; ++r) {
            float* row = x + (r - base) * H;
            const float* w = word_.data() + static_cast<std::int64_t>(ids[r]) * H;
            const float* p = pos_.data() + static_cast<std::int64_t>(positions[r - offsets[s]]) * H;
            for (int j = 0; j < H; ++j) row[j] = w[j] + p[j] + type_[j];
            add_layer_norm_rows(row, nullptr, 1, H, emb_ln_g_.data(), emb_ln_b_.data(), eps);
        }
    });

    const PackedLayers& packed_layers = packed();
    const bool row_invariant = packed_layers.layers[0].o.uses_avx512();
    const std::int64_t row_block = ROW_BLOCK;
    // The packed kernel applies the erf GELU on the tile; other activations get their own pass.
    const nn::LinearEpilogue ffn1_epilogue = act == Activation::GELU_ERF ? nn::LinearEpilogue::GELU_ERF : nn::LinearEpilogue::NONE;
    auto qkv = scratch(N * 3 * H), ctx = scratch(N * H);
    const int threads = thread_count();
    std::vector<std::unique_ptr<float[]>> y_buf(threads), mid_buf(threads);
    std::vector<AttentionScratch> attention_scratch(threads);
    for (int t = 0; t < threads; ++t) {
        std::int64_t rows = std::min(row_block, N);
        y_buf[t] = scratch(rows * H);
        mid_buf[t] = scratch(rows * I);
    }
    const float scale = 1.0f / std::sqrt(static_cast<float>(d));
    // MPNet: bias[h][max_len - 1 + (j - i)] for every offset (MPNetEncoder.compute_position_bias: 32 buckets, distance 128)
    constexpr int kMpnetBuckets = 32, kMpnetMaxDistance = 128;
    const std::int64_t span = 2 * static_cast<std::int64_t>(max_len) - 1;
    const std::vector<float> bias =
        cfg_.mpnet ? relative_bias_by_offset(rel_bias_, heads, kMpnetBuckets, kMpnetMaxDistance, max_len) : std::vector<float>();
    // first_rows_only: the last layer's queries, output projection and feed-forward for each non-empty sequence's
    // first row alone (CLS pooling reads nothing else), gathered into xs; MPNet's relative bias keeps every row
    PooledRows first;
    std::unique_ptr<float[]> xs;
    if (first_rows_only && bias.empty()) {
        first = pooled_first_rows(offsets, count);
        xs = scratch(first.size() * H);
    }
    for (std::size_t l = 0; l < layers_.size(); ++l) {
        const Layer& L = layers_[l];
        const PackedLayers::Layer& P = packed_layers.layers[l];
        const bool pooled_only = xs && l + 1 == layers_.size();
        // (A) QKV = X · Wqkv^T + b, per row block (every row: its keys and values are read)
        parallel_row_blocks(N, row_block, row_invariant, [&](std::int64_t r0, std::int64_t rows, int) {
            P.qkv.apply(x + r0 * H, rows, qkv.get() + r0 * 3 * H);
        });
        // (B) per (sequence, head): ctx = softmax(Q K^T / sqrt(d)) V over the sequence's tokens.
        if (pooled_only) {   // the first rows' queries alone: ctx [first.size(), H]
            pooled_attention(qkv.get(), H, heads, scale, first, ctx.get());
        } else {
            parallel_ranges(static_cast<std::int64_t>(count) * heads, [&](std::int64_t t0, std::int64_t t1, int thread) {
                for (std::int64_t t = t0; t < t1; ++t) {
                    std::int64_t s = t / heads, h = t % heads;
                    int len = static_cast<int>(offsets[s + 1] - offsets[s]);
                    const float* q = qkv.get() + (offsets[s] - base) * 3 * H + h * d;
                    bert_attention_head(q, q + H, q + 2 * H, 3 * H, len, d, scale, ctx.get() + (offsets[s] - base) * H + h * d,
                                        H, attention_scratch[thread], bias.empty() ? nullptr : bias.data() + h * span + (max_len - len));
                }
            });
        }
        // (C) rows xr [n, H] with their ctx: X = LN1(X + ctx·Wo^T + bo); X = LN2(X + W2·act(W1·X + b1) + b2), per row
        // block.
        const auto dense = [&](float* xr, std::int64_t n) {
            parallel_row_blocks(n, row_block, row_invariant, [&](std::int64_t r0, std::int64_t rows, int thread) {
                float* y = y_buf[thread].get();
                float* mid = mid_buf[thread].get();
                float* xb = xr + r0 * H;
                P.o.apply(ctx.get() + r0 * H, rows, y);
                add_layer_norm_rows(xb, y, rows, H, L.ln1_g.data(), L.ln1_b.data(), eps);
                P.ffn1.apply(xb, rows, mid, ffn1_epilogue);
                if (ffn1_epilogue == nn::LinearEpilogue::NONE)   // row by row: modernbert_model.cpp says why
                    for (std::int64_t r = 0; r < rows; ++r) activation_inplace(mid + r * I, I, act);
                P.ffn2.apply(mid, rows, y);
                add_layer_norm_rows(xb, y, rows, H, L.ln2_g.data(), L.ln2_b.data(), eps);
            });
        };
        if (pooled_only) pooled_rows_apply(x, H, first, xs.get(), dense);
        else dense(x, N);
    }
}

void BertModel::forward_mean(const std::int32_t* ids, const std::int64_t* offsets, int count, float* out) const {
    forward_pooled(ids, offsets, count, out, mean_pool_rows);
}

void BertModel::forward_max(const std::int32_t* ids, const std::int64_t* offsets, int count, float* out) const {
    forward_pooled(ids, offsets, count, out, max_pool_rows);
}

void BertModel::forward_pooled(const std::int32_t* ids, const std::int64_t* offsets, int count, float* out,
                               void (*pool)(const float*, std::int64_t, int, float*)) const {
    const int H = cfg_.hidden;
    const std::int64_t N = offsets[count] - offsets[0];
    auto hidden = scratch(N * H);
    forward(ids, offsets, count, hidden.get());
    parallel_for(count, [&](std::int64_t s) {
        pool(hidden.get() + (offsets[s] - offsets[0]) * H, offsets[s + 1] - offsets[s], H, out + s * H);
    });
}

void BertModel::forward_cls(const std::int32_t* ids, const std::int64_t* offsets, int count, float* out) const {
    const int H = cfg_.hidden;
    const std::int64_t N = offsets[count] - offsets[0];
    auto hidden = scratch(N * H);
    forward_rows(ids, offsets, count, hidden.get(), true);   // only each sequence's first row is read
    for (int s = 0; s < count; ++s) {
        float* row = out + static_cast<std::int64_t>(s) * H;
        if (offsets[s + 1] == offsets[s]) std::fill(row, row + H, 0.0f);   // an empty sequence: a zero row, as the mean's
        else std::copy_n(hidden.get() + (offsets[s] - offsets[0]) * H, H, row);
    }
}

}  // namespace retro
