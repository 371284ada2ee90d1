// Running the retention modes for tests and the op registry: inputs q, k, v (+ optional states h0,
// and the upstream gradients dO, dht) from a seed, one mode forward (and backward) on the CPU in
// float or double, or on the GPU with inputs stored as float or bf16 (results back as double).
#pragma once
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "core/cuda_device.h"
#include "retention/retention.h"
#include "retention/retention_cuda.h"

namespace retro::ops::retention_run {

namespace rr = retro::retention;

enum class Mode { naive, parallel, recurrent, chunkwise };
inline const char* mode_name(Mode m) {
    return m == Mode::naive ? "naive" : m == Mode::parallel ? "parallel" : m == Mode::recurrent ? "recurrent" : "chunkwise";
}

template <typename F>
struct Tensors {
    std::vector<F> q, k, v, h0, dO, dht;   // inputs (h0/dht empty = none)
    std::vector<F> o, ht, dq, dk, dv, dh0; // outputs
};

template <typename F>
std::vector<F> random_vec(std::size_t n, std::mt19937& rng, double amp = 1.0) {
    std::uniform_real_distribution<double> u(-amp, amp);
    std::vector<F> x(n);
    for (auto& e : x) e = static_cast<F>(u(rng));
    return x;
}

template <typename F>
Tensors<F> make_inputs(const rr::Shape& s, bool states, unsigned seed) {
    std::mt19937 rng(seed);
    Tensors<F> t;
    const auto nk = static_cast<std::size_t>(s.B * s.T * s.H * s.K), nv = static_cast<std::size_t>(s.B * s.T * s.H * s.V),
               ns = static_cast<std::size_t>(s.B * s.H * s.K * s.V);
    t.q = random_vec<F>(nk, rng);
    t.k = random_vec<F>(nk, rng);
    t.v = random_vec<F>(nv, rng);
    t.dO = random_vec<F>(nv, rng);
    if (states) {
        t.h0 = random_vec<F>(ns, rng);
        t.dht = random_vec<F>(ns, rng);
    }
    return t;
}

template <typename F>
const F* ptr(const std::vector<F>& x) { return x.empty() ? nullptr : x.data(); }

template <typename F>
void run(Mode m, const rr::Shape& s, const rr::Options& opt, Tensors<F>& t, bool backward = true) {
    const auto nk = static_cast<std::size_t>(s.B * s.T * s.H * s.K), nv = static_cast<std::size_t>(s.B * s.T * s.H * s.V),
               ns = static_cast<std::size_t>(s.B * s.H * s.K * s.V);
    t.o.assign(nv, F(0));
    t.ht.assign(ns, F(0));
    const F *q = t.q.data(), *k = t.k.data(), *v = t.v.data(), *h0 = ptr(t.h0);
    switch (m) {
        case Mode::naive: rr::naive_forward(s, opt, q, k, v, h0, t.o.data(), t.ht.data()); break;
        case Mode::parallel: rr::parallel_forward(s, opt, q, k, v, h0, t.o.data(), t.ht.data()); break;
        case Mode::recurrent: rr::recurrent_forward(s, opt, q, k, v, h0, t.o.data(), t.ht.data()); break;
        case Mode::chunkwise: rr::chunkwise_forward(s, opt, q, k, v, h0, t.o.data(), t.ht.data()); break;
    }
    if (!backward) return;
    t.dq.assign(nk, F(0));
    t.dk.assign(nk, F(0));
    t.dv.assign(nv, F(0));
    t.dh0.assign(ns, F(0));
    const F *dO = t.dO.data(), *dht = ptr(t.dht);
    F *dq = t.dq.data(), *dk = t.dk.data(), *dv = t.dv.data(), *dh0 = t.dh0.data();
    switch (m) {
        case Mode::naive: rr::naive_backward(s, opt, q, k, v, h0, dO, dht, dq, dk, dv, dh0); break;
        case Mode::parallel: rr::parallel_backward(s, opt, q, k, v, h0, dO, dht, dq, dk, dv, dh0); break;
        case Mode::recurrent: rr::recurrent_backward(s, opt, q, k, v, h0, dO, dht, dq, dk, dv, dh0); break;
        case Mode::chunkwise: rr::chunkwise_backward(s, opt, q, k, v, h0, dO, dht, dq, dk, dv, dh0); break;
    }
}

// Runs one CUDA mode on inputs stored as X (float or retro::bf16), fp32 states, on a stream of its own; returns
// everything as double. Only defined in a CUDA build: call it inside `if constexpr (retro::kCudaBuilt)`.
template <typename X>
Tensors<double> run_cuda(Mode m, const rr::Shape& s, const rr::Options& opt, const Tensors<double>& in) {
    namespace rc = rr::cuda;
    auto to_x = [](double x) {
        if constexpr (std::is_same_v<X, float>) return static_cast<float>(x);
        else return retro::to_bf16(static_cast<float>(x));
    };
    auto to_d = [](X x) {
        if constexpr (std::is_same_v<X, float>) return static_cast<double>(x);
        else return static_cast<double>(retro::from_bf16(x));
    };
    const retro::CudaStreamOwner stream;
    const retro::CudaStream st = stream.get();
    retro::CudaBuffers owned(st);   // (freed on a throw too: a case's failure leaves the next ones their memory)
    auto up_x = [&](const std::vector<double>& h) {
        std::vector<X> x(h.size());
        for (std::size_t i = 0; i < h.size(); ++i) x[i] = to_x(h[i]);
        auto* d = static_cast<X*>(owned.alloc(std::max<std::size_t>(x.size(), 1) * sizeof(X)));
        retro::cuda_copy_to_device(d, x.data(), x.size() * sizeof(X), st);
        return d;
    };
    auto up_f = [&](const std::vector<double>& h) {
        std::vector<float> x(h.begin(), h.end());
        auto* d = static_cast<float*>(owned.alloc(std::max<std::size_t>(x.size(), 1) * sizeof(float)));
        retro::cuda_copy_to_device(d, x.data(), x.size() * sizeof(float), st);
        return d;
    };
    const std::size_t nk = in.q.size(), nv = in.v.size(), ns = static_cast<std::size_t>(s.B * s.H * s.K * s.V);
    X *q = up_x(in.q), *k = up_x(in.k), *v = up_x(in.v), *dO = up_x(in.dO);
    X *o = up_x(std::vector<double>(nv)), *dq = up_x(std::vector<double>(nk)), *dk = up_x(std::vector<double>(nk)),
      *dv = up_x(std::vector<double>(nv));
    float *h0 = in.h0.empty() ? nullptr : up_f(in.h0), *dht = in.dht.empty() ? nullptr : up_f(in.dht);
    float *ht = up_f(std::vector<double>(ns)), *dh0 = up_f(std::vector<double>(ns));
    if (m == Mode::parallel) {
        rc::parallel_forward<X>(s, opt, q, k, v, h0, o, ht, st);
        rc::parallel_backward<X>(s, opt, q, k, v, h0, dO, dht, dq, dk, dv, dh0, st);
    } else if (m == Mode::recurrent) {
        rc::recurrent_forward<X>(s, opt, q, k, v, h0, o, ht, st);
        rc::recurrent_backward<X>(s, opt, q, k, v, h0, dO, dht, dq, dk, dv, dh0, st);
    } else {
        rc::chunkwise_forward<X>(s, opt, q, k, v, h0, o, ht, st);
        rc::chunkwise_backward<X>(s, opt, q, k, v, h0, dO, dht, dq, dk, dv, dh0, st);
    }
    retro::cuda_stream_synchronize(st);
    auto down_x = [&](X* d, std::size_t n) {
        std::vector<X> x(n);
        retro::cuda_copy_to_host(x.data(), d, n * sizeof(X), st);
        std::vector<double> r(n);
        for (std::size_t i = 0; i < n; ++i) r[i] = to_d(x[i]);
        return r;
    };
    auto down_f = [&](float* d, std::size_t n) {
        std::vector<float> x(n);
        retro::cuda_copy_to_host(x.data(), d, n * sizeof(float), st);
        return std::vector<double>(x.begin(), x.end());
    };
    Tensors<double> out;
    out.o = down_x(o, nv), out.dq = down_x(dq, nk), out.dk = down_x(dk, nk), out.dv = down_x(dv, nv);
    out.ht = down_f(ht, ns), out.dh0 = down_f(dh0, ns);
    return out;
}

}  // namespace retro::ops::retention_run
