#include "train/init_from.h"

#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/fingerprint.h"
#include "core/manifest.h"
#include "core/torch_pickle.h"
#include "core/weights_file.h"
#include "model/param_groups.h"

namespace fs = std::filesystem;

namespace retro {

InitFromInfo init_from_resolve(const std::string& base) {
    InitFromInfo info;
    const fs::path p(base);
    if (fs::is_regular_file(p)) {
        info.weights = base;
    } else if (fs::is_directory(p)) {
        if (!fs::exists(p / "model.safetensors"))
            user_error_in(base, "holds no model.safetensors",
                          "pass a finished run folder, one of its checkpoints/step_* folders or a .safetensors file");
        info.weights = (p / "model.safetensors").string();
    } else {
        std::error_code ec;   // (a device or a pipe was "not found")
        user_error_in(base, fs::exists(p, ec) ? "is neither a file nor a folder" : "not found",
                      "--init-from takes a run folder, a checkpoint folder, a .safetensors file or a torch.save state_dict");
    }
    info.fingerprint = fingerprint_file(info.weights);
    std::error_code size_ec;
    info.bytes = static_cast<std::int64_t>(std::filesystem::file_size(info.weights, size_ec));
    if (fs::is_directory(p) && fs::exists(p / "manifest.json")) {   // a finished run: its manifest records the weights
        const nlohmann::json m = manifest_read(base);
        for (const auto& o : m["outputs"])
            if (o.is_object() && o.value("path", nlohmann::json()) == "model.safetensors" && o.contains("fingerprint") &&
                o["fingerprint"].is_string() && o["fingerprint"] != info.fingerprint)
                user_error_in(info.weights, "has changed since retro-train wrote it: its bytes no longer match the "
                                            "fingerprint in " + (p / "manifest.json").string() + " (edited, replaced or damaged)",
                              "train the base again, or pass the .safetensors file itself to take it as it is");
    }
    return info;
}

namespace {
// The base's recorded RetroKit config (params_save's metadata), or null when absent (e.g. RP's own weights).
nlohmann::json base_config(const WeightsFile& f) {
    auto it = f.metadata().find("retrokit_config");
    if (it == f.metadata().end()) return nullptr;
    try {
        return nlohmann::json::parse(it->second);
    } catch (const std::exception&) {
        user_error_in(f.path(), "has an unreadable \"retrokit_config\" metadata entry");
    }
}

}  // namespace

template <typename T>
void init_from_load(InitFromInfo& info, std::vector<T>& params, const ParamLayout& layout, const RetroConfig& config) {
    const WeightsFile f(info.weights);   // .safetensors, or a RETRO-pytorch state_dict saved with torch.save
    const std::string& path = info.weights;
    const auto bc = base_config(f);
    for (const char* key : {"heads", "dim_head"})
        if (bc.is_object() && bc.contains(key) && bc[key] != config.to_json()[key])
            user_error_in(path, cat("base decoder has ", key, " = ", bc[key].dump(), ", the config has ",
                                    config.to_json()[key].dump()),
                          "retro-fit with the base's decoder shape (only CCA and encoder may differ)");
    if (bc.is_object() && bc.value("tie_embeddings", false) != config.tie_embeddings)
        user_error_in(path, cat("base has tie_embeddings = ", bc.value("tie_embeddings", false), ", the config has ",
                                config.tie_embeddings),
                      "retro-fit with the base's head: set \"tie_embeddings\" as the base's config does");
    if (f.has("m") && f.has("v") && !f.has(layout.entries().front().name))   // (AdamW's moments, train/adamw.h)
        user_error_in(path, "is a checkpoint's optimizer state (AdamW's moments), not model weights",
                      "give the checkpoint folder, or the model.safetensors beside it");
    const std::string prefix = f.prefix_holding(layout.entries().front().name);
    info.within = f.nested_key();
    info.prefix = prefix;
    info.copied = info.fresh = info.ignored = 0;
    for (const auto& e : layout.entries()) {
        const bool decoder = param_group(e.name) == ParamGroup::DECODER;
        if (!f.has(prefix + e.name)) {
            if (const std::string why = f.why_not(prefix + e.name); !why.empty())   // a torch file's entry it left out
                user_error_in(path, "holds \"" + e.name + "\" as " + why + ", not a tensor RetroKit reads",
                              "save the weights as plain float tensors");
            if (decoder)
                user_error_in(path, "has no decoder tensor \"" + e.name + "\"" + weights_file_where(f),
                              "retro-fit with the base's decoder shape (depth, widths, vocabulary, max_seq_len)");
            info.fresh++;
            continue;
        }
        const TensorView& v = f.get(prefix + e.name);
        if (v.shape != e.shape) {
            if (decoder)
                user_error_in(path, "decoder tensor \"" + e.name + "\" has shape " + shape_string(v.shape) +
                                        ", the config needs " + shape_string(e.shape),
                              "retro-fit with the base's decoder shape (only CCA and encoder may differ)");
            info.fresh++;
            continue;
        }
        params_read_tensor(path, e, v, params.data() + e.offset);
        info.copied++;
    }
    for (const auto& [full_name, view] : f.tensors()) {
        const std::string name = full_name.substr(prefix.size());
        if (layout.has(name) || name.find("rotary_pos_emb.inv_freq") != std::string::npos) continue;
        if (param_group(name) == ParamGroup::DECODER)
            user_error_in(path, "has decoder tensor \"" + quoted(name) + "\" that the config lacks",
                          "retro-fit with the base's decoder shape (depth, widths, vocabulary, max_seq_len)");
        info.ignored++;
    }
}

template void init_from_load<float>(InitFromInfo&, std::vector<float>&, const ParamLayout&, const RetroConfig&);
template void init_from_load<double>(InitFromInfo&, std::vector<double>&, const ParamLayout&, const RetroConfig&);

}  // namespace retro
