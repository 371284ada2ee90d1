// What bert_model.cpp and modernbert_model.cpp share inside BertModel: the packed dense layers, the scratch buffers and
// the tensor loader. Not for other files.
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "embed/bert_model.h"
#include "embed/checkpoint_weights.h"
#include "nn/packed_linear.h"

namespace retro {

struct BertModel::PackedLayers {
    struct Layer {
        nn::PackedLinear qkv, o, ffn1, ffn2;   // ModernBERT: ffn1 is Wi (2 x intermediate outputs: input | gate)
    };
    std::once_flag once;
    std::vector<Layer> layers;
};

namespace bert_detail {

// Scratch without the zero fill of std::vector (every element is written before it is read).
inline std::unique_ptr<float[]> scratch(std::int64_t n) {
    return std::unique_ptr<float[]>(new float[static_cast<std::size_t>(n > 1 ? n : 1)]);
}

// Loads a tensor of the expected shape as fp32, trying "<prefix>name" and the old gamma/beta names; UserError naming
// the weights file where it is missing or of another shape.
std::vector<float> load(const CheckpointWeights& st, const std::string& prefix, const std::string& name,
                        const std::vector<std::int64_t>& shape);

// ModernBERT's fields of config.json into `c` (modernbert_model.cpp): norm_eps, hidden_activation, the bias flags,
// layer_types (or global_attn_every_n_layers), local_attention, the rotary thetas (rope_parameters, or
// global_rope_theta / local_rope_theta); UserError naming `path` for what it cannot follow (rope scaling).
void modernbert_config_read(const std::string& path, const nlohmann::json& j, BertConfig& c);

}  // namespace bert_detail

}  // namespace retro
