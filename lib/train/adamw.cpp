#include "train/adamw.h"

#include <cmath>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/safetensors.h"
#include "nn/parallel.h"

namespace retro {

template <typename T>
AdamW<T>::AdamW(const ParamLayout& layout, const AdamWConfig& config, const std::vector<std::uint8_t>& trainable,
                const std::vector<double>& lr_scale)
    : config_(config), total_(layout.total()) {
    const auto& es = layout.entries();
    RETRO_CHECK(trainable.empty() || trainable.size() == es.size(), "AdamW: one trainable flag per tensor");
    RETRO_CHECK(lr_scale.empty() || lr_scale.size() == es.size(), "AdamW: one lr scale per tensor");
    for (std::size_t t = 0; t < es.size(); t++) {
        const auto& e = es[t];
        if (!trainable.empty() && !trainable[t]) continue;
        const double scale = lr_scale.empty() ? 1.0 : lr_scale[t];
        if (!ranges_.empty() && ranges_.back().second == e.offset && range_scale_.back() == scale) {
            ranges_.back().second += e.numel;
        } else {
            ranges_.emplace_back(e.offset, e.offset + e.numel);
            range_scale_.push_back(scale);
        }
        decay_.insert(decay_.end(), static_cast<std::size_t>(e.numel), e.shape.size() >= 2 ? 1 : 0);
        tensors_ += (tensors_.empty() ? "" : ",") + e.name;
    }
    m_.assign(decay_.size(), T(0));
    v_.assign(decay_.size(), T(0));
}

template <typename T>
void AdamW<T>::step(std::vector<T>& params, const std::vector<T>& grads, double lr) {
    RETRO_CHECK(static_cast<std::int64_t>(params.size()) == total_ && static_cast<std::int64_t>(grads.size()) == total_,
                "AdamW: buffer sizes differ");
    t_++;
    const double bc1 = 1.0 - std::pow(config_.beta1, static_cast<double>(t_));
    const double bc2 = 1.0 - std::pow(config_.beta2, static_cast<double>(t_));
    const T w1 = static_cast<T>(1.0 - config_.beta1);   // lerp weight (< 0.5: m + w (g - m), as torch)
    const T b2 = static_cast<T>(config_.beta2), w2 = static_cast<T>(1.0 - config_.beta2);
    const T bc2_sqrt = static_cast<T>(std::sqrt(bc2));
    const T eps = static_cast<T>(config_.eps);
    std::int64_t packed = 0;   // index into m_, v_, decay_ of the range's first element
    for (std::size_t r = 0; r < ranges_.size(); r++) {
        const auto [begin, end] = ranges_[r];
        const double lr_r = lr * range_scale_[r];
        const T decay = static_cast<T>(1.0 - lr_r * config_.weight_decay);
        const T step_size = static_cast<T>(lr_r / bc1);
        const std::int64_t n = end - begin;
        T* p = params.data() + begin;
        const T* gr = grads.data() + begin;
        T *m = m_.data() + packed, *v = v_.data() + packed;
        const std::uint8_t* dk = decay_.data() + packed;
        nn::ranges(n, 10 * n, [&](std::int64_t b, std::int64_t e, int) {
            for (std::int64_t i = b; i < e; i++) {
                const T g = gr[i];
                if (dk[i]) p[i] *= decay;
                m[i] = m[i] + w1 * (g - m[i]);
                v[i] = v[i] * b2 + w2 * (g * g);
                const T denom = std::sqrt(v[i]) / bc2_sqrt + eps;
                p[i] = p[i] + (-step_size) * (m[i] / denom);
            }
        });
        packed += n;
    }
}

template <typename T>
nn::NnBackend::AdamWScalars AdamW<T>::next_step_scalars(double lr) {
    t_++;
    const double bc1 = 1.0 - std::pow(config_.beta1, static_cast<double>(t_));
    const double bc2 = 1.0 - std::pow(config_.beta2, static_cast<double>(t_));
    nn::NnBackend::AdamWScalars a;   // each the float of step()'s expression
    a.decay = static_cast<float>(1.0 - lr * config_.weight_decay);
    a.w1 = static_cast<float>(1.0 - config_.beta1);
    a.b2 = static_cast<float>(config_.beta2);
    a.w2 = static_cast<float>(1.0 - config_.beta2);
    a.step_size = static_cast<float>(lr / bc1);
    a.bc2_sqrt = static_cast<float>(std::sqrt(bc2));
    a.eps = static_cast<float>(config_.eps);
    return a;
}

template <typename T>
nn::NnBackend::AdamWScalars AdamW<T>::range_scalars(const nn::NnBackend::AdamWScalars& a, std::size_t r,
                                                     double lr) const {
    if (range_scale_[r] == 1.0) return a;
    const double lr_r = lr * range_scale_[r];
    const double bc1 = 1.0 - std::pow(config_.beta1, static_cast<double>(t_));
    nn::NnBackend::AdamWScalars s = a;
    s.decay = static_cast<float>(1.0 - lr_r * config_.weight_decay);
    s.step_size = static_cast<float>(lr_r / bc1);
    return s;
}

template <typename T>
void AdamW<T>::save(const std::string& path) const {
    const std::int64_t n = static_cast<std::int64_t>(m_.size());
    std::vector<TensorToWrite> ts = {{"m", dtype_of<T>(), {n}, m_.data()}, {"v", dtype_of<T>(), {n}, v_.data()}};
    // the shortest text that reads back as x, as JSON writes numbers (std::to_string kept 6 decimals: eps 1e-8 was
    // "0.000000")
    const auto exact = [](double x) { return nlohmann::json(x).dump(); };
    safetensors_save(path, ts,
                     {{"step", std::to_string(t_)}, {"lr", exact(config_.lr)},
                      {"beta1", exact(config_.beta1)}, {"beta2", exact(config_.beta2)},
                      {"eps", exact(config_.eps)}, {"weight_decay", exact(config_.weight_decay)},
                      {"trainable_elements", std::to_string(m_.size())}, {"elements", std::to_string(total_)},
                      {"tensors", tensors_}});
}

template <typename T>
void AdamW<T>::load(const std::string& path) {
    SafetensorsFile f(path);
    const std::int64_t n = static_cast<std::int64_t>(m_.size());
    if (f.has("m") && f.get("m").shape != std::vector<std::int64_t>{n})
        user_error_in(path, cat("optimizer state holds ", shape_string(f.get("m").shape), " moments, this run trains ",
                                n, " parameters"),
                      "resume with the run's --train-only and model config");
    const auto& m = f.get("m", dtype_of<T>(), {n});
    const auto& v = f.get("v", dtype_of<T>(), {n});
    auto it = f.metadata().find("step");
    if (it == f.metadata().end()) user_error_in(path, "optimizer state has no \"step\"");
    std::int64_t t = 0;
    try {
        t = std::stoll(it->second);
    } catch (...) {
        user_error_in(path, "optimizer state has a bad \"step\" value");
    }
    const T* pm = static_cast<const T*>(m.data);
    const T* pv = static_cast<const T*>(v.data);
    m_.assign(pm, pm + n);
    v_.assign(pv, pv + n);
    t_ = t;
}

template class AdamW<float>;
template class AdamW<double>;

}  // namespace retro
