// AdamW exactly as torch.optim.AdamW (single-tensor path, amsgrad off) computes it, per element:
//   t += 1;  p *= 1 - lr*wd   (decoupled decay, only on tensors with >= 2 dims: RP's get_optimizer rule)
//   m = lerp(m, g, 1 - beta1);  v = beta2 v + (1 - beta2) g^2
//   p -= (lr / (1 - beta1^t)) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
// State (step, m, v) saves to and loads from .safetensors for checkpoints.
// Frozen tensors (retro-fitting, model/param_groups.h): only the trainable tensors are updated; a frozen one
// gets no decay and no step and has no m/v (the state holds the trainable elements only, in layout order).
// A tensor may have its own learning-rate scale (torch's per-param-group lr: retro-train --retrieval-lr-scale for
// CCA and the encoder): its step and its decoupled decay use lr x scale; scale 1 gives the same bits as none.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/params.h"
#include "nn/nn_backend.h"

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
    // `trainable`: one flag per layout entry; empty = every tensor trains. `lr_scale`: one per layout entry; empty =
    // 1 for every tensor.
    AdamW(const ParamLayout& layout, const AdamWConfig& config, const std::vector<std::uint8_t>& trainable = {},
          const std::vector<double>& lr_scale = {});
    // One update of `params` from `grads` at learning rate `lr` (the schedule's value for this step); elements
    // outside ranges() are neither read nor written.
    void step(std::vector<T>& params, const std::vector<T>& grads, double lr);
    // For an update run elsewhere (a backend's adamw_update, nn/nn_backend.h, over device copies of the moments):
    // advances the step count as step() does and returns the per-element constants step() would use in float.
    nn::NnBackend::AdamWScalars next_step_scalars(double lr);
    // The constants of range r (ranges()) at this step for the schedule's `lr`: next_step_scalars's with
    // lr x range_lr_scale(r) (call after next_step_scalars; equal to its result where the scale is 1).
    nn::NnBackend::AdamWScalars range_scalars(const nn::NnBackend::AdamWScalars& a, std::size_t r, double lr) const;
    double range_lr_scale(std::size_t r) const { return range_scale_[r]; }
    std::int64_t steps() const { return t_; }
    // The moments and decay flags of the trainable elements, packed in ranges() order (for device copies).
    std::vector<T>& moment1() { return m_; }
    std::vector<T>& moment2() { return v_; }
    const std::vector<std::uint8_t>& decay_flags() const { return decay_; }
    // [begin, end) element ranges of the trainable tensors in the flat buffer (adjacent tensors of one lr scale merged).
    const std::vector<std::pair<std::int64_t, std::int64_t>>& ranges() const { return ranges_; }
    std::int64_t trainable_count() const { return static_cast<std::int64_t>(m_.size()); }
    const AdamWConfig& config() const { return config_; }

    void save(const std::string& path) const;
    void load(const std::string& path);   // UserError naming the file when it does not fit the layout

private:
    AdamWConfig config_;
    std::int64_t total_ = 0;                                       // elements of the whole layout
    std::vector<std::pair<std::int64_t, std::int64_t>> ranges_;   // trainable [begin, end) in the flat buffer
    std::vector<double> range_scale_;                              // the lr scale of each range
    std::vector<std::uint8_t> decay_;                              // per trainable element (packed, as m_, v_)
    std::vector<T> m_, v_;
    std::string tensors_;   // the trainable tensors' names in m_/v_'s order, comma-separated (the file's "tensors")
    std::int64_t t_ = 0;
};

}  // namespace retro
