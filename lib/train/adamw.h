// AdamW exactly as torch.optim.AdamW (single-tensor path, amsgrad off) computes it, per element:
//   t += 1;  p *= 1 - lr*wd   (decoupled decay, only on tensors with >= 2 dims: RP's get_optimizer rule)
//   m = lerp(m, g, 1 - beta1);  v = beta2 v + (1 - beta2) g^2
//   p -= (lr / (1 - beta1^t)) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
// State (step, m, v) saves to and loads from .safetensors for checkpoints.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/params.h"

namespace retro {

struct AdamWConfig {
    double lr = 3e-4;
    double beta1 = 0.9;
    double beta2 = 0.999;
    double eps = 1e-8;
    double weight_decay = 0.1;
};

template <typename T>
class AdamW {
public:
    AdamW(const ParamLayout& layout, const AdamWConfig& config);
    // One update of `params` from `grads` at learning rate `lr` (the schedule's value for this step).
    void step(std::vector<T>& params, const std::vector<T>& grads, double lr);
    std::int64_t steps() const { return t_; }
    const AdamWConfig& config() const { return config_; }

    void save(const std::string& path) const;
    void load(const std::string& path);   // UserError naming the file when it does not fit the layout

private:
    AdamWConfig config_;
    std::vector<std::pair<std::int64_t, std::int64_t>> decay_ranges_;   // [begin, end) of decayed tensors
    std::vector<std::uint8_t> decay_;                                    // per element
    std::vector<T> m_, v_;
    std::int64_t t_ = 0;
};

}  // namespace retro
