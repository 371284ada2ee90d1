// RETRO parameters in one flat buffer (llm.c style), each tensor named as in RETRO-pytorch 0.3.9's
// state_dict (e.g. "decoder.layers.1.1.fn.cross_attn.null_k"), so RP weights load by name and ours load
// into RP with load_state_dict. Gradients use a second buffer with the same layout.
// Files: .safetensors, F32 (F64 accepted on load), plus RP's two rotary `inv_freq` buffers so that
// RP's strict load_state_dict accepts the file; they are checked, not loaded.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "model/config.h"

namespace retro {

struct ParamEntry {
    std::string name;
    std::vector<std::int64_t> shape;
    std::int64_t offset = 0, numel = 0;
    int init = 0;        // ParamInit
    double scale = 1;    // LINEAR_*: the uniform bound (1/sqrt(fan_in)); ONES: the value; NORMAL: the std
};

enum ParamInit { PARAM_INIT_NORMAL = 0, PARAM_INIT_ONES = 1, PARAM_INIT_LINEAR_WEIGHT = 2, PARAM_INIT_LINEAR_BIAS = 3 };

// The tensor list of a config, in RP's state_dict order.
class ParamLayout {
public:
    explicit ParamLayout(const RetroConfig& c);
    const std::vector<ParamEntry>& entries() const { return entries_; }
    std::int64_t total() const { return total_; }
    const ParamEntry& at(const std::string& name) const;   // internal error when missing
    std::int64_t offset(const std::string& name) const { return at(name).offset; }
    bool has(const std::string& name) const { return index_.count(name) != 0; }

private:
    void add(const std::string& name, std::vector<std::int64_t> shape, int init, double scale = 1);
    std::vector<ParamEntry> entries_;
    std::map<std::string, std::size_t> index_;
    std::int64_t total_ = 0;
};

// PyTorch's default initialisation (Linear: U(+-1/sqrt(fan_in)) for weight and bias; Embedding and null
// k/v: N(0, 1), token_emb and pos_emb N(0, 1/dec_dim) with tie_embeddings; norm gains 1), drawn from a seeded
// generator of our own (not torch's stream).
template <typename T>
void params_init(std::vector<T>& data, const ParamLayout& layout, std::uint64_t seed);

template <typename T>
void params_save(const std::string& path, const std::vector<T>& data, const ParamLayout& layout,
                 const RetroConfig& config, const std::map<std::string, std::string>& metadata = {});
// Reads one tensor `v` (F32 or F64, already shape-checked against `e`) of file `path` into `dst`; a UserError
// naming the file for another dtype or a non-finite value. Shared by params_load and --init-from.
struct TensorView;
template <typename T>
void params_read_tensor(const std::string& path, const ParamEntry& e, const TensorView& v, T* dst);
// Loads every tensor by name from a .safetensors file or a torch.save state_dict (RETRO-pytorch's, under a
// research checkpoint's "model" or a DDP / torch.compile name prefix too: core/weights_file.h); a missing, misshapen
// or unexpected tensor is a UserError naming the file.
template <typename T>
void params_load(const std::string& path, std::vector<T>& data, const ParamLayout& layout, const RetroConfig& config);

}  // namespace retro
