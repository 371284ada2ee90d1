// Golden test against RETRO-pytorch 0.3.9 (files made by tests/reference/make_retro_golden.py): the same
// weights, batch and AdamW setup must give RP's logits, loss, every gradient and the losses of 5 AdamW steps,
// in fp32. Errors are max |ours - RP| / max |RP| over each tensor (a scalar's relative error for losses).
//
// Tolerances (issue 6 acceptance) and the errors measured when the files were made (torch 2.15 CPU,
// retro-pytorch 0.3.9; RetroKit on OpenBLAS 0.3.21, Release build):
//   | quantity                   | tolerance | measured |
//   | logits                     | 1e-4      | 2.4e-7   |
//   | loss                       | 1e-4      | 0        |
//   | each parameter gradient    | 1e-3      | 1.5e-6 (worst of 87 tensors: encoder.layers.0.2.norm.gamma) |
//   | 5 AdamW losses (+ 6th)     | 1e-4      | 2.5e-7   |
// How chosen: the bounds, checked against the measurement: they leave 2-3 orders of magnitude for fp32
// round-off of other summation orders (BLAS blocking, other thread counts or CPUs) while real mistakes stay far
// outside: using the "intended" CCA query rotary positions instead of RP's quirk (RETRO.md B.6.6) gives
// logits 3.7e-2, gradients 1.8, AdamW losses 7.5e-4.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/npy.h"
#include "core/safetensors.h"
#include "model/config.h"
#include "model/params.h"
#include "model/retro.h"
#include "test_util.h"
#include "train/adamw.h"

using namespace retro;

namespace {

constexpr double TOL_LOGITS = 1e-4, TOL_LOSS = 1e-4, TOL_GRAD = 1e-3, TOL_ADAMW_LOSS = 1e-4;

std::filesystem::path golden_dir() { return test::source_dir() / "tests" / "reference" / "golden" / "retro_tiny"; }

double tensor_rel_err(const float* a, const float* b, std::int64_t n) {
    double diff = 0, mag = 0;
    for (std::int64_t i = 0; i < n; i++) {
        diff = std::max(diff, std::abs(static_cast<double>(a[i]) - b[i]));
        mag = std::max(mag, std::abs(static_cast<double>(b[i])));
    }
    return mag > 0 ? diff / mag : diff;
}

std::vector<std::int32_t> load_ids(const std::filesystem::path& p, std::vector<std::int64_t>& shape) {
    NpyArray a(p.string());
    shape = a.shape();
    const std::int64_t* d = a.data<std::int64_t>();
    return std::vector<std::int32_t>(d, d + a.numel());
}

struct Golden {
    RetroConfig config;
    RetroBatch batch;
    nlohmann::json expected;
};

Golden load_golden() {
    Golden g;
    const auto dir = golden_dir();
    g.config = RetroConfig::load((dir / "config.json").string());
    std::vector<std::int64_t> s, r;
    g.batch.seq = load_ids(dir / "seq.npy", s);
    g.batch.retrieved = load_ids(dir / "retrieved.npy", r);
    REQUIRE(s.size() == 2);
    REQUIRE(r.size() == 4);
    g.batch.B = s[0];
    g.batch.n = s[1] - 1;
    g.batch.k = r[2];
    g.batch.r = r[3];
    std::ifstream in(dir / "expected.json");
    g.expected = nlohmann::json::parse(in);
    return g;
}

}  // namespace

TEST_CASE("model: golden vs RETRO-pytorch 0.3.9 (logits and loss and every gradient)") {
    auto g = load_golden();
    RetroModel<float> m(g.config);
    params_load((golden_dir() / "weights.safetensors").string(), m.params(), m.layout(), g.config);
    m.zero_grad();
    const float loss = m.forward(g.batch);
    NpyArray logits((golden_dir() / "logits.npy").string());
    REQUIRE(logits.numel() == static_cast<std::int64_t>(m.logits().size()));
    const double e_logits = tensor_rel_err(m.logits().data(), logits.data<float>(), logits.numel());
    const double ref_loss = g.expected["loss"].get<double>();
    const double e_loss = std::abs(loss - ref_loss) / std::abs(ref_loss);
    MESSAGE("golden logits rel err " << e_logits << ", loss " << loss << " vs RP " << ref_loss << " rel err " << e_loss);
    CHECK(e_logits <= TOL_LOGITS);
    CHECK(e_loss <= TOL_LOSS);

    m.backward();
    SafetensorsFile grads((golden_dir() / "grads.safetensors").string());
    double worst = 0;
    std::string worst_name;
    for (const auto& e : m.layout().entries()) {
        const auto& ref = grads.get(e.name, DType::F32, e.shape);
        const double err = tensor_rel_err(m.grads().data() + e.offset, static_cast<const float*>(ref.data), e.numel);
        INFO(e.name);
        CHECK(err <= TOL_GRAD);
        if (err > worst) {
            worst = err;
            worst_name = e.name;
        }
    }
    CHECK(grads.tensors().size() == m.layout().entries().size());   // RP has no parameter we lack
    MESSAGE("golden gradients: " << m.layout().entries().size() << " tensors, worst rel err " << worst << " ("
                                 << worst_name << ")");
}

TEST_CASE("model: golden vs RETRO-pytorch 0.3.9 (5 AdamW steps)") {
    auto g = load_golden();
    RetroModel<float> m(g.config);
    params_load((golden_dir() / "weights.safetensors").string(), m.params(), m.layout(), g.config);
    const auto& a = g.expected["adamw"];
    AdamWConfig oc;
    oc.lr = a["lr"].get<double>();
    oc.beta1 = a["beta1"].get<double>();
    oc.beta2 = a["beta2"].get<double>();
    oc.eps = a["eps"].get<double>();
    oc.weight_decay = a["weight_decay"].get<double>();
    AdamW<float> opt(m.layout(), oc);
    std::vector<double> ref = g.expected["adamw_losses"].get<std::vector<double>>();
    ref.push_back(g.expected["loss_after_last_step"].get<double>());
    double worst = 0;
    for (std::size_t i = 0; i < ref.size(); i++) {
        const double loss = m.forward(g.batch);
        const double err = std::abs(loss - ref[i]) / std::abs(ref[i]);
        CAPTURE(i);
        CHECK(err <= TOL_ADAMW_LOSS);
        worst = std::max(worst, err);
        if (i + 1 == ref.size()) break;
        m.zero_grad();
        m.backward();
        opt.step(m.params(), m.grads(), oc.lr);
    }
    MESSAGE("golden AdamW losses: worst rel err " << worst << " over " << ref.size() << " losses");
}
