// A Hugging Face checkpoint folder's weights: DIR/model.safetensors, or where that file is absent, the shards
// DIR/model.safetensors.index.json names — transformers' save_pretrained splits weights above max_shard_size
// (5 GB) into model-00001-of-0000N.safetensors files and writes {"metadata": {...}, "weight_map": {tensor: file}}.
// The encoders (bert, t5, clip, a sentence-transformers Dense module) read their tensors through it.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/safetensors.h"

namespace retro {

class CheckpointWeights {
public:
    // Opens DIR's weights; UserError naming DIR/model.safetensors when neither form is there (`folder_kind`, e.g.
    // "a BERT model folder", says whose folder), naming the index or a shard when they are bad or missing.
    CheckpointWeights(const std::string& dir, const std::string& folder_kind);
    ~CheckpointWeights();
    CheckpointWeights(const CheckpointWeights&) = delete;
    CheckpointWeights& operator=(const CheckpointWeights&) = delete;

    // True when DIR holds model.safetensors or model.safetensors.index.json.
    static bool present(const std::string& dir);
    // DIR/model.safetensors, or the index where the weights are sharded: the file messages name.
    static std::string path_of(const std::string& dir);
    // The weights' fingerprint: model.safetensors' own (core/fingerprint.h); sharded, xxh3-64 of the index's
    // fingerprint and its shards' (in file-name order) joined by single spaces. UserError as the constructor's.
    static std::string fingerprint(const std::string& dir);

    bool has(const std::string& name) const { return tensors_.count(name) != 0; }
    // Throws UserError naming the file and tensor when missing.
    const TensorView& get(const std::string& name) const;
    // Every tensor by name (the index's weight_map where sharded).
    const std::map<std::string, const TensorView*>& tensors() const { return tensors_; }
    // The file a tensor is in, for messages; path() where it is not there.
    const std::string& file_of(const std::string& name) const;
    const std::string& path() const { return path_; }

private:
    std::string path_;
    std::vector<std::unique_ptr<SafetensorsFile>> files_;
    std::map<std::string, const TensorView*> tensors_;
    std::map<std::string, const SafetensorsFile*> owner_;
};

}  // namespace retro
