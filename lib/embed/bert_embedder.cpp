// Implementation of bert_embedder.h: chunk ids -> text -> WordPiece -> BertModel -> mean -> L2.
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
#include "embed/activation.h"
#include "embed/checkpoint_weights.h"
#include "embed/encoder_settings.h"
#include "embed/model_folder.h"
#include "embed/packed_batches.h"
#include "embed/st_modules.h"

namespace retro {

namespace {

namespace fs = std::filesystem;

// The folder's pooling as sentence-transformers' modules.json lists it: "mean" (also without modules.json) or "cls";
// max pooling or a Dense module after the pooling (distiluse-*) is refused: they embedded wrongly without a word
// before 2026-12-02.
std::string bert_pooling(const std::string& dir) {
    if (!fs::exists(fs::path(dir) / "modules.json")) return "mean";
    const StModules m = st_modules_read(dir);   // refuses other poolings itself
    if (m.pooling != "mean" && m.pooling != "cls")
        user_error_in((fs::path(dir) / "modules.json").string(),
                      "lists " + m.pooling + " pooling: the bert embedder pools by the mean of every token or by the CLS token",
                      "use a model with mean or CLS pooling (its 1_Pooling/config.json)");
    if (!m.dense.empty())
        user_error_in((fs::path(m.dense[0].dir) / "config.json").string(),
                      "is a Dense module after the pooling, which the bert embedder does not apply",
                      "use a model without Dense modules, or a T5 one with --embedder t5");
    return m.pooling;
}

constexpr const char* kXlmrSpiece = "sentencepiece.bpe.model";

// config.json's model_type where the file is readable JSON with one ("bert" otherwise: bert_config_read names the
// problems).
std::string folder_model_type(const std::string& dir) {
    const fs::path config = fs::path(dir) / "config.json";
    try {
        if (!fs::exists(config)) return "bert";
        const nlohmann::json j = json_read_file(config.string());
        return j.is_object() && j.contains("model_type") && j["model_type"].is_string() ? j["model_type"].get<std::string>() : "bert";
    } catch (const std::exception&) {
        return "bert";
    }
}

// Whether the folder's text goes through XLM-R's sentencepiece tokenizer (xlmr_tokenizer.h) rather than WordPiece:
// an XLM-RoBERTa checkpoint, or a BERT one whose tokenizer_config.json names XLM-R's tokenizer (Multilingual-MiniLM and
// paraphrase-multilingual-MiniLM-L12-v2: BertModel over XLM-R's vocabulary), or a folder with sentencepiece.bpe.model
// and no vocab.txt.
bool uses_xlmr_tokenizer(const std::string& dir) {
    if (folder_model_type(dir) == "xlm-roberta") return true;
    const fs::path config = fs::path(dir) / "tokenizer_config.json";
    try {
        if (fs::exists(config)) {
            const nlohmann::json j = json_read_file(config.string());
            if (j.is_object() && j.contains("tokenizer_class") && j["tokenizer_class"].is_string())
                return j["tokenizer_class"].get<std::string>().rfind("XLMRobertaTokenizer", 0) == 0;
        }
    } catch (const std::exception&) {   // WordPiece names a tokenizer_config.json that is not JSON
    }
    return !fs::exists(fs::path(dir) / "vocab.txt") && fs::exists(fs::path(dir) / kXlmrSpiece);
}

// Names the first missing model file, and checks the numeric options.
BertEmbedderOptions checked(BertEmbedderOptions o) {
    o.model_dir = embedder_model_folder("bert", o.model_dir);
    const bool xlmr = uses_xlmr_tokenizer(o.model_dir);
    const char* what[][2] = {
        {"config.json", "copy the checkpoint's config.json into the folder"},
        {"model.safetensors", "save the checkpoint with safe_serialization=True (or convert pytorch_model.bin)"},
        {xlmr ? kXlmrSpiece : "vocab.txt",
         xlmr ? "copy the checkpoint's sentencepiece.bpe.model into the folder (RetroKit tokenises XLM-R with it, not tokenizer.json)"
              : "copy the checkpoint's vocab.txt (or the tokenizer.json of its BertTokenizer) into the folder"}};
    for (auto& w : what) {
        fs::path p = fs::path(o.model_dir) / w[0];
        const bool weights = p.filename() == "model.safetensors";   // or sharded: checkpoint_weights.h
        const bool vocab = p.filename() == "vocab.txt";             // or a fast tokenizer's tokenizer.json
        if (weights ? !CheckpointWeights::present(o.model_dir) : vocab ? WordPiece::vocabulary_file(o.model_dir).empty() : !fs::exists(p))
            user_error_in(p.string(), "missing (a bert model folder needs it)", w[1]);
    }
    if (o.max_length < 3) user_error_in("--max-length", cat("is ", o.max_length, ", needs at least 3"));
    if (o.batch < 1) user_error_in("--batch", cat("is ", o.batch, ", needs at least 1"));
    if (o.device != "cpu" && o.device != "cuda") user_error_in("--device", "expected cpu or cuda, got '" + o.device + "'");
    return o;
}

}  // namespace

BertEmbedder::BertEmbedder(const BertEmbedderOptions& opts, const Tokenizer* tokenizer)
    : opts_(checked(opts)),
      tokenizer_(tokenizer),
      pooling_(bert_pooling(opts_.model_dir)),
      model_(opts_.model_dir),
      wordpiece_(uses_xlmr_tokenizer(opts_.model_dir)
                     ? std::nullopt
                     : std::optional<WordPiece>(WordPiece::from_dir(opts_.model_dir, opts_.lower_case, bert_family_specials(model_.config())))),
      xlmr_(uses_xlmr_tokenizer(opts_.model_dir)
                ? std::optional<XlmrTokenizer>(XlmrTokenizer((fs::path(opts_.model_dir) / kXlmrSpiece).string()))
                : std::nullopt),
      fingerprint_(CheckpointWeights::fingerprint(opts_.model_dir)),
      tokenizer_fingerprint_(bert_tokenizer_fingerprint(opts_.model_dir)) {
    const BertConfig& c = model_.config();
    if (opts_.max_length > c.max_tokens())
        user_error_in("--max-length", cat("is ", opts_.max_length, ", the model allows ", c.max_tokens(), " tokens"),
                      cat("pass --max-length ", c.max_tokens(), " or less"));
    const int tokens = wordpiece_ ? wordpiece_->vocab_size() : xlmr_->vocab_size();
    if (tokens > c.vocab_size)
        user_error_in(bert_tokenizer_file(opts_.model_dir), cat("has ", tokens, " tokens, config.json says vocab_size ", c.vocab_size),
                      "keep the tokenizer and the weights from the same checkpoint");
    opts_.lower_case = wordpiece_ && wordpiece_->options().lower_case ? 1 : 0;   // XLM-R: sentencepiece's normaliser
    if (opts_.device == "cuda") {
        if (c.mpnet)
            user_error_in("--device cuda", "the CUDA encoder has no relative-position bias; " + opts_.model_dir + " is an MPNet checkpoint",
                          "embed on the CPU (--device cpu)");
        if (c.position_padding_idx >= 0)
            user_error_in("--device cuda", "the CUDA encoder numbers positions from 0; " + opts_.model_dir +
                                               " is an XLM-RoBERTa checkpoint (fairseq's positions)",
                          "embed on the CPU (--device cpu)");
        if (pooling_ != "mean")
            user_error_in("--device cuda", "the CUDA encoder pools by the mean; " + opts_.model_dir + " pools by the " + pooling_ + " token",
                          "embed on the CPU (--device cpu)");
        // the CUDA encoder's feed-forward computes erf-GELU, tanh-GELU and ReLU (kernels/bert_cuda.cu)
        Activation act = Activation::GELU_ERF;
        activation_from_name(c.hidden_act, act);   // checked by bert_config_read
        if (act != Activation::GELU_ERF && act != Activation::GELU_TANH && act != Activation::RELU)
            user_error_in("--device cuda", "the CUDA encoder computes gelu, gelu_new and relu feed-forwards; " + opts_.model_dir +
                                               "'s hidden_act is " + c.hidden_act,
                          "embed on the CPU (--device cpu)");
        cuda_require("--device cuda", "RetroKit", "embed on the CPU (--device cpu)");
        if constexpr (kCudaBuilt) {
            cuda_stream_ = std::make_unique<CudaStreamOwner>();
            cuda_ = CudaBert::upload(model_, cuda_stream_->get());
        }
    }
}

void BertEmbedder::embed_ids(const std::vector<std::vector<int>>& seqs, float* out) const {
    embed_packed_batches(seqs, opts_.batch, dim(), [&](const std::int32_t* ids, const std::int64_t* offsets, int count, float* pooled) {
        if (cuda_) cuda_->forward_mean(ids, offsets, count, pooled, cuda_stream_->get());
        else if (pooling_ == "cls") model_.forward_cls(ids, offsets, count, pooled);
        else model_.forward_mean(ids, offsets, count, pooled);
    }, out);
}

const WordPiece& BertEmbedder::wordpiece() const {
    RETRO_CHECK(wordpiece_.has_value(), "the bert embedder of ", opts_.model_dir, " tokenises with sentencepiece, not WordPiece");
    return *wordpiece_;
}

std::vector<int> BertEmbedder::encode_text(const std::string& text) const {
    return wordpiece_ ? wordpiece_->encode(text, opts_.max_length) : xlmr_->encode(text, opts_.max_length);
}

void BertEmbedder::embed_texts(const std::vector<std::string>& texts, float* out) const {
    embed_ids(encoder_text_ids(texts, [&](const std::string& t) { return encode_text(t); }), out);
}

void BertEmbedder::embed(const std::int32_t* tokens, std::int64_t n, int chunk_size, float* out) const {
    RETRO_CHECK(tokenizer_ != nullptr, "the bert embedder needs the database's tokenizer to decode chunks");
    // [CLS] [SEP] alone: a text without any WordPiece token, a zero row
    embed_ids(encoder_chunk_ids(*tokenizer_, tokens, n, chunk_size, 2, [&](const std::string& t) { return encode_text(t); }), out);
}

nlohmann::json BertEmbedder::to_json() const {
    nlohmann::json j = {{"name", "bert"},
            {"model", opts_.model_dir},
            {"max_length", opts_.max_length},
            {"batch", opts_.batch},
            {"dim", dim()},
            {"lower_case", opts_.lower_case == 1},
            {"fingerprint", fingerprint_},
            {"tokenizer_fingerprint", tokenizer_fingerprint_}};
    if (pooling_ != "mean") j["pooling"] = pooling_;   // absent = mean, as every index before 2026-12-02
    return j;
}

SpecialTokens bert_family_specials(const BertConfig& config) {
    return config.mpnet ? SpecialTokens::mpnet() : SpecialTokens();
}

std::string bert_tokenizer_file(const std::string& model_dir) {
    if (uses_xlmr_tokenizer(model_dir)) {
        const fs::path spiece = fs::path(model_dir) / kXlmrSpiece;
        return fs::exists(spiece) ? spiece.string() : std::string();
    }
    return WordPiece::vocabulary_file(model_dir);   // vocab.txt, or tokenizer.json
}

std::string bert_tokenizer_fingerprint(const std::string& model_dir) {
    const std::string vocab = bert_tokenizer_file(model_dir);
    refuse_lfs_pointer_file(vocab);
    std::string all = fingerprint_file(vocab);
    if (uses_xlmr_tokenizer(model_dir)) {   // the ids follow the sentencepiece model alone
        all += " xlm-roberta";
        return fingerprint_bytes(all.data(), all.size());
    }
    const fs::path config = fs::path(model_dir) / "tokenizer_config.json";
    const nlohmann::json j = fs::exists(config) ? json_read_file(config.string()) : nlohmann::json::object();
    // the values WordPiece takes (WordPiece::from_dir) of the options it reads besides do_lower_case (an index
    // records lower_case itself): a re-save that writes the defaults out, or changes other fields
    // (model_max_length, name_or_path), leaves the ids and the fingerprint as they were
    const auto flag = [&](const char* key) -> const nlohmann::json* {
        return j.is_object() && j.contains(key) && j[key].is_boolean() ? &j[key] : nullptr;
    };
    const nlohmann::json* strip = flag("strip_accents");
    const nlohmann::json* chinese = flag("tokenize_chinese_chars");
    all += std::string(" strip_accents=") + (strip ? strip->dump() : "unset") +
           " tokenize_chinese_chars=" + (chinese ? chinese->dump() : "true");
    // the special tokens (since 2026-12-02 MPNet's <s> ... </s>, or names the tokenizer files give) where they are not
    // BERT's five: an index of a BERT checkpoint keeps the fingerprint it had
    const SpecialTokens family = folder_model_type(model_dir) == "mpnet" ? SpecialTokens::mpnet() : SpecialTokens();
    const SpecialTokens specials = SpecialTokens::from_dir(model_dir, family);
    const SpecialTokens bert;
    if (specials.cls != bert.cls || specials.sep != bert.sep || specials.unk != bert.unk || specials.pad != bert.pad ||
        specials.split_set() != bert.split_set()) {
        all += " specials=" + specials.cls + " " + specials.sep + " " + specials.unk + " " + specials.pad + " split:";
        for (const std::string& t : specials.split_set()) all += " " + t;
    }
    return fingerprint_bytes(all.data(), all.size());
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
    const std::string st = CheckpointWeights::path_of(o.model_dir);
    if (CheckpointWeights::present(o.model_dir))   // refuse a changed model before loading it
        encoder_settings_check(s, CheckpointWeights::fingerprint(o.model_dir), s.dim, st);
    // before the model is loaded; indices built before 2026-12-02 recorded the weights alone: their vocabulary
    // cannot be checked
    if (j.contains("tokenizer_fingerprint") && j["tokenizer_fingerprint"].is_string() && !bert_tokenizer_file(o.model_dir).empty()) {
        const std::string now = bert_tokenizer_fingerprint(o.model_dir), then = j["tokenizer_fingerprint"].get<std::string>();
        if (now != then)
            user_error_in(bert_tokenizer_file(o.model_dir),
                          "differs from the vocabulary the index was built with, or tokenizer_config.json's strip_accents or "
                          "tokenize_chinese_chars do (tokenizer fingerprint " + now + ", the index recorded " + then + ")",
                          "restore the checkpoint's tokenizer files or rebuild the index with retro-index");
    }
    auto e = std::make_unique<BertEmbedder>(o, tokenizer);
    encoder_settings_check(s, e->fingerprint(), e->dim(), st);
    const std::string recorded = j.contains("pooling") && j["pooling"].is_string() ? j["pooling"].get<std::string>() : "mean";
    if (recorded != e->pooling())
        user_error_in((fs::path(o.model_dir) / "modules.json").string(),
                      "gives " + e->pooling() + " pooling, the index was built with " + recorded + " pooling",
                      "restore the model's modules.json and 1_Pooling, or rebuild the index with retro-index");
    return e;
}

}  // namespace retro
