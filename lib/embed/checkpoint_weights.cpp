// Implementation of checkpoint_weights.h.
#include "embed/checkpoint_weights.h"

#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"
#include "core/fingerprint.h"
#include "core/lfs_pointer.h"
#include "core/manifest.h"
#include "core/weights_file.h"

namespace retro {

namespace fs = std::filesystem;

namespace {

// The four forms, in the order transformers' from_pretrained takes them.
constexpr const char* kSingle = "model.safetensors";
constexpr const char* kIndex = "model.safetensors.index.json";
constexpr const char* kTorchSingle = "pytorch_model.bin";
constexpr const char* kTorchIndex = "pytorch_model.bin.index.json";
constexpr const char* kForms[] = {kSingle, kIndex, kTorchSingle, kTorchIndex};

bool is_index(const fs::path& p) { return p.filename() == kIndex || p.filename() == kTorchIndex; }

// The index's weight_map, each shard a plain file name in the folder.
std::map<std::string, std::string> read_weight_map(const std::string& index_path) {
    const nlohmann::json j = json_read_file(index_path);
    if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object() || j["weight_map"].empty())
        user_error_in(index_path, "has no \"weight_map\" of tensor names to shard files", "restore the checkpoint's index file");
    std::map<std::string, std::string> map;
    for (const auto& [name, file] : j["weight_map"].items()) {
        if (!file.is_string()) user_error_in(index_path, "maps '" + name + "' to something other than a file name");
        const std::string f = file.get<std::string>();
        if (f.empty() || f.find('/') != std::string::npos || f.find('\\') != std::string::npos || f == "." || f == "..")
            user_error_in(index_path, "maps '" + name + "' to '" + f + "', not a file beside it", "restore the checkpoint's index file");
        map[name] = f;
    }
    return map;
}

std::set<std::string> shard_names(const std::map<std::string, std::string>& map) {
    std::set<std::string> names;
    for (const auto& [tensor, file] : map) names.insert(file);
    return names;
}

}  // namespace

bool CheckpointWeights::present(const std::string& dir) {
    for (const char* form : kForms)
        if (fs::exists(fs::path(dir) / form)) return true;
    return false;
}

void CheckpointWeights::require(const std::string& dir, const std::string& folder_kind) {
    if (present(dir)) return;
    const fs::path d(dir);
    std::string other, fix = "download the checkpoint's weights (model.safetensors or pytorch_model.bin) into the folder";
    if (fs::exists(d / "tf_model.h5")) {
        other = "TensorFlow weights (tf_model.h5)";
        fix = "convert them once in Python: AutoModel.from_pretrained(DIR, from_tf=True).save_pretrained(DIR)";
    } else if (fs::exists(d / "flax_model.msgpack")) {
        other = "Flax weights (flax_model.msgpack)";
        fix = "convert them once in Python: AutoModel.from_pretrained(DIR, from_flax=True).save_pretrained(DIR)";
    } else if (fs::exists(d / "model.onnx") || fs::exists(d / "onnx")) {
        other = "ONNX weights";
    } else if (fs::exists(d / "openvino") || fs::exists(d / "openvino_model.xml")) {
        other = "OpenVINO weights";
    }
    user_error_in((d / kSingle).string(),
                  "missing (" + folder_kind + " needs " + kSingle + " or " + kTorchSingle + ", or their shards and index" +
                      (other.empty() ? std::string(")") : "; the folder holds only " + other + ")"),
                  fix);
}

std::string CheckpointWeights::path_of(const std::string& dir) {
    for (const char* form : kForms)
        if (fs::exists(fs::path(dir) / form)) return (fs::path(dir) / form).string();
    return (fs::path(dir) / kSingle).string();
}

std::string CheckpointWeights::fingerprint(const std::string& dir) {
    const std::string path = path_of(dir);
    refuse_lfs_pointer_file(path);   // before its fingerprint is compared with a recorded one
    if (!is_index(path)) return fingerprint_file(path);
    std::string all = fingerprint_file(path);
    for (const std::string& shard : shard_names(read_weight_map(path))) {
        const fs::path p = fs::path(dir) / shard;
        if (!fs::exists(p)) user_error_in(p.string(), "missing (a shard " + fs::path(path).filename().string() + " names)", "download the checkpoint's shards whole");
        refuse_lfs_pointer_file(p.string());
        all += " " + fingerprint_file(p.string());
    }
    return fingerprint_bytes(all.data(), all.size());
}

CheckpointWeights::CheckpointWeights(const std::string& dir, const std::string& folder_kind) : path_(path_of(dir)) {
    require(dir, folder_kind);
    const fs::path file = path_;
    if (!is_index(file)) {
        files_.push_back(std::make_unique<WeightsFile>(path_));
        for (const auto& [name, view] : files_[0]->tensors()) {
            tensors_[name] = &view;
            owner_[name] = &files_[0]->path();
        }
        return;
    }
    const std::map<std::string, std::string> map = read_weight_map(path_);
    std::map<std::string, const WeightsFile*> by_name;
    for (const std::string& shard : shard_names(map)) {
        const fs::path p = fs::path(dir) / shard;
        if (!fs::exists(p)) user_error_in(p.string(), "missing (a shard " + file.filename().string() + " names)", "download the checkpoint's shards whole");
        files_.push_back(std::make_unique<WeightsFile>(p.string()));
        by_name[shard] = files_.back().get();
    }
    for (const auto& [name, shard] : map) {
        const WeightsFile* f = by_name.at(shard);
        if (!f->has(name))
            user_error_in(path_, "maps '" + name + "' to " + shard + ", which has no such tensor", "download the checkpoint's shards whole");
        tensors_[name] = &f->tensors().at(name);
        owner_[name] = &f->path();
    }
}

CheckpointWeights::~CheckpointWeights() = default;

const TensorView& CheckpointWeights::get(const std::string& name) const {
    const auto it = tensors_.find(name);
    if (it == tensors_.end()) {
        for (const auto& f : files_)   // a torch file's entry that is not a tensor RetroKit reads: say what it is
            if (const std::string why = f->why_not(name); !why.empty())
                user_error_in(f->path(), "holds '" + name + "' as " + why + ", not a tensor RetroKit reads");
        user_error_in(path_, "has no tensor '" + name + "'");
    }
    return *it->second;
}

const std::string& CheckpointWeights::file_of(const std::string& name) const {
    const auto it = owner_.find(name);
    return it == owner_.end() ? path_ : *it->second;
}

}  // namespace retro
