// Implementation of bert_embedder.h: chunk ids -> text -> WordPiece -> BertModel -> mean / max / CLS -> Dense -> L2.
// Sequences are sorted by length and packed without padding, batch by batch.
#include "embed/bert_embedder.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "core/cuda_device.h"
#include "core/error.h"
#include "core/fingerprint.h"
#include "core/lfs_pointer.h"
#include "core/manifest.h"
#include "core/memory_budget.h"
#include "core/threads.h"
#include "embed/activation.h"
#include "embed/bert_attention.h"
#include "embed/checkpoint_weights.h"
#include "embed/encoder_settings.h"
#include "embed/model_folder.h"
#include "embed/packed_batches.h"
#include "embed/st_modules.h"
#include "text/utf8.h"

namespace retro {

namespace {

namespace fs = std::filesystem;

// The folder's sentence-transformers modules (modules.json: mean, max or CLS pooling, then Dense modules as LaBSE and
// distiluse-* have them; none: the mean of every token), read before the weights so that a module the embedder
// cannot follow is refused first. Since session 42 max pooling and Dense modules are applied (refused before).
StModules bert_modules(const std::string& dir) {
    if (!fs::exists(fs::path(dir) / "modules.json")) return StModules{};
    return st_modules_read(dir);   // refuses other poolings and modules itself
}

// Names the first missing model file, and checks the numeric options.
BertEmbedderOptions checked(BertEmbedderOptions o) {
    o.model_dir = embedder_model_folder("bert", o.model_dir);
    embedder_folder_kind_check("bert", o.model_dir);
    if (!fs::exists(fs::path(o.model_dir) / "config.json"))
        user_error_in((fs::path(o.model_dir) / "config.json").string(), "missing (a bert model folder needs it)",
                      "copy the checkpoint's config.json into the folder");
    CheckpointWeights::require(o.model_dir, "a bert model folder");   // or sharded, or pytorch_model.bin
    bert_tokenizer_require_files(o.model_dir);
    if (o.max_length < 3) user_error_in("--max-length", cat("is ", o.max_length, ", needs at least 3"));
    if (o.batch < 1) user_error_in("--batch", cat("is ", o.batch, ", needs at least 1"));
    if (o.device != "cpu" && o.device != "cuda") user_error_in("--device", "expected cpu or cuda, got '" + o.device + "'");
    return o;
}

}  // namespace

BertEmbedder::BertEmbedder(const BertEmbedderOptions& opts, const Tokenizer* tokenizer)
    : opts_(checked(opts)),
      tokenizer_(tokenizer),
      modules_(bert_modules(opts_.model_dir)),
      model_(opts_.model_dir),
      text_tokenizer_(opts_.model_dir, opts_.lower_case),
      fingerprint_(bert_fingerprint(opts_.model_dir, modules_)),   // the modules as read above, not read again
      tokenizer_fingerprint_(bert_tokenizer_fingerprint(opts_.model_dir, text_tokenizer_)),
      config_fingerprint_(encoder_config_fingerprint(opts_.model_dir, opts_.model_dir)) {
    const BertConfig& c = model_.config();
    if (modules_.pooling_dim && modules_.pooling_dim != c.hidden)
        user_error_in((fs::path(opts_.model_dir) / "1_Pooling/config.json").string(),
                      cat("has word_embedding_dimension ", modules_.pooling_dim, ", the encoder's hidden_size is ", c.hidden),
                      "keep the Pooling folder and the encoder from the same model");
    if (!modules_.dense.empty() && modules_.dense.front().in != c.hidden)
        user_error_in((fs::path(modules_.dense.front().dir) / "config.json").string(),
                      cat("has in_features ", modules_.dense.front().in, ", the encoder's hidden_size is ", c.hidden),
                      "keep the Dense folder and the encoder from the same model");
    if (opts_.max_length > c.max_tokens())
        user_error_in("--max-length", cat("is ", opts_.max_length, ", the model allows ", c.max_tokens(), " tokens"),
                      cat("pass --max-length ", c.max_tokens(), " or less"));
    const int tokens = text_tokenizer_.vocab_size();
    if (tokens > c.vocab_size)
        user_error_in(bert_tokenizer_file(opts_.model_dir), cat("has ", tokens, " tokens, config.json says vocab_size ", c.vocab_size),
                      "keep the tokenizer and the weights from the same checkpoint");
    if (opts_.device == "cpu") {
        // a forward's buffers (bert_model.cpp, modernbert_model.cpp): the batch's rows of x, qkv, ctx and the pre-norm
        // copy (6 H floats a token), each thread's row block of the feed-forward and its attention scratch (a block of
        // query rows' scores and the keys: bert_attention.h) — refused before the first batch, not ended by the OOM killer
        const double L = opts_.max_length, rows = static_cast<double>(opts_.batch) * L;
        const double per_thread = 192.0 * (3.0 * c.intermediate + c.hidden) +
                                  static_cast<double>(bert_attention_scratch_floats(opts_.max_length, c.hidden / c.heads));
        memory_require("--batch and --max-length", 4.0 * (rows * 6.0 * c.hidden + thread_count() * per_thread),
                       cat("a forward pass over --batch ", opts_.batch, " texts of --max-length ", opts_.max_length, " tokens"),
                       "lower --batch or --max-length");
    }
    opts_.lower_case = text_tokenizer_.lower_case() ? 1 : 0;   // XLM-R, RoBERTa: false (no such option)
    prompt_ = bert_prompt(opts_);
    if (std::string valid = prompt_; utf8_sanitize(valid) != 0)
        user_error_in("--prompt", "is not valid UTF-8 (from the command line, an index's manifest or config_sentence_transformers.json)",
                      "give the prompt as UTF-8 text");
    if (!prompt_.empty()) {
        if (modules_.present && !modules_.include_prompt)
            user_error_in((fs::path(opts_.model_dir) / "1_Pooling" / "config.json").string(),
                          "leaves the prompt's tokens out of the pool (include_prompt false), which the bert embedder does not",
                          "embed without a prompt (--prompt \"\"), or use another model");
        const std::size_t prompt_pieces = text_tokenizer_.tokenize_ids(prompt_).size();
        if (static_cast<int>(prompt_pieces) + 2 >= opts_.max_length)
            user_error_in("--prompt", cat("is ", prompt_pieces, " tokens, which leave no room for a chunk's text in --max-length ", opts_.max_length),
                          "give a shorter prompt or a larger --max-length");
    }
    if (opts_.device == "cuda") {
        if (c.mpnet)
            user_error_in("--device cuda", "the CUDA encoder has no relative-position bias; " + opts_.model_dir + " is an MPNet checkpoint",
                          "embed on the CPU (--device cpu)");
        if (c.modernbert)
            user_error_in("--device cuda", "the CUDA encoder has no rotary positions, GLU or sliding window; " + opts_.model_dir +
                                               " is a ModernBERT checkpoint",
                          "embed on the CPU (--device cpu)");
        // the CUDA encoder's feed-forward computes erf-GELU, tanh-GELU and ReLU (kernels/bert_cuda.cu)
        Activation act = Activation::GELU_ERF;
        activation_from_name(c.hidden_act, act);   // checked by bert_config_read
        if (act != Activation::GELU_ERF && act != Activation::GELU_TANH && act != Activation::RELU)
            user_error_in("--device cuda", "the CUDA encoder computes gelu, gelu_new and relu feed-forwards; " + opts_.model_dir +
                                               "'s hidden_act is " + c.hidden_act,
                          "embed on the CPU (--device cpu)");
        if (modules_.pooling == "max")
            user_error_in("--device cuda", "the CUDA encoder pools by the mean or the CLS token; " + opts_.model_dir + " pools by the max",
                          "embed on the CPU (--device cpu)");
        if (opts_.max_length > kCudaBertMaxTokens)
            user_error_in("--max-length", cat("is ", opts_.max_length, "; the CUDA encoder's attention takes at most ",
                                              kCudaBertMaxTokens, " tokens a text"),
                          cat("give --max-length ", kCudaBertMaxTokens, " or less, or embed on the CPU (--device cpu)"));
        cuda_require("--device cuda", "RetroKit", "embed on the CPU (--device cpu)");
        if constexpr (kCudaBuilt) {
            cuda_stream_ = std::make_unique<CudaStreamOwner>();
            cuda_ = CudaBert::upload(model_, cuda_stream_->get());
        }
    }
}

int BertEmbedder::dim() const { return modules_.dense.empty() ? model_.config().hidden : modules_.dense.back().out; }

void BertEmbedder::embed_ids(const std::vector<std::vector<int>>& seqs, float* out) const {
    const int H = model_.config().hidden;
    const std::size_t dense = modules_.dense.size();
    std::vector<float> a, b;   // pooled rows, then each Dense's output but the last (as the t5 embedder)
    embed_packed_batches(seqs, opts_.batch, dim(), [&](const std::int32_t* ids, const std::int64_t* offsets, int count, float* result) {
        a.resize(static_cast<std::size_t>(count) * H);
        float* pooled = dense == 0 ? result : a.data();
        const std::string& pooling = modules_.pooling;
        if (cuda_ && pooling == "cls") cuda_->forward_cls(ids, offsets, count, pooled, cuda_stream_->get());
        else if (cuda_) cuda_->forward_mean(ids, offsets, count, pooled, cuda_stream_->get());
        else if (pooling == "cls") model_.forward_cls(ids, offsets, count, pooled);
        else if (pooling == "max") model_.forward_max(ids, offsets, count, pooled);
        else model_.forward_mean(ids, offsets, count, pooled);
        for (std::size_t i = 0; i < dense; ++i) {   // sentence-transformers' Dense modules, on the CPU
            const StDense& d = modules_.dense[i];
            b.resize(static_cast<std::size_t>(count) * d.out);
            d.apply(a.data(), count, i + 1 == dense ? result : b.data());
            a.swap(b);
        }
    }, out);
}

const WordPiece& BertEmbedder::wordpiece() const {
    RETRO_CHECK(text_tokenizer_.wordpiece() != nullptr, "the bert embedder of ", opts_.model_dir, " does not tokenise with WordPiece");
    return *text_tokenizer_.wordpiece();
}

std::vector<int> BertEmbedder::encode_text(const std::string& text) const {
    return text_tokenizer_.encode(prompt_.empty() ? text : prompt_ + text, opts_.max_length);
}

void BertEmbedder::embed_texts(const std::vector<std::string>& texts, float* out) const {
    embed_ids(encoder_text_ids(texts, [&](const std::string& t) { return encode_text(t); }), out);
}

void BertEmbedder::embed(const std::int32_t* tokens, std::int64_t n, int chunk_size, float* out) const {
    RETRO_CHECK(tokenizer_ != nullptr, "the bert embedder needs the database's tokenizer to decode chunks");
    // [CLS] (prompt) [SEP] alone: a text without any token of its own, a zero row
    // with a prompt the ids of a text without tokens of its own are more than the two specials: such a text is told by
    // its own pieces (a byte-level BPE joins the prompt's trailing space to the text's first word, so no count of the
    // prompt's ids would do)
    const TextEncode encode = [&](const std::string& t) {
        return prompt_.empty() || !text_tokenizer_.tokenize_ids(t).empty() ? encode_text(t) : std::vector<int>();
    };
    embed_ids(encoder_chunk_ids(*tokenizer_, tokens, n, chunk_size, 2, encode), out);
}

nlohmann::json BertEmbedder::to_json() const {
    nlohmann::json j = {{"name", "bert"},
            {"model", opts_.model_dir},
            {"max_length", opts_.max_length},
            {"batch", opts_.batch},
            {"dim", dim()},
            {"lower_case", opts_.lower_case == 1},
            {"fingerprint", fingerprint_},
            {"tokenizer_fingerprint", tokenizer_fingerprint_},
            {"config_fingerprint", config_fingerprint_}};
    if (modules_.pooling != "mean") j["pooling"] = modules_.pooling;   // absent = mean, as every index before 2026-12-02
    if (!prompt_.empty()) j["prompt"] = prompt_;        // absent = none, as every index before 2026-12-02
    return j;
}

std::string bert_fingerprint(const std::string& dir) {
    return bert_fingerprint(dir, fs::exists(fs::path(dir) / "modules.json") ? st_modules_read(dir) : StModules{});
}

std::string bert_fingerprint(const std::string& dir, const StModules& modules) {
    const std::string weights = CheckpointWeights::fingerprint(dir);
    if (modules.files.empty()) return weights;   // the fingerprint every index without Dense modules recorded
    std::string all = weights;
    for (const auto& dense_dir : modules.files)   // its weights, and its settings (activation, bias)
        all += " " + CheckpointWeights::fingerprint(dense_dir) + " " + fingerprint_file((fs::path(dense_dir) / "config.json").string());
    return fingerprint_bytes(all.data(), all.size());
}

std::string bert_prompt(const BertEmbedderOptions& opts) {
    return opts.prompt ? *opts.prompt : st_default_prompt(embedder_model_folder("bert", opts.model_dir));
}

std::unique_ptr<Embedder> make_bert_embedder(const BertEmbedderOptions& opts, const Tokenizer* tokenizer) {
    return std::make_unique<BertEmbedder>(opts, tokenizer);
}

std::unique_ptr<Embedder> make_bert_embedder_from_json(const nlohmann::json& j, const Tokenizer* tokenizer,
                                                       const std::string& device) {
    const EncoderSettings s = encoder_settings_read(j, "bert");
    BertEmbedderOptions o;
    o.model_dir = s.model_dir;
    o.device = device;
    o.max_length = s.max_length;
    o.batch = s.batch;
    if (j.contains("lower_case") && j["lower_case"].is_boolean()) o.lower_case = j["lower_case"].get<bool>() ? 1 : 0;
    // the prompt the index was built with (none where absent), never the folder's default of today
    o.prompt = j.contains("prompt") && j["prompt"].is_string() ? j["prompt"].get<std::string>() : std::string();
    const std::string st = CheckpointWeights::path_of(o.model_dir);
    if (CheckpointWeights::present(o.model_dir))   // refuse a changed model before loading it
        encoder_settings_check(s, bert_fingerprint(o.model_dir), s.dim, st);
    // before the model is loaded; indices built before 2026-12-02 recorded the weights alone: their vocabulary
    // cannot be checked
    if (j.contains("tokenizer_fingerprint") && j["tokenizer_fingerprint"].is_string() && !bert_tokenizer_file(o.model_dir).empty()) {
        const std::string now = bert_tokenizer_fingerprint(o.model_dir), then = j["tokenizer_fingerprint"].get<std::string>();
        if (now != then)
            user_error_in(bert_tokenizer_file(o.model_dir),
                          "differs from the vocabulary the index was built with, or the tokenizer's special tokens, "
                          "strip_accents, tokenize_chinese_chars or add_prefix_space do (tokenizer fingerprint " + now +
                              ", the index recorded " + then + ")",
                          "restore the checkpoint's tokenizer files or rebuild the index with retro-index");
    }
    auto e = std::make_unique<BertEmbedder>(o, tokenizer);
    encoder_settings_check(s, e->fingerprint(), e->dim(), st);
    const std::string recorded = j.contains("pooling") && j["pooling"].is_string() ? j["pooling"].get<std::string>() : "mean";
    if (recorded != e->pooling())
        user_error_in((fs::path(o.model_dir) / "modules.json").string(),
                      "gives " + e->pooling() + " pooling, the index was built with " + recorded + " pooling",
                      "restore the model's modules.json and 1_Pooling, or rebuild the index with retro-index");
    encoder_config_check(j, e->to_json()["config_fingerprint"].get<std::string>(), o.model_dir);   // (after the named checks)
    return e;
}

}  // namespace retro
