// The `t5` embedder: a local T5 encoder checkpoint (config.json, model.safetensors, spiece.model or the tokenizer.json
// transformers 5 saves in its place), plain (T5EncoderModel / T5ForConditionalGeneration) or in the
// sentence-transformers layout of GTR and Sentence-T5 (modules.json, 1_Pooling, 2_Dense, Normalize: st_modules.h).
// Chunk ids -> text (the database's sentencepiece decode) -> the special tokens split out (t5_special_tokens) and
// the rest through the model's sentencepiece model -> ids + </s> (truncated to max_length) -> T5 encoder
// (t5_model.h) -> mean (or max) pool -> Dense -> L2 norm. CPU only.
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "embed/embedder.h"
#include "embed/st_modules.h"
#include "embed/t5_model.h"
#include "text/spiece_tokenizer.h"

namespace retro {

struct T5EmbedderOptions {
    std::string model_dir;   // the checkpoint or sentence-transformers folder
    int max_length = 128;    // sentencepiece tokens per chunk, </s> included
    int batch = 64;          // chunks per forward pass
};

class T5Embedder : public Embedder {
public:
    // Loads the folder; throws UserError naming a missing or inconsistent file.
    T5Embedder(const T5EmbedderOptions& opts, const Tokenizer* tokenizer);
    std::string name() const override { return "t5"; }
    int dim() const override { return dim_; }
    // Chunk ids -> text (pad/bos/eos dropped) -> embed_texts; a chunk with no text or no piece gets a zero row.
    void embed(const std::int32_t* tokens, std::int64_t n, int chunk_size, float* out) const override;
    // {"name":"t5","model","max_length","batch","dim","fingerprint"} (xxh3 over the weight and spiece files)
    nlohmann::json to_json() const override;

    // spiece ids + </s> (truncated to max_length) -> encoder -> pool -> Dense -> L2, batches sorted by length.
    void embed_texts(const std::vector<std::string>& texts, float* out) const;
    const SpieceTokenizer& tokenizer() const { return spiece_; }
    const T5Model& model() const { return model_; }
    const StModules& modules() const { return modules_; }
    const std::string& fingerprint() const { return fingerprint_; }

private:
    void embed_ids(const std::vector<std::vector<int>>& seqs, float* out) const;
    T5EmbedderOptions opts_;
    const Tokenizer* tokenizer_;
    StModules modules_;
    T5Model model_;
    SpieceTokenizer spiece_;
    int dim_ = 0;
    std::string fingerprint_, config_fingerprint_;   // (encoder_settings.h)
};

// T5Tokenizer's special tokens as transformers 5 splits them out of a text: its eos, unk and pad tokens (</s>, <unk>,
// <pad>, or the names special_tokens_map.json / tokenizer_config.json give), <extra_id_0> ... <extra_id_{n-1}> (n:
// tokenizer_config.json's extra_ids, else T5Tokenizer's default 100; where neither the model nor the files give
// one, <extra_id_i>'s id is pieces + n - 1 - i over spiece.model, pieces + i over a tokenizer.json, transformers 5's
// numbering of each) and every added token of the files, each
// with its id and strip settings, sorted. A token whose id the model's embeddings do not hold (id >= vocab_size) is
// left out: it stays text.
struct T5SpecialTokens {
    std::vector<std::pair<std::string, int>> tokens;
    std::vector<SpecialTokens::Strip> strip;
};
T5SpecialTokens t5_special_tokens(const std::string& dir, const SpieceTokenizer& spiece, int vocab_size);

std::unique_ptr<Embedder> make_t5_embedder(const T5EmbedderOptions& opts, const Tokenizer* tokenizer);
// Rebuilds from the settings T5Embedder::to_json wrote; refuses a model whose fingerprint changed.
std::unique_ptr<Embedder> make_t5_embedder_from_json(const nlohmann::json& j, const Tokenizer* tokenizer);

}  // namespace retro
