// Implementation of st_modules.h.
#include "embed/st_modules.h"

#include <cmath>
#include <filesystem>

#include "core/blas_threads.h"
#include "core/error.h"
#include "core/manifest.h"
#include "core/safetensors.h"
#include "embed/checkpoint_tensor.h"
#include "embed/checkpoint_weights.h"

namespace retro {

namespace {

namespace fs = std::filesystem;

// The last dotted component of a module or activation type: "sentence_transformers.models.Dense" -> "Dense".
std::string short_type(const std::string& t) {
    auto dot = t.rfind('.');
    return dot == std::string::npos ? t : t.substr(dot + 1);
}

void read_pooling(const std::string& dir, StModules& m) {
    const std::string path = (fs::path(dir) / "config.json").string();
    if (!fs::exists(path)) user_error_in(path, "missing (the Pooling module's settings)", "copy the model's 1_Pooling folder whole");
    nlohmann::json j = json_read_file(path);
    std::vector<std::string> on;
    for (auto& [key, value] : j.items())
        if (key.rfind("pooling_mode_", 0) == 0 && value.is_boolean() && value.get<bool>()) on.push_back(key.substr(13));
    if (j.contains("pooling_mode") && j["pooling_mode"].is_string()) on = {j["pooling_mode"].get<std::string>()};
    if (on.size() != 1 || (on[0] != "mean_tokens" && on[0] != "max_tokens" && on[0] != "cls_token" && on[0] != "mean" &&
                           on[0] != "max" && on[0] != "cls"))
        user_error_in(path, "asks for pooling other than exactly one of mean tokens, max tokens or the CLS token",
                      "use a model with mean, max or CLS pooling");
    m.pooling = on[0].rfind("mean", 0) == 0 ? "mean" : on[0].rfind("max", 0) == 0 ? "max" : "cls";
    if (j.contains("include_prompt") && j["include_prompt"].is_boolean()) m.include_prompt = j["include_prompt"].get<bool>();
    // "word_embedding_dimension" (sentence-transformers 2-5, as GTR and Sentence-T5 ship) or "embedding_dimension" (6)
    const char* key = j.contains("word_embedding_dimension") ? "word_embedding_dimension" : "embedding_dimension";
    if (!j.contains(key) || !j[key].is_number_integer() || j[key].get<int>() <= 0)
        user_error_in(path, "has no positive integer \"word_embedding_dimension\"", "copy the model's 1_Pooling folder whole");
    m.pooling_dim = j[key].get<int>();
}

StDense read_dense(const std::string& dir) {
    StDense d;
    d.dir = dir;
    const std::string cfg = (fs::path(dir) / "config.json").string();
    if (!fs::exists(cfg)) user_error_in(cfg, "missing (the Dense module's settings)", "copy the model's Dense folder whole");
    nlohmann::json j = json_read_file(cfg);
    if (!j.contains("in_features") || !j["in_features"].is_number_integer() || !j.contains("out_features") ||
        !j["out_features"].is_number_integer())
        user_error_in(cfg, "needs integer \"in_features\" and \"out_features\"", "copy the model's Dense folder whole");
    d.in = j["in_features"].get<int>();
    d.out = j["out_features"].get<int>();
    if (d.in <= 0 || d.out <= 0) user_error_in(cfg, cat("has in_features ", d.in, " and out_features ", d.out), "copy the model's Dense folder whole");
    const std::string act = short_type(j.value("activation_function", std::string("torch.nn.modules.activation.Tanh")));
    if (act != "Identity" && act != "Tanh")
        user_error_in(cfg, "activation_function \"" + act + "\" is not supported", "use a model whose Dense is Identity or Tanh");
    d.tanh = act == "Tanh";
    // sentence-transformers 6's Dense options beyond a plain projection of the pooled embedding
    if (j.contains("use_residual") && j["use_residual"] != false)
        user_error_in(cfg, "has use_residual " + j["use_residual"].dump() + " (a residual connection around the Dense), which RetroKit does not apply",
                      "use a model whose Dense modules are plain projections");
    for (const char* key : {"module_input_name", "module_output_name"})
        if (j.contains(key) && !j[key].is_null() && j[key] != "sentence_embedding")
            user_error_in(cfg, std::string("has ") + key + " " + j[key].dump() + ": a Dense over another output than the pooled sentence embedding",
                          "use a model whose Dense modules project the sentence embedding");
    const std::string st_path = CheckpointWeights::path_of(dir);
    if (!CheckpointWeights::present(dir))
        user_error_in(st_path, "missing (the Dense module's weights)", "copy the model's Dense folder whole");
    CheckpointWeights st(dir, "a Dense module's folder");
    if (!st.has("linear.weight")) user_error_in(st_path, "has no tensor 'linear.weight'", "give the Dense module's weights");
    const std::vector<float> w = checkpoint_tensor_f32(st, "linear.weight", {d.out, d.in}, cfg);
    std::vector<float> b;
    if (j.value("bias", true)) {
        if (!st.has("linear.bias")) user_error_in(st_path, "has no tensor 'linear.bias' (config.json says bias)");
        b = checkpoint_tensor_f32(st, "linear.bias", {d.out}, cfg);
    }
    d.linear = nn::PackedLinear(w.data(), b.empty() ? nullptr : b.data(), d.out, d.in);
    return d;
}

}  // namespace

void StDense::apply(const float* x, std::int64_t rows, float* y) const {
    BlasSingleThread one_blas_thread;
    linear.apply(x, rows, y);
    if (tanh)
        for (std::int64_t i = 0; i < rows * out; ++i) y[i] = std::tanh(y[i]);
}

StModules st_modules_read(const std::string& dir) {
    StModules m;
    m.transformer_dir = dir;
    const std::string path = (fs::path(dir) / "modules.json").string();
    if (!fs::exists(path)) return m;
    m.present = true;
    nlohmann::json j = json_read_file(path);
    if (!j.is_array() || j.empty()) user_error_in(path, "is not a list of modules", "copy the model's modules.json");
    bool transformer = false;
    for (std::size_t i = 0; i < j.size(); ++i) {
        const auto& e = j[i];
        if (!e.is_object() || !e.contains("type") || !e["type"].is_string())
            user_error_in(path, cat("module ", i, " has no \"type\""), "copy the model's modules.json");
        const std::string type = short_type(e["type"].get<std::string>());
        const std::string sub = (fs::path(dir) / e.value("path", std::string())).lexically_normal().string();
        const bool first = i == 0;
        if (type == "Transformer") {
            if (!first) user_error_in(path, "lists the Transformer module after another one", "copy the model's modules.json");
            m.transformer_dir = sub;
            if (!sub.empty() && sub.back() == '/' && sub.size() > 1) m.transformer_dir.pop_back();
            transformer = true;
        } else if (type == "Pooling") {
            if (!transformer || m.pooling_dim) user_error_in(path, "lists Pooling other than once, right after the Transformer");
            read_pooling(sub, m);
        } else if (type == "Dense") {
            if (!m.pooling_dim) user_error_in(path, "lists a Dense module before Pooling");
            m.dense.push_back(read_dense(sub));
            m.files.push_back(sub);
            const std::size_t n = m.dense.size();
            if (n > 1 && m.dense[n - 1].in != m.dense[n - 2].out)
                user_error_in((fs::path(sub) / "config.json").string(),
                              cat("has in_features ", m.dense[n - 1].in, ", the Dense before it gives ", m.dense[n - 2].out, "-d vectors"),
                              "keep the Dense folders from the same model");
        } else if (type == "Normalize") {
            m.normalize = true;
        } else {
            user_error_in(path, "lists a " + type + " module, which RetroKit does not run",
                          "use a model made of Transformer, Pooling, Dense and Normalize modules");
        }
    }
    if (!transformer) user_error_in(path, "lists no Transformer module", "copy the model's modules.json");
    const std::string sb = (fs::path(dir) / "sentence_bert_config.json").string();
    if (fs::exists(sb)) {
        nlohmann::json c = json_read_file(sb);
        if (c.contains("max_seq_length") && c["max_seq_length"].is_number_integer()) m.max_seq_length = c["max_seq_length"].get<int>();
    }
    return m;
}

std::string st_default_prompt(const std::string& dir) {
    const std::string path = (fs::path(dir) / "config_sentence_transformers.json").string();
    if (!fs::exists(path)) return {};
    const nlohmann::json j = json_read_file(path);
    if (!j.is_object() || !j.contains("default_prompt_name") || !j["default_prompt_name"].is_string()) return {};
    const std::string name = j["default_prompt_name"].get<std::string>();
    if (j.contains("prompts") && j["prompts"].is_object() && j["prompts"].contains(name) && j["prompts"][name].is_null())
        return {};   // sentence-transformers: no prompt
    if (!j.contains("prompts") || !j["prompts"].is_object() || !j["prompts"].contains(name) || !j["prompts"][name].is_string())
        user_error_in(path, "names the default prompt \"" + name + "\", which its \"prompts\" do not hold",
                      "restore the model's config_sentence_transformers.json");
    return j["prompts"][name].get<std::string>();
}

std::optional<std::string> st_named_prompt(const std::string& dir, const std::string& name) {
    const std::string path = (fs::path(dir) / "config_sentence_transformers.json").string();
    if (!fs::exists(path)) return std::nullopt;
    const nlohmann::json j = json_read_file(path);
    if (!j.is_object() || !j.contains("prompts") || !j["prompts"].is_object() || !j["prompts"].contains(name)) return std::nullopt;
    const nlohmann::json& p = j["prompts"][name];
    if (p.is_null()) return std::string();
    if (!p.is_string()) user_error_in(path, "holds the prompt \"" + name + "\" as " + p.dump().substr(0, 40) + ", not a text",
                                      "restore the model's config_sentence_transformers.json");
    return p.get<std::string>();
}

}  // namespace retro
