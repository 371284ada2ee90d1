// Implementation of encoder_settings.h.
#include "embed/encoder_settings.h"

#include <algorithm>
#include <filesystem>

#include "core/error.h"
#include "core/fingerprint.h"
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

std::string encoder_config_fingerprint(const std::string& model_dir, const std::string& transformer_dir) {
    namespace fs = std::filesystem;
    const fs::path root = fs::path(model_dir).lexically_normal(), encoder = fs::path(transformer_dir).lexically_normal();
    std::vector<fs::path> files = {encoder / "config.json", root / "modules.json"};
    std::vector<fs::path> modules;   // each module folder's config.json, in name order
    std::error_code ec;
    for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
        const fs::path dir = it->path().lexically_normal();
        if (dir != encoder && fs::is_directory(dir, ec) && fs::is_regular_file(dir / "config.json", ec))
            modules.push_back(dir / "config.json");
    }
    std::sort(modules.begin(), modules.end());
    files.insert(files.end(), modules.begin(), modules.end());
    std::string all;
    for (const fs::path& f : files)
        if (fs::is_regular_file(f, ec)) all += f.lexically_relative(root).generic_string() + " " + fingerprint_file(f.string()) + "\n";
    return fingerprint_bytes(all.data(), all.size());
}

void encoder_config_check(const nlohmann::json& recorded, const std::string& now, const std::string& model_dir) {
    if (!recorded.is_object() || !recorded.contains("config_fingerprint") || !recorded["config_fingerprint"].is_string()) return;
    const std::string then = recorded["config_fingerprint"].get<std::string>();
    if (then != now)
        user_error_in((std::filesystem::path(model_dir) / "config.json").string(),
                      "or the sentence-transformers module settings beside it (modules.json, 1_Pooling/config.json, "
                      "2_Dense/config.json, ...) differ from those the index was built with (settings fingerprint " + now +
                          ", the index recorded " + then + ")",
                      "restore the model's settings files or rebuild the index with retro-index");
}

}  // namespace retro
