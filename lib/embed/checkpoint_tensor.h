// Reading a Hugging Face checkpoint's tensors for the CPU encoders: the prefix a model's tensors
// sit under ("" for BertModel / T5EncoderModel, "bert." in BertForXxx, "0.auto_model." in a saved
// sentence-transformers state dict), and one tensor of an expected shape as fp32 (from F32, F16
// or BF16), with one-line errors naming the file and tensor.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace retro {

class CheckpointWeights;

// The shortest prefix p such that p + key is a tensor of `st`; false when no tensor name ends in `key`.
bool checkpoint_prefix(const CheckpointWeights& st, const std::string& key, std::string& prefix);

// Tensor `name` as fp32, checked against `shape` (`config` names the file the shape comes from, for
// the message). UserError when the shape differs or the dtype is not F32/F16/BF16.
std::vector<float> checkpoint_tensor_f32(const CheckpointWeights& st, const std::string& name,
                                         const std::vector<std::int64_t>& shape, const std::string& config = "config.json");

}  // namespace retro
