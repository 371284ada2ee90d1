// A registry Case for an op that runs on the CPU in float and double from one templated body: the
// body maps inputs (the last one is the upstream gradient dy of the first output) to outputs —
// forward outputs, then the gradients of the differentiable inputs — and the case derives run() for
// f64/f32 and the central-difference check of those gradients against dot(dy, y(x)).
#pragma once
#include <cmath>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/cuda_device.h"
#include "gradcheck.h"
#include "op_registry.h"

namespace retro::ops {

using Tensors = std::vector<std::vector<double>>;

template <typename T>
std::vector<std::vector<T>> cast_all(const Tensors& in) {
    std::vector<std::vector<T>> out;
    for (const auto& x : in) out.emplace_back(x.begin(), x.end());
    return out;
}

// Body: a callable with `template <typename T> std::vector<std::vector<T>> operator()(const
// std::vector<std::vector<T>>& in, bool backward) const`.
template <typename Body>
class CpuCase : public Case {
public:
    struct Spec {
        std::string shape;
        double flops = 0, bytes = 0;
        std::vector<std::string> inputs;   // the last is "dy"
        std::vector<bool> differentiable;  // per input (dy: false)
        std::vector<std::string> outputs;  // forward outputs, then d<input> for each differentiable one
    };
    CpuCase(Spec spec, Tensors inputs, Body body) : spec_(std::move(spec)), in_(std::move(inputs)), body_(std::move(body)) {}

    std::string shape() const override { return spec_.shape; }
    double flops() const override { return spec_.flops; }
    double bytes() const override { return spec_.bytes; }
    bool supports(Backend b, DType d) const override { return b == Backend::CPU && d != DType::BF16; }
    std::vector<std::string> outputs() const override { return spec_.outputs; }
    Tensors run(Backend, DType d) override {
        if (d == DType::F64) return body_(in_, true);
        if (in_f32_.empty()) in_f32_ = cast_all<float>(in_);   // cast once: perf mode times the op, not the cast
        Tensors out;
        for (const auto& o : body_(in_f32_, true)) out.emplace_back(o.begin(), o.end());
        return out;
    }
    std::vector<Grad> gradcheck() override {
        const Tensors full = body_(in_, true);
        std::vector<Grad> out;
        for (std::size_t i = 0; i < in_.size(); ++i) {
            if (!spec_.differentiable[i]) continue;
            const std::size_t g = output_index("d" + spec_.inputs[i]);
            auto x = in_;
            auto loss = [&] { return dot(in_.back(), body_(x, false)[0].data()); };   // dy . y
            const auto r = grad_check(loss, x[i].data(), full[g].data(), x[i].size(), 200);
            out.push_back({spec_.inputs[i], r.rel_err, std::max(r.max_numeric, r.max_analytic), 1e-6});
        }
        return out;
    }

protected:
    // The body in double on the inputs rounded to bf16 (what a bf16 run of the op is compared with).
    Tensors run_double_on_bf16_inputs() {
        Tensors in = in_;
        for (auto& t : in)
            for (auto& x : t) x = static_cast<double>(from_bf16(to_bf16(static_cast<float>(x))));
        return body_(in, true);
    }

private:
    std::size_t output_index(const std::string& name) const {
        for (std::size_t i = 0; i < spec_.outputs.size(); ++i)
            if (spec_.outputs[i] == name) return i;
        throw std::logic_error("op case: no output " + name);
    }
    Spec spec_;
    Tensors in_;
    std::vector<std::vector<float>> in_f32_;
    Body body_;
};

inline std::vector<double> random_tensor(std::size_t n, std::mt19937& rng, double amp = 1.0) { return random_doubles(n, rng, amp); }

}  // namespace retro::ops
