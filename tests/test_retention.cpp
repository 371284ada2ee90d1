// Retention: every mode against naive in double (forward, backward, states) for chunk sizes {1, 7, 64, T},
// float against double, central-difference gradient checks, strong decay at long T (only naive may
// produce NaN, and it must), and CUDA against the CPU with fla's metric rms(diff)/rms(ref).
#include "test_util.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "core/cuda_device.h"
#include "core/error.h"
#include "retention/retention.h"
#include "retention/retention_cuda.h"

namespace rr = retro::retention;

namespace {

enum class Mode { naive, parallel, recurrent, chunkwise };
const char* mode_name(Mode m) {
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

// max |a - b| / max |b|: relative to the largest reference entry.
template <typename A, typename B>
double rel_err(const std::vector<A>& a, const std::vector<B>& b) {
    REQUIRE(a.size() == b.size());
    double num = 0, den = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
        num = std::max(num, std::abs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
        den = std::max(den, std::abs(static_cast<double>(b[i])));
    }
    if (!std::isfinite(num)) return INFINITY;
    return den > 0 ? num / den : num;
}

template <typename F>
bool all_finite(const std::vector<F>& x) {
    for (F e : x)
        if (!std::isfinite(e)) return false;
    return true;
}

template <typename A, typename B>
void check_close(const Tensors<A>& got, const Tensors<B>& ref, double tol, const std::string& what, bool backward = true) {
    INFO(what);
    CHECK(rel_err(got.o, ref.o) <= tol);
    CHECK(rel_err(got.ht, ref.ht) <= tol);
    if (!backward) return;
    CHECK(rel_err(got.dq, ref.dq) <= tol);
    CHECK(rel_err(got.dk, ref.dk) <= tol);
    CHECK(rel_err(got.dv, ref.dv) <= tol);
    CHECK(rel_err(got.dh0, ref.dh0) <= tol);
}

}  // namespace

TEST_CASE("retention: fla's gamma in fp32 - and bad options are user errors") {
    auto lg = rr::fla_log_gamma(32);
    CHECK(lg[0] == doctest::Approx(std::log(1.0 - 1.0 / 32)).epsilon(1e-6));
    for (int h = 20; h < 32; ++h) CHECK(lg[h] == 0.0);   // gamma rounds to 1 in fp32 (RETENTION.md §1)
    CHECK(lg[19] < 0.0);
    rr::Shape s{1, 4, 2, 3, 3};
    rr::Options bad;
    bad.chunk_size = 0;
    CHECK_THROWS_AS(rr::resolve(s, bad), retro::UserError);
    rr::Options bad_gamma;
    bad_gamma.log_gamma = {0.1, -0.1};
    CHECK_THROWS_AS(rr::resolve(s, bad_gamma), retro::UserError);
}

TEST_CASE("retention: every mode equals naive in double - forward and backward - states included") {
    const rr::Shape s{2, 100, 3, 5, 6};   // T = 100 is not a multiple of 7 or 64; K != V
    for (bool states : {false, true}) {
        auto ref = make_inputs<double>(s, states, 7);
        rr::Options opt;
        run(Mode::naive, s, opt, ref);
        REQUIRE(all_finite(ref.o));
        for (Mode m : {Mode::parallel, Mode::recurrent}) {
            auto t = ref;
            run(m, s, opt, t);
            check_close(t, ref, 1e-10, std::string(mode_name(m)) + (states ? " with states" : " without states"));
        }
        for (std::int64_t C : {std::int64_t{1}, std::int64_t{7}, std::int64_t{64}, s.T}) {
            auto t = ref;
            rr::Options o2;
            o2.chunk_size = C;
            run(Mode::chunkwise, s, o2, t);
            check_close(t, ref, 1e-10, "chunkwise C=" + std::to_string(C) + (states ? " with states" : " without"));
        }
    }
}

TEST_CASE("retention: float agrees with double within 1e-4 (relative to the largest entry)") {
    const rr::Shape s{1, 150, 2, 16, 8};
    auto d = make_inputs<double>(s, true, 11);
    run(Mode::naive, s, rr::Options{}, d);
    Tensors<float> f;
    auto cast = [](const std::vector<double>& x) { return std::vector<float>(x.begin(), x.end()); };
    f.q = cast(d.q), f.k = cast(d.k), f.v = cast(d.v), f.h0 = cast(d.h0), f.dO = cast(d.dO), f.dht = cast(d.dht);
    for (Mode m : {Mode::naive, Mode::parallel, Mode::recurrent, Mode::chunkwise}) {
        auto t = f;
        rr::Options opt;
        opt.chunk_size = 32;
        run(m, s, opt, t);
        check_close(t, d, 1e-4, std::string("float ") + mode_name(m));
    }
}

TEST_CASE("retention: central-difference gradient check in double for each mode") {
    const rr::Shape s{1, 9, 2, 3, 4};
    for (Mode m : {Mode::naive, Mode::parallel, Mode::recurrent, Mode::chunkwise}) {
        INFO(mode_name(m));
        rr::Options opt;
        opt.chunk_size = 4;
        auto t = make_inputs<double>(s, true, 3);
        run(m, s, opt, t);
        // loss = sum(o ⊙ dO) + sum(ht ⊙ dht), so its gradients are the backward outputs.
        auto loss = [&](Tensors<double>& x) {
            run(m, s, opt, x, false);
            double L = 0;
            for (std::size_t i = 0; i < x.o.size(); ++i) L += x.o[i] * x.dO[i];
            for (std::size_t i = 0; i < x.ht.size(); ++i) L += x.ht[i] * x.dht[i];
            return L;
        };
        double worst = 0;
        auto probe = [&](std::vector<double> Tensors<double>::*in, const std::vector<double>& grad) {
            for (std::size_t i = 0; i < grad.size(); ++i) {
                auto x = t;
                const double e = 1e-6;
                (x.*in)[i] += e;
                const double lp = loss(x);
                (x.*in)[i] -= 2 * e;
                const double lm = loss(x);
                worst = std::max(worst, std::abs((lp - lm) / (2 * e) - grad[i]) / (1.0 + std::abs(grad[i])));
            }
        };
        probe(&Tensors<double>::q, t.dq);
        probe(&Tensors<double>::k, t.dk);
        probe(&Tensors<double>::v, t.dv);
        probe(&Tensors<double>::h0, t.dh0);
        CHECK(worst < 1e-7);
    }
}

TEST_CASE("retention: decoding one token at a time equals the full pass - parallel_last_row equals the last row") {
    const rr::Shape s{2, 20, 2, 4, 3};
    auto t = make_inputs<double>(s, true, 5);
    rr::Options opt;
    run(Mode::recurrent, s, opt, t, false);
    rr::Shape one = s;
    one.T = 1;
    std::vector<double> state = t.h0, next(state.size()), o1(static_cast<std::size_t>(s.B * s.H * s.V));
    std::vector<double> q1(static_cast<std::size_t>(s.B * s.H * s.K)), k1(q1.size()), v1(o1.size());
    double worst = 0;
    for (std::int64_t n = 0; n < s.T; ++n) {
        for (std::int64_t b = 0; b < s.B; ++b)
            for (std::int64_t x = 0; x < s.H * s.K; ++x) {
                q1[b * s.H * s.K + x] = t.q[(b * s.T + n) * s.H * s.K + x];
                k1[b * s.H * s.K + x] = t.k[(b * s.T + n) * s.H * s.K + x];
            }
        for (std::int64_t b = 0; b < s.B; ++b)
            for (std::int64_t x = 0; x < s.H * s.V; ++x) v1[b * s.H * s.V + x] = t.v[(b * s.T + n) * s.H * s.V + x];
        rr::recurrent_forward(one, opt, q1.data(), k1.data(), v1.data(), state.data(), o1.data(), next.data());
        state = next;
        for (std::int64_t b = 0; b < s.B; ++b)
            for (std::int64_t x = 0; x < s.H * s.V; ++x)
                worst = std::max(worst, std::abs(o1[b * s.H * s.V + x] - t.o[(b * s.T + n) * s.H * s.V + x]));
    }
    CHECK(worst < 1e-12);
    CHECK(rel_err(state, t.ht) < 1e-12);
    // Stateless decode over the prefix: same output as the last row.
    std::vector<double> ol(o1.size());
    for (std::int64_t b = 0; b < s.B; ++b)
        for (std::int64_t x = 0; x < s.H * s.K; ++x) q1[b * s.H * s.K + x] = t.q[(b * s.T + s.T - 1) * s.H * s.K + x];
    rr::parallel_last_row(s, opt, q1.data(), t.k.data(), t.v.data(), t.h0.data(), ol.data());
    worst = 0;
    for (std::int64_t b = 0; b < s.B; ++b)
        for (std::int64_t x = 0; x < s.H * s.V; ++x)
            worst = std::max(worst, std::abs(ol[b * s.H * s.V + x] - t.o[(b * s.T + s.T - 1) * s.H * s.V + x]));
    CHECK(worst < 1e-12);
}

TEST_CASE("retention: strong decay - long T in float: naive reports NaN - the others stay finite and agree") {
    struct Case { std::int64_t H, T; bool backward; };
    for (Case c : {Case{1, 16384, false}, Case{8, 4096, true}}) {
        const rr::Shape s{1, c.T, c.H, 8, 8};
        INFO("H=" << c.H << " T=" << c.T);
        auto t = make_inputs<float>(s, true, 13);
        rr::Options opt;
        auto nv = t;
        rr::NaiveReport rep = rr::naive_forward<float>(s, opt, nv.q.data(), nv.k.data(), nv.v.data(), nv.h0.data(),
                                                (nv.o.resize(t.v.size()), nv.o.data()), nullptr);
        CHECK(rep.nonfinite > 0);   // fla's naive overflows here (RETENTION.md §5)
        bool has_nan = false;
        for (float e : nv.o) has_nan = has_nan || std::isnan(e);
        CHECK(has_nan);
        if (c.backward) {
            nv.dq.resize(t.q.size()), nv.dk.resize(t.k.size()), nv.dv.resize(t.v.size());
            auto rb = rr::naive_backward<float>(s, opt, nv.q.data(), nv.k.data(), nv.v.data(), nv.h0.data(), nv.dO.data(),
                                         nv.dht.data(), nv.dq.data(), nv.dk.data(), nv.dv.data(), nullptr);
            CHECK(rb.nonfinite > 0);
        }
        auto rec = t;
        run(Mode::recurrent, s, opt, rec, c.backward);
        for (Mode m : {Mode::parallel, Mode::chunkwise}) {
            auto x = t;
            run(m, s, opt, x, c.backward);
            CHECK(all_finite(x.o));
            CHECK(all_finite(x.ht));
            if (c.backward) CHECK((all_finite(x.dq) && all_finite(x.dk) && all_finite(x.dv) && all_finite(x.dh0)));
            check_close(x, rec, 1e-4, std::string(mode_name(m)) + " vs recurrent", c.backward);
        }
        CHECK(all_finite(rec.o));
    }
}

TEST_CASE("retention: gamma = 0.5 in double: naive overflows past T ~ 1025 - the other modes do not") {
    const rr::Shape s{1, 1100, 1, 4, 4};
    rr::Options opt;
    opt.log_gamma = {std::log(0.5)};
    auto t = make_inputs<double>(s, true, 17);
    auto nv = t;
    nv.o.resize(t.v.size());
    CHECK(rr::naive_forward<double>(s, opt, nv.q.data(), nv.k.data(), nv.v.data(), nv.h0.data(), nv.o.data(), nullptr).nonfinite > 0);
    auto rec = t;
    run(Mode::recurrent, s, opt, rec);
    for (Mode m : {Mode::parallel, Mode::chunkwise}) {
        auto x = t;
        run(m, s, opt, x);
        check_close(x, rec, 1e-10, std::string(mode_name(m)) + " vs recurrent, gamma 0.5");
    }
}

namespace {

// fla's metric (utils/_testing.py): rms(a - b) / rms(b).
template <typename A>
double rms_ratio(const std::vector<A>& a, const std::vector<double>& b) {
    double num = 0, den = 0;
    for (std::size_t i = 0; i < b.size(); ++i) {
        const double d = static_cast<double>(a[i]) - b[i];
        num += d * d;
        den += b[i] * b[i];
    }
    return std::sqrt(num / std::max(den, 1e-300));
}

// Runs one CUDA mode on inputs stored as X (float or bf16), fp32 states; returns everything as double.
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
    std::vector<void*> owned;
    auto up_x = [&](const std::vector<double>& h) {
        std::vector<X> x(h.size());
        for (std::size_t i = 0; i < h.size(); ++i) x[i] = to_x(h[i]);
        auto* d = static_cast<X*>(retro::cuda_alloc(x.size() * sizeof(X)));
        retro::cuda_copy_to_device(d, x.data(), x.size() * sizeof(X));
        owned.push_back(d);
        return d;
    };
    auto up_f = [&](const std::vector<double>& h) {
        std::vector<float> x(h.begin(), h.end());
        auto* d = static_cast<float*>(retro::cuda_alloc(std::max<std::size_t>(x.size(), 1) * sizeof(float)));
        retro::cuda_copy_to_device(d, x.data(), x.size() * sizeof(float));
        owned.push_back(d);
        return d;
    };
    const std::size_t nk = in.q.size(), nv = in.v.size(), ns = static_cast<std::size_t>(s.B * s.H * s.K * s.V);
    X *q = up_x(in.q), *k = up_x(in.k), *v = up_x(in.v), *dO = up_x(in.dO);
    X *o = up_x(std::vector<double>(nv)), *dq = up_x(std::vector<double>(nk)), *dk = up_x(std::vector<double>(nk)),
      *dv = up_x(std::vector<double>(nv));
    float *h0 = in.h0.empty() ? nullptr : up_f(in.h0), *dht = in.dht.empty() ? nullptr : up_f(in.dht);
    float *ht = up_f(std::vector<double>(ns)), *dh0 = up_f(std::vector<double>(ns));
    if (m == Mode::parallel) {
        rc::parallel_forward<X>(s, opt, q, k, v, h0, o, ht);
        rc::parallel_backward<X>(s, opt, q, k, v, h0, dO, dht, dq, dk, dv, dh0);
    } else if (m == Mode::recurrent) {
        rc::recurrent_forward<X>(s, opt, q, k, v, h0, o, ht);
        rc::recurrent_backward<X>(s, opt, q, k, v, h0, dO, dht, dq, dk, dv, dh0);
    } else {
        rc::chunkwise_forward<X>(s, opt, q, k, v, h0, o, ht);
        rc::chunkwise_backward<X>(s, opt, q, k, v, h0, dO, dht, dq, dk, dv, dh0);
    }
    retro::cuda_synchronize();
    auto down_x = [&](X* d, std::size_t n) {
        std::vector<X> x(n);
        retro::cuda_copy_to_host(x.data(), d, n * sizeof(X));
        std::vector<double> r(n);
        for (std::size_t i = 0; i < n; ++i) r[i] = to_d(x[i]);
        return r;
    };
    auto down_f = [&](float* d, std::size_t n) {
        std::vector<float> x(n);
        retro::cuda_copy_to_host(x.data(), d, n * sizeof(float));
        return std::vector<double>(x.begin(), x.end());
    };
    Tensors<double> out;
    out.o = down_x(o, nv), out.dq = down_x(dq, nk), out.dk = down_x(dk, nk), out.dv = down_x(dv, nv);
    out.ht = down_f(ht, ns), out.dh0 = down_f(dh0, ns);
    for (void* p : owned) retro::cuda_free(p);
    return out;
}

template <typename X>
void check_cuda_against_cpu(const rr::Shape& s, double tol);

// Inputs rounded to X first, so the CPU double reference sees exactly what the GPU sees.
template <typename X>
void check_cuda_against_cpu(double tol) {
    // T = 200 / 130: last chunk partial; V = 48: a partial 32-column tile; K, V in {64, 128} with chunk 64 take the
    // bf16 tensor-core path (kernels/retention_chunk_tc.cuh), the others the CUDA-core kernels
    for (const rr::Shape& s : {rr::Shape{2, 200, 4, 32, 48}, rr::Shape{2, 200, 3, 64, 128}, rr::Shape{1, 130, 2, 128, 64}}) {
        INFO("B T H K V = " << s.B << " " << s.T << " " << s.H << " " << s.K << " " << s.V);
        check_cuda_against_cpu<X>(s, tol);
    }
}

template <typename X>
void check_cuda_against_cpu(const rr::Shape& s, double tol) {
    auto in = make_inputs<double>(s, true, 23);
    if constexpr (!std::is_same_v<X, float>)
        for (auto* t : {&in.q, &in.k, &in.v, &in.dO})
            for (auto& x : *t) x = retro::from_bf16(retro::to_bf16(static_cast<float>(x)));
    for (Mode m : {Mode::parallel, Mode::recurrent, Mode::chunkwise})
        for (std::int64_t C : {std::int64_t{7}, std::int64_t{64}}) {
            if (m != Mode::chunkwise && C != 64) continue;
            rr::Options opt;
            opt.chunk_size = C;
            auto ref = in;
            run(Mode::recurrent, s, opt, ref);
            auto got = run_cuda<X>(m, s, opt, in);
            INFO(mode_name(m) << " C=" << C);
            std::printf("  cuda %s %s C=%lld B,T,H,K,V=%lld,%lld,%lld,%lld,%lld rms ratio: o %.2e ht %.2e dq %.2e dk %.2e dv %.2e dh0 %.2e\n",
                        std::is_same_v<X, float> ? "fp32" : "bf16", mode_name(m), static_cast<long long>(C),
                        static_cast<long long>(s.B), static_cast<long long>(s.T), static_cast<long long>(s.H),
                        static_cast<long long>(s.K), static_cast<long long>(s.V), rms_ratio(got.o, ref.o),
                        rms_ratio(got.ht, ref.ht), rms_ratio(got.dq, ref.dq), rms_ratio(got.dk, ref.dk),
                        rms_ratio(got.dv, ref.dv), rms_ratio(got.dh0, ref.dh0));
            CHECK(rms_ratio(got.o, ref.o) < tol);
            CHECK(rms_ratio(got.ht, ref.ht) < tol);
            CHECK(rms_ratio(got.dq, ref.dq) < tol);
            CHECK(rms_ratio(got.dk, ref.dk) < tol);
            CHECK(rms_ratio(got.dv, ref.dv) < tol);
            CHECK(rms_ratio(got.dh0, ref.dh0) < tol);
        }
}

}  // namespace

// The CUDA calls compile away in a CPU-only build (core/cuda_device.h); there the cases skip at the probe.
TEST_CASE("retention CUDA fp32 matches the CPU: rms(diff)/rms(ref) < 1e-5") {
    if (retro::cuda_device_count() == 0) RETRO_SKIP("no CUDA device");
    if constexpr (retro::kCudaBuilt) check_cuda_against_cpu<float>(1e-5);
}

TEST_CASE("retention CUDA bf16 matches the CPU: rms(diff)/rms(ref) < 5e-3") {
    if (retro::cuda_device_count() == 0) RETRO_SKIP("no CUDA device");
    if constexpr (retro::kCudaBuilt) check_cuda_against_cpu<retro::bf16>(5e-3);
}

TEST_CASE("retention: retro-bench retention --device cuda says 'built without CUDA' or 'no CUDA device' in one line") {
    if (retro::cuda_device_count() > 0) RETRO_SKIP("a CUDA device is present (the GPU rows are measured by hand: docs/gpu.md)");
    auto r = retro::test::run_tool("retro-bench", "retention --device cuda --T 16 --repeats 1");
    CHECK(r.exit_code == 2);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    CHECK(r.err.find(retro::kCudaBuilt ? "--device cuda: no CUDA device found"
                                       : "--device cuda: retro-bench was built without CUDA") != std::string::npos);
    CHECK(r.out.empty());   // no row measured before the error
}
