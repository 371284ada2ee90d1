// A Hugging Face checkpoint folder's weights, in the order transformers looks for them: DIR/model.safetensors;
// the shards DIR/model.safetensors.index.json names — save_pretrained splits weights above max_shard_size (5 GB)
// into model-00001-of-0000N.safetensors files and writes {"metadata": {...}, "weight_map": {tensor: file}};
// DIR/pytorch_model.bin (torch.save's state_dict, read by core/torch_checkpoint.h without Python); the shards
// DIR/pytorch_model.bin.index.json names. The encoders (bert, t5, clip, a sentence-transformers Dense module)
// read their tensors through it.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/weights_file.h"

namespace retro {

class CheckpointWeights {
public:
    // Opens DIR's weights; UserError naming DIR/model.safetensors when no form is there (`folder_kind`, e.g.
    // "a BERT model folder", says whose folder), naming the index or a shard when they are bad or missing.
    CheckpointWeights(const std::string& dir, const std::string& folder_kind);
    ~CheckpointWeights();
    CheckpointWeights(const CheckpointWeights&) = delete;
    CheckpointWeights& operator=(const CheckpointWeights&) = delete;

    // True when DIR holds one of the four forms.
    static bool present(const std::string& dir);
    // UserError naming DIR/model.safetensors when DIR holds none of them (`folder_kind` as the constructor's); where
    // it holds another framework's weights only (TensorFlow's tf_model.h5, Flax's flax_model.msgpack, ONNX,
    // OpenVINO), the line says which and how to convert them.
    static void require(const std::string& dir, const std::string& folder_kind);
    // The first form DIR holds (DIR/model.safetensors where none): the file messages name.
    static std::string path_of(const std::string& dir);
    // The weights' fingerprint: the single file's own (core/fingerprint.h); sharded, xxh3-64 of the index's
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
    std::vector<std::unique_ptr<WeightsFile>> files_;
    std::map<std::string, const TensorView*> tensors_;
    std::map<std::string, const std::string*> owner_;   // the path of the file a tensor is in
};

}  // namespace retro
