// One weights file of either form RetroKit reads: a .safetensors file (mapped; core/safetensors.h) or a torch.save
// file — pytorch_model.bin, a .pt / .pth state_dict — (read; core/torch_checkpoint.h), told apart by their first
// bytes (a zip archive or a pickle is torch's; anything else goes to the safetensors reader, which names what is
// wrong), not by their names. The encoders' checkpoint folders (embed/checkpoint_weights.h) and retro-train
// --init-from (a RETRO-pytorch state_dict saved with torch.save) read through it.
#pragma once
#include <map>
#include <string>

#include "core/safetensors.h"
#include "core/torch_checkpoint.h"

namespace retro {

class WeightsFile {
public:
    explicit WeightsFile(const std::string& path);   // UserError naming the file, as its reader's
    // True when the file starts as torch.save's formats do (zip archive, legacy pickle stream).
    static bool looks_like_torch(const std::string& path);

    bool is_torch() const { return is_torch_; }
    const std::map<std::string, TensorView>& tensors() const { return is_torch_ ? torch_.tensors() : safetensors_.tensors(); }
    bool has(const std::string& name) const { return tensors().count(name) != 0; }
    // Throws UserError naming the file and tensor when missing.
    const TensorView& get(const std::string& name) const { return is_torch_ ? torch_.get(name) : safetensors_.get(name); }
    // What a torch file's left-out entry is (TorchCheckpointFile::why_not); "" otherwise.
    std::string why_not(const std::string& name) const { return is_torch_ ? torch_.why_not(name) : std::string(); }
    // The key a torch file's state_dict was under ("" = its top level, and for safetensors).
    std::string nested_key() const { return is_torch_ ? torch_.nested_key() : std::string(); }
    // The prefix every tensor name has where `name` (a tensor the reader needs, e.g. token_emb.weight) is only found
    // under it: the one PyTorch's wrappers put — "module." (DataParallel / DistributedDataParallel), "_orig_mod."
    // (torch.compile), in any nesting — or else the longest dotted prefix all names share (a LightningModule's
    // attribute holding the model, "retro."); "" where `name` is there as it is, or under no such prefix.
    std::string prefix_holding(const std::string& name) const;
    // The safetensors header's __metadata__; empty for a torch file.
    const std::map<std::string, std::string>& metadata() const;
    const std::string& path() const { return path_; }

private:
    std::string path_;
    bool is_torch_ = false;
    SafetensorsFile safetensors_;
    TorchCheckpointFile torch_;
};

// For "has no tensor X" messages: where a torch file's tensors were read from and how many there are
// (" (of the 12 tensors of the state_dict under 'model')"); "" for safetensors.
std::string weights_file_where(const WeightsFile& f);

}  // namespace retro
