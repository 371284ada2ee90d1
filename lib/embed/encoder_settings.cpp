// Implementation of encoder_settings.h.
#include "embed/encoder_settings.h"

#include "core/error.h"
#include "core/threads.h"
#include "embed/embedder.h"

namespace retro {

std::vector<std::vector<int>> encoder_chunk_ids(const Tokenizer& tokenizer, const std::int32_t* tokens, std::int64_t n,
                                                int chunk_size, std::size_t specials, const TextEncode& encode) {
    std::vector<std::vector<int>> seqs(static_cast<std::size_t>(n));
    parallel_for(n, [&](std::int64_t i) {
        std::string text;
        if (!chunk_text(tokenizer, tokens + i * chunk_size, chunk_size, text)) return;   // all padding: zero row
        std::vector<int> ids = encode(text);
        if (ids.size() > specials) seqs[static_cast<std::size_t>(i)] = std::move(ids);   // no token of its own: zero row
    });
    return seqs;
}

std::vector<std::vector<int>> encoder_text_ids(const std::vector<std::string>& texts, const TextEncode& encode) {
    std::vector<std::vector<int>> seqs(texts.size());
    parallel_for(static_cast<std::int64_t>(texts.size()), [&](std::int64_t i) { seqs[i] = encode(texts[i]); });
    return seqs;
}

EncoderSettings encoder_settings_read(const nlohmann::json& j, const std::string& name) {
    auto bad = [&](const std::string& what) {
        user_error_in("manifest.json", "the " + name + " embedder settings " + what, "rebuild the index with retro-index");
    };
    if (!j.is_object() || !j.contains("model") || !j["model"].is_string()) bad("have no model folder");
    if (!j.contains("fingerprint") || !j["fingerprint"].is_string()) bad("have no model fingerprint");
    EncoderSettings s;
    s.model_dir = j["model"].get<std::string>();
    s.fingerprint = j["fingerprint"].get<std::string>();
    if (j.contains("max_length") && j["max_length"].is_number_integer()) s.max_length = j["max_length"].get<int>();
    if (j.contains("batch") && j["batch"].is_number_integer()) s.batch = j["batch"].get<int>();
    if (j.contains("dim") && j["dim"].is_number_integer()) s.dim = j["dim"].get<int>();
    return s;
}

void encoder_settings_check(const EncoderSettings& s, const std::string& fingerprint, int dim, const std::string& where) {
    if (fingerprint != s.fingerprint)
        user_error_in(where, "has fingerprint " + fingerprint + ", the index was built with " + s.fingerprint,
                      "restore that model or rebuild the index with retro-index");
    if (s.dim != 0 && s.dim != dim)
        user_error_in(s.model_dir, cat("gives ", dim, "-d embeddings, the index holds ", s.dim, "-d"),
                      "restore that model or rebuild the index with retro-index");
}

}  // namespace retro
