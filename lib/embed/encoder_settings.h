// What the text-encoder embedders (bert, t5) share around their models: the model ids of chunks
// (chunk_text, then the model's own tokenizer) and of texts, and the settings they record in an
// index manifest ({"model", "max_length", "batch", "dim", "fingerprint"}) read back with one-line
// errors and checked against the rebuilt embedder.
#pragma once
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace retro {

class Tokenizer;

using TextEncode = std::function<std::vector<int>(const std::string& text)>;

// Each chunk's text (embedder.h chunk_text) through `encode`, in parallel. A chunk with no text, or
// whose ids are only the `specials` the encoder always adds ([CLS] [SEP]: 2, </s>: 1), gets an
// empty sequence (a zero row in embed_packed_batches).
std::vector<std::vector<int>> encoder_chunk_ids(const Tokenizer& tokenizer, const std::int32_t* tokens, std::int64_t n,
                                                int chunk_size, std::size_t specials, const TextEncode& encode);
// Each text through `encode`, in parallel.
std::vector<std::vector<int>> encoder_text_ids(const std::vector<std::string>& texts, const TextEncode& encode);

struct EncoderSettings {
    std::string model_dir, fingerprint;
    int max_length = 128, batch = 64;
    int dim = 0;   // 0 when not recorded
};

// Reads the recorded settings of embedder `name`; UserError naming manifest.json when the model
// folder or fingerprint is missing.
EncoderSettings encoder_settings_read(const nlohmann::json& j, const std::string& name);
// UserError naming `where` when the rebuilt embedder has another fingerprint or dimension than recorded.
void encoder_settings_check(const EncoderSettings& s, const std::string& fingerprint, int dim, const std::string& where);

// One fingerprint of the settings files an encoder reads beside its weights and tokenizer: the encoder's config.json
// (in transformer_dir) and, in a sentence-transformers folder, modules.json and each module folder's config.json
// (1_Pooling, 2_Dense, ...). An index records it (embedder.config_fingerprint) so that a resumed or queried index
// whose model's settings changed (an activation, the pooling, a Dense module's function) is refused, not mixed.
std::string encoder_config_fingerprint(const std::string& model_dir, const std::string& transformer_dir);
// UserError naming the model's settings when `recorded` (an embedder's JSON) holds a config_fingerprint other than
// `now`; an index built before 2026-12-03 recorded none and is not held to it.
void encoder_config_check(const nlohmann::json& recorded, const std::string& now, const std::string& model_dir);

}  // namespace retro
