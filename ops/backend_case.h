// A registry Case for the NnBackend ops (nn/nn_backend.h, issue 21): a CpuCase (its templated body calls the
// nn/*.h functions in double and float: the reference) plus a second body that runs the same op through any
// NnBackend: upload the float inputs, call the backend's op, download the outputs (same outputs, same order).
// run(CUDA, F32) runs that body through cuda_nn_backend (one stream and backend per case, made on first use);
// tests/test_nn_backend.cpp runs it through HostNnBackend as well, where it must give the float body's bits.
// op_seconds: the time inside the op alone (retro-bench ops --device cuda), the body's transfers left out.
// provides: BackendRunnable, BackendArena, BackendCase, make_backend_case, seconds_in_ops, F32Tensors, kNnBackendTestCase
#pragma once
#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/cuda_device.h"
#include "cpu_case.h"
#include "nn/nn_backend.h"
#include "nn/nn_backend_cuda.h"
#include "nn/nn_backend_profiler.h"

namespace retro::ops {

using F32Tensors = std::vector<std::vector<float>>;

// The test case (tests/test_nn_backend.cpp) that runs every BackendCase through HostNnBackend; the NnBackend ops'
// registry entries list it.
inline constexpr const char* kNnBackendTestCase = "nn backend: every op through HostNnBackend gives the nn ops' bits";

// What a case offers beyond Case: its op through a given backend, and the NnBackend ops that body calls.
class BackendRunnable {
public:
    virtual ~BackendRunnable() = default;
    virtual Tensors run_on(nn::NnBackend& backend) = 0;   // the outputs of run(), as doubles
    // The same on the inputs rounded to bf16, as the BF16 comparison runs the device (backend's modes as the caller
    // set them): the reference takes those inputs (run_double_on_bf16_inputs), so a value the device keeps in fp32 —
    // a bias, gamma, a residual input — is the reference's value, and only the op's own roundings differ.
    virtual Tensors run_on_bf16_inputs(nn::NnBackend& backend) = 0;
    virtual std::vector<std::string> backend_ops() const = 0;
    // Seconds of one run(CUDA, d) spent inside backend_ops() (retro-bench ops' device rows), without the body's
    // allocations, uploads and downloads.
    virtual double op_seconds(DType d) = 0;

    // One run on `backend` through nn::ProfilingNnBackend (each op between two synchronizes): the seconds inside
    // the ops backend_ops() names.
    double op_seconds_on(nn::NnBackend& backend);
};

// The seconds of the timings whose op is one of `ops` (uploads, downloads, zero fills and other ops left out).
inline double seconds_in_ops(const std::vector<nn::OpTiming>& timings, const std::vector<std::string>& ops) {
    double seconds = 0;
    for (const auto& t : timings)
        if (std::find(ops.begin(), ops.end(), t.op) != ops.end()) seconds += t.seconds;
    return seconds;
}

inline double BackendRunnable::op_seconds_on(nn::NnBackend& backend) {
    nn::ProfilingNnBackend profiler(backend);
    run_on(profiler);
    return seconds_in_ops(profiler.timings(), backend_ops());
}

// The backend memory of one run: uploads and zero-filled buffers, all released on scope exit.
class BackendArena {
public:
    explicit BackendArena(nn::NnBackend& be) : be_(be) {}
    ~BackendArena() {
        for (void* p : ptrs_) be_.release(p);
    }
    BackendArena(const BackendArena&) = delete;
    BackendArena& operator=(const BackendArena&) = delete;

    template <typename T>
    T* alloc(std::size_t n) {
        ptrs_.reserve(ptrs_.size() + 1);   // so that push_back cannot throw after the allocation
        void* p = be_.alloc(std::max<std::size_t>(n, 1) * sizeof(T));
        ptrs_.push_back(p);
        return static_cast<T*>(p);
    }
    template <typename T>
    T* up(const std::vector<T>& host) {
        T* p = alloc<T>(host.size());
        be_.upload(p, host.data(), host.size() * sizeof(T));
        return p;
    }
    template <typename T>
    T* zeros(std::size_t n) {
        T* p = alloc<T>(n);
        be_.zero(p, n * sizeof(T));
        return p;
    }
    template <typename T>
    std::vector<T> down(const T* p, std::size_t n) {
        std::vector<T> h(n);
        be_.download(h.data(), p, n * sizeof(T));
        return h;
    }

private:
    nn::NnBackend& be_;
    std::vector<void*> ptrs_;
};

template <typename Body>
class BackendCase : public CpuCase<Body>, public BackendRunnable {
public:
    using Spec = typename CpuCase<Body>::Spec;
    using DeviceBody = std::function<F32Tensors(nn::NnBackend&, const F32Tensors&)>;
    BackendCase(Spec spec, Tensors inputs, Body body, DeviceBody device_body, std::vector<std::string> ops)
        : CpuCase<Body>(std::move(spec), inputs, std::move(body)), in_f32_(cast_all<float>(inputs)),
          device_body_(std::move(device_body)), ops_(std::move(ops)) {}

    // BF16 on CUDA: the op run with NnBackend::GemmInputs::bf16 (cases whose op is a GEMM: set_bf16_gemm()),
    // compared with the CPU in double, both on the inputs rounded to bf16 (run_on_bf16_inputs).
    void set_bf16_gemm() { bf16_gemm_ = true; }
    // BF16 only on CUDA (ops over bf16-stored activations, whose fp32 run on the GPU has no reference of the fp32
    // bound: the stored rounding flips where the GPU's and the double reference's values straddle a bf16 boundary);
    // the host backend still gives the CPU body's bits in fp32.
    void set_bf16_only() {
        bf16_gemm_ = true;
        bf16_only_ = true;
    }
    // BF16 on CUDA with NnBackend::set_fused_attention as well (the fused attention kernels), same comparison.
    void set_fused_attention() { fused_attention_ = true; }
    bool supports(Backend b, DType d) const override {
        if (b == Backend::CPU) return d != DType::BF16;
        return (d == DType::F32 && !bf16_only_) || (d == DType::BF16 && (bf16_gemm_ || fused_attention_));
    }
    Tensors reference(DType d) override {
        return d == DType::BF16 ? this->run_double_on_bf16_inputs() : CpuCase<Body>::reference(d);
    }
    Tensors run(Backend b, DType d) override {
        if (b == Backend::CPU) return CpuCase<Body>::run(b, d);
        Tensors out;
        on_cuda(d, [&](nn::NnBackend& be) { out = d == DType::BF16 ? run_on_bf16_inputs(be) : run_on(be); });
        return out;
    }
    double op_seconds(DType d) override {
        double seconds = 0;
        on_cuda(d, [&](nn::NnBackend& be) { seconds = op_seconds_on(be); });
        return seconds;
    }
    Tensors run_on(nn::NnBackend& backend) override { return run_with(backend, in_f32_); }
    Tensors run_on_bf16_inputs(nn::NnBackend& backend) override {
        if (in_bf16_.empty()) {
            in_bf16_ = in_f32_;
            for (auto& t : in_bf16_)
                for (auto& x : t) x = from_bf16(to_bf16(x));
        }
        return run_with(backend, in_bf16_);
    }
    std::vector<std::string> backend_ops() const override { return ops_; }

private:
    Tensors run_with(nn::NnBackend& backend, const F32Tensors& inputs) {
        Tensors out;
        for (const auto& o : device_body_(backend, inputs)) out.emplace_back(o.begin(), o.end());
        return out;
    }
    // fn(the case's CUDA backend, set up for dtype d: bf16 GEMM inputs, the fused attention kernels where asked)
    template <typename Fn>
    void on_cuda(DType d, Fn&& fn) {
        cuda_require("ops", "the op registry");
        if constexpr (kCudaBuilt) {
            if (!cuda_) {
                stream_ = std::make_unique<CudaStreamOwner>();
                cuda_ = nn::cuda_nn_backend(stream_->get());
            }
            cuda_->set_gemm_inputs(d == DType::BF16 ? nn::NnBackend::GemmInputs::bf16 : nn::NnBackend::GemmInputs::fp32);
            cuda_->set_fused_attention(fused_attention_ && d == DType::BF16);
            fn(*cuda_);
            cuda_->set_gemm_inputs(nn::NnBackend::GemmInputs::fp32);
            cuda_->set_fused_attention(false);
        }
    }

    F32Tensors in_f32_, in_bf16_;   // (in_bf16_ made on the first BF16 run)
    DeviceBody device_body_;
    std::vector<std::string> ops_;
    bool bf16_gemm_ = false;
    bool bf16_only_ = false;
    bool fused_attention_ = false;
    std::unique_ptr<CudaStreamOwner> stream_;   // declared before cuda_: the backend goes first
    std::unique_ptr<nn::NnBackend> cuda_;
};

template <typename Body>
std::unique_ptr<Case> make_backend_case(typename CpuCase<Body>::Spec spec, Tensors in, Body body,
                                        typename BackendCase<Body>::DeviceBody device_body,
                                        std::vector<std::string> ops) {
    return std::make_unique<BackendCase<Body>>(std::move(spec), std::move(in), std::move(body), std::move(device_body),
                                               std::move(ops));
}

}  // namespace retro::ops
