// Recurrent retention's fused-over-time walks (kernels/retention_recurrent_warp.cuh) on the host through the block
// emulator (tests/simt_host.h): o and ht, dq, dk and dh0, dv against lib/retention/recurrent.h in double, with and
// without the initial states, fp32 (bound 1e-5) and bf16 (5e-3, the reference on the bf16-rounded inputs), lines of
// 64 and 128, owned dimensions below the 128 lines a block (lanes past them idle).
#define RETRO_SIMT_HOST 1
#include "simt_host.h"
//
#include "../kernels/retention_recurrent_warp.cuh"
#include "retention/recurrent.h"

#include <doctest/doctest.h>

#include "test_util.h"

#include <cmath>
#include <random>
#include <string>
#include <vector>

using namespace retro;
namespace rw = retro::retention::recurrent_warp;
namespace rr = retro::retention;

namespace {

template <typename X>
std::vector<X> stored(const std::vector<float>& x) {   // as the kernel's input type holds it
    std::vector<X> y(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
        if constexpr (std::is_same_v<X, float>) y[i] = x[i];
        else y[i] = simt::bf16_bits(x[i]);
    }
    return y;
}
template <typename X>
std::vector<float> loaded(const std::vector<X>& x) {
    std::vector<float> y(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) y[i] = rw::load_value(&x[i]);
    return y;
}

template <int LMAX, typename X, rw::WalkKind W>
void walk(const rr::Shape& s, const std::vector<X>& q, const std::vector<X>& k, const std::vector<X>& v,
          const std::vector<X>& dO, std::vector<X>& out, const float* init, float* fin, const rw::WalkArgs& a,
          const rw::WalkDecays& g) {
    const bool column = W == rw::WalkKind::fwd_o || W == rw::WalkKind::rev_dv;
    const long long owned = column ? s.V : s.K;
    simt::host::launch((owned + rw::kLines - 1) / rw::kLines, s.B * s.H, rw::kThreads, 0, [&] {
        rw::recurrent_walk_warp<LMAX, X, W>(q.data(), k.data(), v.data(), dO.data(), out.data(), init, fin, a, g);
    });
}

// forward_only: o and ht (their line is K; V may then exceed LMAX and span blocks)
template <int LMAX, typename X>
void check_walks(const rr::Shape& s, bool states, std::uint64_t seed, bool forward_only = false) {
    const bool bf = !std::is_same_v<X, float>;
    INFO("B=" << s.B << " T=" << s.T << " H=" << s.H << " K=" << s.K << " V=" << s.V << (bf ? " bf16" : " fp32")
              << (states ? " h0/dht" : ""));
    std::mt19937 rng(static_cast<unsigned>(seed));
    std::normal_distribution<float> nd(0.0f, 1.0f);
    auto randn = [&](long long n) {
        std::vector<float> x(static_cast<std::size_t>(n));
        for (auto& e : x) e = nd(rng);
        return x;
    };
    const long long nk = s.B * s.T * s.H * s.K, nv = s.B * s.T * s.H * s.V, ns = s.B * s.H * s.K * s.V;
    const auto qx = stored<X>(randn(nk)), kx = stored<X>(randn(nk)), vx = stored<X>(randn(nv)), dox = stored<X>(randn(nv));
    const auto h0 = randn(ns), dht = randn(ns);

    // the reference in double on the values the kernel reads
    auto dbl = [](const std::vector<float>& x) { return std::vector<double>(x.begin(), x.end()); };
    const auto qd = dbl(loaded(qx)), kd = dbl(loaded(kx)), vd = dbl(loaded(vx)), dod = dbl(loaded(dox)),
               h0d = dbl(h0), dhtd = dbl(dht);
    const rr::Options opt{};
    const rr::Resolved res = rr::resolve(s, opt);
    std::vector<double> o(static_cast<std::size_t>(nv)), ht(static_cast<std::size_t>(ns)), dq(static_cast<std::size_t>(nk)),
        dk(static_cast<std::size_t>(nk)), dv(static_cast<std::size_t>(nv)), dh0(static_cast<std::size_t>(ns));
    rr::recurrent_forward(s, opt, qd.data(), kd.data(), vd.data(), states ? h0d.data() : nullptr, o.data(), ht.data());
    rr::recurrent_backward(s, opt, qd.data(), kd.data(), vd.data(), states ? h0d.data() : nullptr, dod.data(),
                           states ? dhtd.data() : nullptr, dq.data(), dk.data(), dv.data(), dh0.data());

    rw::WalkDecays g{};
    for (long long h = 0; h < s.H; ++h) g.lg[h] = static_cast<float>(res.log_gamma[static_cast<std::size_t>(h)]);
    const rw::WalkArgs a{s.B, s.T, s.H, s.K, s.V, static_cast<float>(res.scale)};
    std::vector<X> go(static_cast<std::size_t>(nv)), gdq(static_cast<std::size_t>(nk)), gdk(static_cast<std::size_t>(nk)),
        gdv(static_cast<std::size_t>(nv));
    std::vector<float> ght(static_cast<std::size_t>(ns), NAN), gdh0(static_cast<std::size_t>(ns), NAN);
    const float* h0p = states ? h0.data() : nullptr;
    const float* dhtp = states ? dht.data() : nullptr;
    walk<LMAX, X, rw::WalkKind::fwd_o>(s, qx, kx, vx, dox, go, h0p, ght.data(), a, g);
    if (forward_only) {
        CHECK(test::rms_ratio(loaded(go), o) <= (bf ? 5e-3 : 1e-5));
        CHECK(test::rms_ratio(ght, ht) <= (bf ? 5e-3 : 1e-5));
        return;
    }
    walk<LMAX, X, rw::WalkKind::fwd_dq>(s, qx, kx, vx, dox, gdq, h0p, nullptr, a, g);
    walk<LMAX, X, rw::WalkKind::rev_dk>(s, qx, kx, vx, dox, gdk, dhtp, gdh0.data(), a, g);
    walk<LMAX, X, rw::WalkKind::rev_dv>(s, qx, kx, vx, dox, gdv, dhtp, nullptr, a, g);

    const double bound = bf ? 5e-3 : 1e-5;
    const double e[] = {test::rms_ratio(loaded(go), o), test::rms_ratio(ght, ht), test::rms_ratio(loaded(gdq), dq),
                        test::rms_ratio(loaded(gdk), dk), test::rms_ratio(loaded(gdv), dv), test::rms_ratio(gdh0, dh0)};
    MESSAGE("recurrent warp walks (host) T=" << s.T << " K=" << s.K << " V=" << s.V << std::string(bf ? " bf16" : " fp32")
                                             << std::string(states ? " h0/dht" : "") << ": o " << e[0] << ", ht " << e[1]
                                             << ", dq " << e[2] << ", dk " << e[3] << ", dv " << e[4] << ", dh0 " << e[5]);
    for (double x : e) CHECK(x <= bound);
}

}  // namespace

TEST_CASE("retention recurrent warp walks on the host emulator: o, ht, dq, dk, dv, dh0 equal recurrent.h in double") {
    check_walks<64, float>({1, 13, 2, 48, 40}, true, 1);
    check_walks<64, float>({2, 9, 1, 64, 33}, false, 2);
    check_walks<128, float>({1, 7, 1, 128, 100}, true, 3);   // 100 owned columns: 28 lanes idle
    check_walks<64, std::uint16_t>({1, 11, 2, 32, 64}, true, 4);
    check_walks<64, float>({1, 5, 1, 32, 200}, true, 5, true);   // V = 200 owned columns: two blocks
    // which walks a line length takes (the launcher falls back to the shared-memory walk past 128)
    CHECK(rw::fits(rw::WalkKind::fwd_o, 128, 256, 128));
    CHECK_FALSE(rw::fits(rw::WalkKind::fwd_dq, 128, 256, 128));
}
