// Implementation of t5_embedder.h.
#include "embed/t5_embedder.h"

#include <algorithm>
#include <filesystem>

#include "core/error.h"
#include "core/fingerprint.h"
#include "core/manifest.h"
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

// The absolute folder, and the numeric options checked.
T5EmbedderOptions checked(T5EmbedderOptions o) {
    o.model_dir = embedder_model_folder("t5", o.model_dir);
    embedder_folder_kind_check("t5", o.model_dir);
    if (o.max_length < 2) user_error_in("--max-length", cat("is ", o.max_length, ", needs at least 2 (a piece and </s>)"));
    if (o.batch < 1) user_error_in("--batch", cat("is ", o.batch, ", needs at least 1"));
    return o;
}

// The tokenizer file: spiece.model, else the tokenizer.json transformers 5 saves in its place (a Unigram model,
// rebuilt into the same sentencepiece model: text/sentencepiece_json.h); spiece.model's path where neither is there.
std::string tokenizer_file(const std::string& dir) {
    const fs::path spiece = fs::path(dir) / "spiece.model", json = fs::path(dir) / "tokenizer.json";
    return (!fs::exists(spiece) && fs::exists(json) ? json : spiece).string();
}

// Names the first missing file of the encoder folder before anything is parsed.
const std::string& require_files(const std::string& dir) {
    if (!fs::exists(fs::path(dir) / "config.json"))
        user_error_in((fs::path(dir) / "config.json").string(), "missing (a t5 model folder needs it)",
                      "copy the checkpoint's config.json into the folder");
    CheckpointWeights::require(dir, "a t5 model folder");   // or sharded, or pytorch_model.bin
    if (!fs::exists(tokenizer_file(dir)))
        user_error_in(tokenizer_file(dir), "missing (a t5 model folder needs it)",
                      "copy the checkpoint's sentencepiece model (spiece.model), or the tokenizer.json transformers 5 saves "
                      "in its place, into the folder");
    return dir;
}

std::string t5_fingerprint(const std::string& transformer_dir, const StModules& m) {
    std::string all = CheckpointWeights::fingerprint(transformer_dir) + " " + fingerprint_file(tokenizer_file(transformer_dir));
    for (const auto& dense_dir : m.files) all += " " + CheckpointWeights::fingerprint(dense_dir);
    return fingerprint_bytes(all.data(), all.size());
}

}  // namespace

T5SpecialTokens t5_special_tokens(const std::string& dir, const SpieceTokenizer& spiece, int vocab_size) {
    SpecialTokens defaults;   // T5Tokenizer's: no cls, sep or mask
    defaults.cls = defaults.sep = defaults.mask = "";
    defaults.unk = "<unk>";
    defaults.pad = "<pad>";
    defaults.added = {"</s>"};
    const SpecialTokens files = SpecialTokens::from_dir(dir, defaults);
    int extra_ids = 100;
    const fs::path config = fs::path(dir) / "tokenizer_config.json";
    if (fs::exists(config)) {
        const nlohmann::json j = json_read_file(config.string());
        if (j.is_object() && j.contains("extra_ids") && j["extra_ids"].is_number_integer())
            extra_ids = static_cast<int>(std::clamp<std::int64_t>(j["extra_ids"].get<std::int64_t>(), 0, 1 << 20));
    }
    std::vector<std::string> spellings = files.split_set();
    for (int i = 0; i < extra_ids; ++i) spellings.push_back("<extra_id_" + std::to_string(i) + ">");
    std::sort(spellings.begin(), spellings.end());
    spellings.erase(std::unique(spellings.begin(), spellings.end()), spellings.end());
    T5SpecialTokens out;
    for (const std::string& t : spellings) {
        int id = files.id_of(t, spiece.piece_id(t));
        if (id < 0 && t.rfind("<extra_id_", 0) == 0) {   // transformers appends them after the pieces, the last first
            const std::string digits = t.substr(10, t.size() - 11);
            const bool number = !digits.empty() && digits.size() < 8 && t.back() == '>' &&
                                digits.find_first_not_of("0123456789") == std::string::npos && (digits == "0" || digits[0] != '0');
            // numbered after the pieces: from spiece.model the last first (T5's layout), from a tokenizer.json that
            // lacks them in order (added as additional special tokens), as transformers 5 does each
            const bool from_json = std::filesystem::path(spiece.path()).extension() == ".json";
            if (number && std::stoi(digits) < extra_ids)
                id = spiece.vocab_size() + (from_json ? std::stoi(digits) : extra_ids - 1 - std::stoi(digits));
        }
        if (id < 0 || id >= vocab_size) continue;
        out.tokens.emplace_back(t, id);
        const auto s = files.strip.find(t);
        out.strip.push_back(s == files.strip.end() ? SpecialTokens::Strip{} : s->second);
    }
    return out;
}

T5Embedder::T5Embedder(const T5EmbedderOptions& opts, const Tokenizer* tokenizer)
    : opts_(checked(opts)),
      tokenizer_(tokenizer),
      modules_(st_modules_read(opts_.model_dir)),
      model_(require_files(modules_.transformer_dir)),
      spiece_(tokenizer_file(modules_.transformer_dir)) {
    const T5Config& c = model_.config();
    if (modules_.pooling == "cls")
        user_error_in((fs::path(opts_.model_dir) / "modules.json").string(), "lists CLS pooling, which a T5 encoder has no token for",
                      "use a T5 model with mean or max pooling");
    if (modules_.pooling_dim && modules_.pooling_dim != c.d_model)
        user_error_in((fs::path(opts_.model_dir) / "1_Pooling/config.json").string(),
                      cat("has word_embedding_dimension ", modules_.pooling_dim, ", the encoder's d_model is ", c.d_model),
                      "keep the Pooling folder and the encoder from the same model");
    if (!modules_.dense.empty() && modules_.dense.front().in != c.d_model)
        user_error_in((fs::path(modules_.dense.front().dir) / "config.json").string(),
                      cat("has in_features ", modules_.dense.front().in, ", the encoder's d_model is ", c.d_model),
                      "keep the Dense folder and the encoder from the same model");
    if (spiece_.vocab_size() > c.vocab_size)
        user_error_in(spiece_.path(), cat("has ", spiece_.vocab_size(), " pieces, config.json says vocab_size ", c.vocab_size),
                      "keep the tokenizer and the weights from the same checkpoint");
    const T5SpecialTokens specials = t5_special_tokens(modules_.transformer_dir, spiece_, c.vocab_size);
    spiece_.set_special_tokens(specials.tokens, specials.strip);
    dim_ = modules_.dense.empty() ? c.d_model : modules_.dense.back().out;
    fingerprint_ = t5_fingerprint(modules_.transformer_dir, modules_);
    config_fingerprint_ = encoder_config_fingerprint(opts_.model_dir, modules_.transformer_dir);
    // a forward's buffers (t5_model.cpp): the batch's rows of x, q|k|v, ctx and the hidden states (2 d_model + 4 inner
    // floats a token), the relative bias of every head and offset, each thread's row block of the feed-forward (up to
    // 1,024 rows where the layers are not packed for AVX-512) and its attention scratch (bert_attention.h) — refused
    // before the first batch, not ended by the OOM killer (T5's relative positions set no --max-length limit)
    const double L = opts_.max_length, rows = static_cast<double>(opts_.batch) * L;
    const double ff = c.gated ? 3.0 * c.d_ff : c.d_ff;
    const double per_thread = std::min(1024.0, rows) * (c.d_model + ff) +
                              static_cast<double>(bert_attention_scratch_floats(opts_.max_length, c.d_kv));
    memory_require("--batch and --max-length",
                   4.0 * (rows * (2.0 * c.d_model + 4.0 * c.inner()) + c.heads * 2.0 * L + thread_count() * per_thread),
                   cat("a forward pass over --batch ", opts_.batch, " texts of --max-length ", opts_.max_length, " tokens"),
                   "lower --batch or --max-length");
}

void T5Embedder::embed_ids(const std::vector<std::vector<int>>& seqs, float* out) const {
    const int D = model_.config().d_model;
    const std::size_t dense = modules_.dense.size();
    std::vector<float> a, b;   // pooled rows, then each Dense's output but the last
    embed_packed_batches(seqs, opts_.batch, dim_, [&](const std::int32_t* ids, const std::int64_t* offsets, int count, float* result) {
        a.resize(static_cast<std::size_t>(count) * D);
        float* pooled = dense == 0 ? result : a.data();
        if (modules_.pooling == "max") model_.forward_max(ids, offsets, count, pooled);
        else model_.forward_mean(ids, offsets, count, pooled);
        for (std::size_t i = 0; i < dense; ++i) {
            const StDense& d = modules_.dense[i];
            b.resize(static_cast<std::size_t>(count) * d.out);
            d.apply(a.data(), count, i + 1 == dense ? result : b.data());
            a.swap(b);
        }
    }, out);
}

void T5Embedder::embed_texts(const std::vector<std::string>& texts, float* out) const {
    embed_ids(encoder_text_ids(texts, [&](const std::string& t) { return spiece_.encode(t, opts_.max_length); }), out);
}

void T5Embedder::embed(const std::int32_t* tokens, std::int64_t n, int chunk_size, float* out) const {
    RETRO_CHECK(tokenizer_ != nullptr, "the t5 embedder needs the database's tokenizer to decode chunks");
    // </s> alone: a text without any piece, a zero row
    embed_ids(encoder_chunk_ids(*tokenizer_, tokens, n, chunk_size, 1,
                                [&](const std::string& t) { return spiece_.encode(t, opts_.max_length); }),
              out);
}

nlohmann::json T5Embedder::to_json() const {
    return {{"name", "t5"},           {"model", opts_.model_dir}, {"max_length", opts_.max_length},
            {"batch", opts_.batch},   {"dim", dim_},              {"fingerprint", fingerprint_},
            {"config_fingerprint", config_fingerprint_}};
}

std::unique_ptr<Embedder> make_t5_embedder(const T5EmbedderOptions& opts, const Tokenizer* tokenizer) {
    return std::make_unique<T5Embedder>(opts, tokenizer);
}

std::unique_ptr<Embedder> make_t5_embedder_from_json(const nlohmann::json& j, const Tokenizer* tokenizer) {
    const EncoderSettings s = encoder_settings_read(j, "t5");
    auto e = std::make_unique<T5Embedder>(T5EmbedderOptions{s.model_dir, s.max_length, s.batch}, tokenizer);
    encoder_settings_check(s, e->fingerprint(), e->dim(), e->to_json()["model"].get<std::string>() + " (weights and tokenizer)");
    encoder_config_check(j, e->to_json()["config_fingerprint"].get<std::string>(), s.model_dir);
    return e;
}

}  // namespace retro
