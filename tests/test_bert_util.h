// Helpers shared by the bert embedder's test files (test_bert*.cpp): the tolerances every golden is held to, the tiny
// BERT golden folder, a copy of a model folder with one config.json field changed, and the refusal an embedder ends in.
#pragma once
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"
#include "embed/bert_embedder.h"
#include "test_util.h"

namespace retro::test {

// Tolerances: the same fp32 graph summed in another order. The bar is cosine >= 0.99999;
// observed 1 - cos < 1e-7. Cosine alone misses small model errors (pooling without [SEP] gives
// 0.93, [CLS] pooling 0.81, but tanh-GELU still 0.9999999), so each element is also held to
// MAX_ABS: observed <= 3e-7, tanh-GELU would be 1.3e-4 on bert_tiny.
constexpr double BERT_MIN_COSINE = 0.99999;
constexpr double BERT_MAX_ABS = 2e-5;

inline std::filesystem::path bert_tiny_dir() { return source_dir() / "tests/reference/golden/bert_tiny"; }

// `from`'s config.json, model.safetensors and vocab.txt copied into `tmp` with config[key] = value; the folder.
inline std::filesystem::path copy_with_config(const TempDir& tmp, const std::filesystem::path& from, const char* key,
                                              const nlohmann::json& value) {
    for (const char* f : {"config.json", "model.safetensors", "vocab.txt"}) std::filesystem::copy_file(from / f, tmp / f);
    nlohmann::json cfg = nlohmann::json::parse(read_text(tmp / "config.json"));
    cfg[key] = value;
    write_text(tmp / "config.json", cfg.dump(1));
    return tmp.path;
}

// The UserError a BertEmbedder of `o` ends in, "(accepted)" when it is made.
inline std::string bert_refusal(const BertEmbedderOptions& o) {
    try {
        BertEmbedder e(o, nullptr);
    } catch (const UserError& err) {
        return err.what();
    }
    return "(accepted)";
}

}  // namespace retro::test
