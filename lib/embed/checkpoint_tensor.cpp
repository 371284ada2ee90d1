// Implementation of checkpoint_tensor.h.
#include "embed/checkpoint_tensor.h"

#include <algorithm>

#include "core/dtype.h"
#include "core/error.h"
#include "core/safetensors.h"
#include "embed/checkpoint_weights.h"

namespace retro {

bool checkpoint_prefix(const CheckpointWeights& st, const std::string& key, std::string& prefix) {
    bool found = false;
    for (const auto& [name, view] : st.tensors()) {
        if (name.size() >= key.size() && name.compare(name.size() - key.size(), key.size(), key) == 0 &&
            (!found || name.size() < prefix.size() + key.size())) {
            prefix = name.substr(0, name.size() - key.size());
            found = true;
        }
    }
    return found;
}

std::vector<float> checkpoint_tensor_f32(const CheckpointWeights& st, const std::string& name,
                                         const std::vector<std::int64_t>& shape, const std::string& config) {
    const TensorView& t = st.get(name);
    if (t.shape != shape)
        user_error_in(st.file_of(name), "tensor '" + name + "' has shape " + shape_string(t.shape) + ", " + config + " implies " +
                                     shape_string(shape),
                      "keep " + config + " and the weights from the same checkpoint");
    std::vector<float> v(static_cast<std::size_t>(t.numel()));
    switch (t.dtype) {
        case DType::F32: std::copy_n(static_cast<const float*>(t.data), v.size(), v.data()); break;
        case DType::F16:
            for (std::size_t i = 0; i < v.size(); ++i) v[i] = f16_to_f32(static_cast<const std::uint16_t*>(t.data)[i]);
            break;
        case DType::BF16:
            for (std::size_t i = 0; i < v.size(); ++i) v[i] = bf16_to_f32(static_cast<const std::uint16_t*>(t.data)[i]);
            break;
        default:
            user_error_in(st.file_of(name), "tensor '" + name + "' has dtype " + dtype_name(t.dtype),
                          "convert the checkpoint to F32, F16 or BF16");
    }
    return v;
}

}  // namespace retro
