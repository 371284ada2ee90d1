// The `bert` embedder: a local Hugging Face BERT-family checkpoint (BERT, DistilBERT, ELECTRA, MPNet; config.json,
// model.safetensors, vocab.txt). Chunk ids -> text (sentencepiece decode) -> WordPiece ->
// BERT encoder -> mean pool over real tokens -> L2 norm. CPU via OpenBLAS (BertModel); with device "cuda" the
// encoder runs on the GPU via cuBLAS (embed/bert_cuda.h).
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "embed/bert_cuda.h"
#include "embed/bert_model.h"
#include "embed/st_modules.h"
#include "embed/embedder.h"
#include "embed/bert_tokenizer.h"

namespace retro {

struct BertEmbedderOptions {
    std::string model_dir;     // folder with config.json, model.safetensors, vocab.txt (XLM-R: sentencepiece.bpe.model)
    int max_length = 128;      // WordPiece tokens per chunk, [CLS] and [SEP] included
    int batch = 64;            // chunks per forward pass
    int lower_case = -1;       // 1 uncased, 0 cased, -1 do_lower_case of tokenizer_config.json (else guessed from vocab.txt)
    std::string device = "cpu";   // cpu | cuda (where the encoder runs; not part of the recorded settings)
    // Text put before every chunk's (sentence-transformers' prompts: e5's "query: ", bge's instruction); unset: the
    // model folder's default prompt (config_sentence_transformers.json), "" for none.
    std::optional<std::string> prompt;
};

class BertEmbedder : public Embedder {
public:
    // Loads the model folder; throws UserError naming a missing or inconsistent file.
    BertEmbedder(const BertEmbedderOptions& opts, const Tokenizer* tokenizer);
    std::string name() const override { return "bert"; }
    int dim() const override;   // hidden_size, or the last Dense module's out_features
    // Chunk ids -> text (pad/bos/eos dropped, Tokenizer::decode) -> embed_texts. A chunk whose
    // text gives no WordPiece token (all padding, say) gets a zero row.
    void embed(const std::int32_t* tokens, std::int64_t n, int chunk_size, float* out) const override;
    // {"name":"bert","model","max_length","batch","dim","lower_case","fingerprint","tokenizer_fingerprint"}, and
    // "pooling" where not the mean, "prompt" where there is one
    // (fingerprint: bert_fingerprint; tokenizer_fingerprint: bert_tokenizer_fingerprint)
    nlohmann::json to_json() const override;

    // [CLS] WordPiece [SEP] (XLM-R, RoBERTa: <s> pieces </s>; truncated to max_length) -> encoder -> mean over all the
    // sequence's tokens (or their max, or the first one's: modules.json) -> its Dense modules -> L2 norm, for `texts` in batches of opts.batch sorted by length: out[texts.size() * dim()].
    void embed_texts(const std::vector<std::string>& texts, float* out) const;
    // The ids embed_texts gives the encoder for `text` (the checkpoint's tokenizer, truncated to max_length).
    std::vector<int> encode_text(const std::string& text) const;
    const WordPiece& wordpiece() const;   // the WordPiece tokenizer (InternalError for XLM-R's and RoBERTa's)
    BertTokenizerKind tokenizer_kind() const { return text_tokenizer_.kind(); }
    const BertTextTokenizer& text_tokenizer() const { return text_tokenizer_; }
    const BertModel& model() const { return model_; }
    const std::string& fingerprint() const { return fingerprint_; }
    const std::string& tokenizer_fingerprint() const { return tokenizer_fingerprint_; }
    const std::string& pooling() const { return modules_.pooling; }   // "mean", "max" or "cls" (modules.json)
    const StModules& modules() const { return modules_; }
    const std::string& prompt() const { return prompt_; }     // put before every text ("" for none)

private:
    void embed_ids(const std::vector<std::vector<int>>& seqs, float* out) const;
    BertEmbedderOptions opts_;
    const Tokenizer* tokenizer_;
    StModules modules_;   // read before the weights: a module the embedder cannot follow is refused first
    BertModel model_;
    std::unique_ptr<CudaStreamOwner> cuda_stream_;   // the stream cuda_ runs on (declared first: destroyed last)
    std::unique_ptr<CudaBert> cuda_;                 // set when opts.device == "cuda"
    BertTextTokenizer text_tokenizer_;   // WordPiece, XLM-R's sentencepiece or RoBERTa's BPE (bert_tokenizer.h)
    std::string prompt_;
    std::string fingerprint_, tokenizer_fingerprint_, config_fingerprint_;   // (encoder_settings.h)
};

// The fingerprint an index records of DIR's model: xxh3 of model.safetensors (or its shards: CheckpointWeights), or,
// where modules.json lists Dense modules, xxh3 of that and each Dense module's weights' and config.json's
// fingerprints joined by spaces.
std::string bert_fingerprint(const std::string& dir);
// The same with DIR's modules already read (st_modules_read: their Dense weights are not loaded again).
std::string bert_fingerprint(const std::string& dir, const StModules& modules);

// The prompt a BertEmbedder of `opts` puts before its texts: opts.prompt, else the folder's default (st_modules.h).
std::string bert_prompt(const BertEmbedderOptions& opts);

// Throws UserError naming the missing/corrupt file. `tokenizer` decodes chunk ids to text.
std::unique_ptr<Embedder> make_bert_embedder(const BertEmbedderOptions& opts, const Tokenizer* tokenizer);
// Rebuilds from the settings that BertEmbedder::to_json wrote, the encoder on `device` (cpu | cuda).
std::unique_ptr<Embedder> make_bert_embedder_from_json(const nlohmann::json& j, const Tokenizer* tokenizer,
                                                       const std::string& device = "cpu");

}  // namespace retro
