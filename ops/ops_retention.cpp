// The retention modes in the registry (lib/retention, kernels/retention_*.cu): forward and backward
// of parallel, recurrent and chunkwise on the CPU (float, double) and on the GPU (fp32, bf16), each
// compared with the recurrent mode in double on the same (rounded) inputs, as fla's tests do
// (rms ratio: fp32 1e-5, bf16 5e-3); naive is registered as the CPU reference. The test shapes are
// those the CUDA kernels were verified on (a partial last chunk, a partial 32-column tile, the bf16
// tensor-core path at K, V in {64, 128}); the perf shape is fla's (B 8, H 32, K = V = 128, T 2048).
#include <memory>
#include <sstream>
#include <string>

#include "core/cuda_device.h"
#include "gradcheck.h"
#include "op_registry.h"
#include "retention_run.h"

namespace retro::ops {
namespace {

using namespace retention_run;

class RetentionCase : public Case {
public:
    RetentionCase(Mode m, rr::Shape s, std::int64_t chunk, std::uint64_t seed) : mode_(m), s_(s) {
        opt_.chunk_size = chunk;
        in_ = make_inputs<double>(s, true, static_cast<unsigned>(seed));
    }
    std::string shape() const override {
        std::ostringstream o;
        o << "B" << s_.B << " T" << s_.T << " H" << s_.H << " K" << s_.K << " V" << s_.V << " C" << opt_.chunk_size;
        return o.str();
    }
    double flops() const override {   // forward; the backward costs about twice that
        const double BH = double(s_.B) * double(s_.H), T = double(s_.T), K = double(s_.K), Vd = double(s_.V),
                     C = double(opt_.chunk_size);
        const double fwd = mode_ == Mode::recurrent ? 4 * BH * T * K * Vd
                           : mode_ == Mode::chunkwise ? BH * T * (2 * C * (K + Vd) + 4 * K * Vd)
                                                      : BH * T * T * (K + Vd);
        return 3 * fwd;
    }
    double bytes() const override {   // q, k, v, dO read; o, dq, dk, dv written (fp32)
        return 4.0 * 2 * double(s_.B * s_.T * s_.H) * double(2 * s_.K + 2 * s_.V);
    }
    bool supports(Backend b, DType d) const override {
        if (b == Backend::CPU) return d != DType::BF16;
        return mode_ != Mode::naive && d != DType::F64;
    }
    std::vector<std::string> outputs() const override { return {"o", "ht", "dq", "dk", "dv", "dh0"}; }
    std::vector<std::vector<double>> run(Backend b, DType d) override {
        if (b == Backend::CUDA) {
            cuda_require("ops", "the op registry");
            if constexpr (kCudaBuilt)
                return pack(d == DType::BF16 ? run_cuda<bf16>(mode_, s_, opt_, rounded(d)) : run_cuda<float>(mode_, s_, opt_, in_));
            return {};
        }
        if (d == DType::F64) {
            auto t = in_;
            run_mode(mode_, t);
            return pack(t);
        }
        Tensors<float> t{cast(in_.q), cast(in_.k), cast(in_.v), cast(in_.h0), cast(in_.dO), cast(in_.dht), {}, {}, {}, {}, {}, {}};
        run_mode(mode_, t);
        return pack(t);
    }
    std::vector<std::vector<double>> reference(DType d) override {
        auto t = rounded(d);
        run_mode(Mode::recurrent, t);
        return pack(t);
    }
    // loss = o . dO + ht . dht on a small shape, so its gradients are the backward's outputs
    std::vector<Grad> gradcheck() override {
        const rr::Shape s{1, 9, 2, 3, 4};
        rr::Options opt;
        opt.chunk_size = 4;
        auto t = make_inputs<double>(s, true, 3);
        retention_run::run(mode_, s, opt, t);
        auto x = t;
        auto loss = [&] {
            retention_run::run(mode_, s, opt, x, false);
            double L = 0;
            for (std::size_t i = 0; i < x.o.size(); ++i) L += x.o[i] * x.dO[i];
            for (std::size_t i = 0; i < x.ht.size(); ++i) L += x.ht[i] * x.dht[i];
            return L;
        };
        std::vector<Grad> out;
        for (auto [name, in, grad] : {std::tuple{"q", &x.q, &t.dq}, std::tuple{"k", &x.k, &t.dk}, std::tuple{"v", &x.v, &t.dv},
                                      std::tuple{"h0", &x.h0, &t.dh0}}) {
            const auto g = grad_check(loss, in->data(), grad->data(), grad->size(), 0, 1e-6);
            out.push_back({name, g.rel_err, std::max(g.max_numeric, g.max_analytic), 1e-7});
        }
        return out;
    }

private:
    template <typename F>
    void run_mode(Mode m, Tensors<F>& t) const { retention_run::run(m, s_, opt_, t); }
    static std::vector<float> cast(const std::vector<double>& x) { return {x.begin(), x.end()}; }
    template <typename F>
    static std::vector<std::vector<double>> pack(const Tensors<F>& t) {
        std::vector<std::vector<double>> out;
        for (const auto* v : {&t.o, &t.ht, &t.dq, &t.dk, &t.dv, &t.dh0}) out.emplace_back(v->begin(), v->end());
        return out;
    }
    // inputs as the GPU sees them: bf16-rounded q, k, v, dO for bf16; states stay fp32
    Tensors<double> rounded(DType d) const {
        auto t = in_;
        if (d == DType::BF16)
            for (auto* v : {&t.q, &t.k, &t.v, &t.dO})
                for (auto& e : *v) e = from_bf16(to_bf16(static_cast<float>(e)));
        return t;
    }
    Mode mode_;
    rr::Shape s_;
    rr::Options opt_;
    Tensors<double> in_;
};

// K = V shapes last: bf16 chunkwise's backward then takes the dual dk+dv walk (kernels/retention_chunk_mma.cuh)
const rr::Shape kShapes[] = {{2, 200, 4, 32, 48}, {2, 200, 3, 64, 128}, {1, 130, 2, 128, 64}, {1, 130, 2, 64, 64},
                             {1, 200, 2, 128, 128}};
constexpr int kShapeCount = sizeof(kShapes) / sizeof(kShapes[0]);

}  // namespace

void register_retention(std::vector<OpInfo>& out) {
    const std::string t = "tests/test_retention.cpp: ";
    for (Mode m : {Mode::naive, Mode::parallel, Mode::recurrent, Mode::chunkwise}) {
        OpInfo op;
        op.name = std::string("retention.") + mode_name(m);
        op.cpu = std::string("lib/retention/") + mode_name(m) + ".h";
        op.cuda = m == Mode::naive ? "" : std::string("kernels/retention_") + mode_name(m) + ".cu";
        op.tests = {t + "retention: every mode equals naive in double - forward and backward - states included",
                    t + "retention: float agrees with double within 1e-4 (relative to the largest entry)"};
        if (m == Mode::parallel || m == Mode::chunkwise)   // bf16 pairs at head sizes 64/128: the tensor-core kernel
            op.tests.push_back("tests/test_retention_pair_host.cpp: retention pair mma kernel on the host emulator");
        if (m == Mode::chunkwise)   // bf16, chunk 64: the state walk on mma.sync
            op.tests.push_back("tests/test_retention_chunk_host.cpp: retention chunk mma walk on the host emulator");
        if (m == Mode::recurrent)   // lines up to 128: the walks fused over time, the state in registers
            op.tests.push_back("tests/test_retention_recurrent_host.cpp: retention recurrent warp walks on the host emulator");
        // chunkwise: the shapes at chunk 64 and 7; the others: the shapes at 64
        op.test_seeds = m == Mode::chunkwise ? 2 * kShapeCount : kShapeCount;
        op.test_case = [m](std::uint64_t seed) -> std::unique_ptr<Case> {
            const std::size_t i = static_cast<std::size_t>((seed - 1) % kShapeCount);
            const std::int64_t chunk = m == Mode::chunkwise && seed > kShapeCount ? 7 : 64;
            const rr::Shape s = m == Mode::naive ? rr::Shape{1, 40, 2, 8, 8} : kShapes[i];
            return std::make_unique<RetentionCase>(m, s, chunk, 23);
        };
        op.perf_case = [m](Backend b) -> std::unique_ptr<Case> {
            const std::int64_t T = b == Backend::CUDA ? 2048 : (m == Mode::naive ? 256 : 1024);
            return std::make_unique<RetentionCase>(m, rr::Shape{b == Backend::CUDA ? 8 : 1, T, b == Backend::CUDA ? 32 : 4,
                                                                b == Backend::CUDA ? 128 : 64, b == Backend::CUDA ? 128 : 64},
                                                   64, 1);
        };
        out.push_back(std::move(op));
    }
}

}  // namespace retro::ops
