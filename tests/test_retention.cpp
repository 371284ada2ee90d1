// Retention: every mode against naive in double (forward, backward, states) for chunk sizes {1, 7, 64, T},
// float against double, strong decay at long T (only naive may produce NaN, and it must). The gradient
// checks and CUDA against the CPU are the op registry's (ops/ops_retention.cpp via tests/test_ops.cpp).
#include "test_util.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/cuda_device.h"
#include "core/error.h"
#include "core/threads.h"
#include "retention/retention.h"
#include "retention/retention_cuda.h"
#include "retention/retention_launch.h"
#include "retention_run.h"
#include "test_nn_gradcheck.h"

namespace rr = retro::retention;

namespace {

using namespace retro::ops::retention_run;

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
    // bit for bit the documented fp32 arithmetic (decay.h, RETENTION.md §1): gamma = 1 - 2^(-5-h) in float, logf of it
    for (int h = 0; h < 32; ++h) {
        const float gamma = 1.0f - std::exp2(static_cast<float>(-5 - h));
        CAPTURE(h);
        CHECK(lg[h] == static_cast<double>(std::log(gamma)));
    }
    rr::Shape s{1, 4, 2, 3, 3};
    rr::Options bad;
    bad.chunk_size = 0;
    CHECK_THROWS_AS(rr::resolve(s, bad), retro::UserError);
    rr::Options bad_gamma;
    bad_gamma.log_gamma = {0.1, -0.1};
    CHECK_THROWS_AS(rr::resolve(s, bad_gamma), retro::UserError);
}

TEST_CASE("retention: the default scale is K^-1/2 (fla's) - every mode on a hand-computed two-token case") {
    // K = 4, V = 1, gamma = 0.5: o_n = scale sum_{m <= n} gamma^(n-m) (q_n . k_m) v_m with scale = 1/sqrt(4) = 0.5
    // (V's would be 1), and ht = sum_m gamma^(T-1-m) k_m v_m^T, which the scale does not touch
    const rr::Shape s{1, 2, 1, 4, 1};
    rr::Options opt;
    opt.log_gamma = {std::log(0.5)};
    CHECK(rr::resolve(s, opt).scale == 0.5);
    CHECK(rr::resolve(rr::Shape{1, 2, 1, 9, 4}, rr::Options{}).scale == doctest::Approx(1.0 / 3.0).epsilon(1e-15));
    Tensors<double> in;
    in.q = {1, 0, 0, 0, 1, 1, 1, 1};
    in.k = {2, 0, 0, 0, 0, 1, 0, 0};
    in.v = {3, 5};
    const std::vector<double> want_o = {0.5 * 2 * 3, 0.5 * (0.5 * 2 * 3 + 1 * 5)}, want_ht = {0.5 * 2 * 3, 5, 0, 0};
    for (Mode m : {Mode::naive, Mode::parallel, Mode::recurrent, Mode::chunkwise}) {
        INFO(mode_name(m));
        auto t = in;
        run(m, s, opt, t, false);
        for (std::size_t i = 0; i < want_o.size(); ++i) CHECK(t.o[i] == doctest::Approx(want_o[i]).epsilon(1e-12));
        for (std::size_t i = 0; i < want_ht.size(); ++i) CHECK(t.ht[i] == doctest::Approx(want_ht[i]).epsilon(1e-12));
    }
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

TEST_CASE("retention: chunkwise's fused per-head pass and its two-phase pass both equal naive, whatever the core count") {
    // chunkwise_forward takes one fused pass per head when B*H >= 2 x thread_count(), the two phases otherwise: which
    // one the cases above run depends on the machine's cores (their 6 heads take the fused pass on <= 3 threads only,
    // the two-phase one from 4). Both, on the same 2 heads, by the thread count: 1 thread -> fused, 2 -> two phases.
    const rr::Shape s{1, 37, 2, 5, 6};   // T = 37: a partial last chunk at C = 7 and 16
    for (bool states : {false, true}) {
        auto ref = make_inputs<double>(s, states, 23);
        run(Mode::naive, s, rr::Options{}, ref);
        for (int threads : {1, 2}) {
            const retro::test::ThreadCountScope scope(threads);
            REQUIRE((s.B * s.H >= 2 * retro::thread_count()) == (threads == 1));
            for (std::int64_t C : {std::int64_t{1}, std::int64_t{7}, std::int64_t{16}, s.T, std::int64_t{64}}) {
                auto t = ref;
                rr::Options o;
                o.chunk_size = C;
                run(Mode::chunkwise, s, o, t);
                check_close(t, ref, 1e-10, "chunkwise C=" + std::to_string(C) + (threads == 1 ? " fused" : " two phases") +
                                               (states ? " with states" : " without"));
            }
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

// The central-difference gradient check of each mode and the CUDA-vs-CPU comparison (fp32 1e-5, bf16
// 5e-3) are the op registry's: ops/ops_retention.cpp, run by tests/test_ops.cpp.

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

TEST_CASE("retention: retro-bench retention --device cuda says 'built without CUDA' or 'no CUDA device' in one line") {
    if (retro::cuda_device_count() > 0) RETRO_SKIP("a CUDA device is present (the GPU rows are measured by hand: docs/gpu.md)");
    auto r = retro::test::run_tool("retro-bench", "retention --device cuda --T 16 --repeats 1");
    CHECK(r.exit_code == 2);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    CHECK(r.err.find(retro::kCudaBuilt ? "--device cuda: no CUDA device found"
                                       : "--device cuda: retro-bench was built without CUDA") != std::string::npos);
    CHECK(r.out.empty());   // no row measured before the error
}

TEST_CASE("retention: the CUDA launch plan - tensor-core walk only where its shared memory fits, grid and shared-memory refusals") {
    using namespace retro::retention;
    const long h100 = 232448, sm86 = 101376, small = 49152;   // opt-in shared memory per block (bytes)
    CHECK(TcLayout(128).total == 159040);   // the ~159 KB walk at K = V = 128
    CHECK(TcLayout(32).total == 82240);
    CHECK(chunk_mma_shared_bytes(128, 2, 128) == 139264);   // the mma walk at K = V = 128: 8 warps, two stages
    CHECK(chunk_mma_shared_bytes(128, 2, 64) == 105472);
    CHECK(chunk_mma_shared_bytes(128, 1, 128) == 87040);
    // forward at K = V = 128: 128 columns a block with two stages on an H100, one on an sm_86/89 card; 64 columns
    // on request (mma64); never in fp32; nowhere one stage of 64 columns does not fit
    const auto h100_fwd = plan_chunkwise(true, 128, 128, 64, false, h100);
    CHECK(h100_fwd.tensor_cores);
    CHECK(h100_fwd.da_k.stages == 2);
    CHECK(h100_fwd.da_k.columns == 128);
    CHECK(h100_fwd.da_k.copies == 2);   // 174,080 bytes: one block barrier a chunk
    CHECK(chunk_mma_shared_bytes(128, 2, 128, false, 2) == 174080);
    CHECK(plan_chunkwise(true, 128, 128, 64, false, h100, false, false, false, true).da_k.copies == 1);   // mma-1copy
    // mma16: the 16-warp walk (182,272 bytes at K = V = 128) where a walk is 128 columns, two stages, two copies —
    // the forward and dq on an H100; never on request only, never where one of the three is not the walk's
    CHECK(chunk_mma16_shared_bytes(128) == 182272);
    CHECK_FALSE(h100_fwd.da_k.wide);
    const auto h100_wide = plan_chunkwise(true, 128, 128, 64, true, h100, false, false, false, false, 0, true);
    CHECK(h100_wide.da_k.wide);
    CHECK(h100_wide.da_v.wide);
    CHECK(h100_wide.dkdv.ok);   // dk and dv keep the 8-warp dual walk
    CHECK_FALSE(h100_wide.dkdv.wide);
    CHECK_FALSE(plan_chunkwise(true, 128, 64, 64, false, h100, false, false, false, false, 0, true).da_k.wide);   // V = 64
    CHECK_FALSE(plan_chunkwise(true, 128, 128, 64, false, h100, false, false, false, true, 0, true).da_k.wide);  // one copy
    CHECK_FALSE(plan_chunkwise(true, 128, 128, 64, false, 166912, false, false, false, false, 0, true).da_k.wide);   // A100
    CHECK_FALSE(plan_chunkwise(true, 128, 128, 64, false, 180000, false, false, false, false, 0, true).da_k.wide);   // 8 KB short
    CHECK(plan_chunkwise(true, 128, 128, 64, false, h100, true).da_k.columns == 64);
    const auto sm86_fwd = plan_chunkwise(true, 128, 128, 64, false, sm86);
    CHECK(sm86_fwd.tensor_cores);
    CHECK(sm86_fwd.da_k.stages == 1);
    CHECK(sm86_fwd.da_k.columns == 128);
    CHECK(plan_chunkwise(true, 128, 128, 64, false, sm86, true).da_k.stages == 1);
    CHECK(plan_chunkwise(true, 32, 64, 64, false, sm86).da_k.stages == 2);     // V = 64: one 64-column tile
    CHECK(plan_chunkwise(true, 32, 64, 64, false, sm86).da_k.columns == 64);
    CHECK_FALSE(plan_chunkwise(true, 128, 128, 64, false, small).tensor_cores);
    CHECK_FALSE(plan_chunkwise(false, 128, 128, 64, false, h100).tensor_cores);
    CHECK_FALSE(plan_chunkwise(true, 128, 128, 32, false, h100).tensor_cores);   // chunk 32: not the walk's 64
    CHECK_FALSE(plan_chunkwise(true, 128, 96, 64, false, h100).tensor_cores);    // V = 96: not whole 64-column tiles
    // backward runs walks with Da = V over Dc = K (dq, dk) and Da = K over Dc = V (dv): each configured, both must fit
    const auto h100_bwd = plan_chunkwise(true, 128, 64, 64, true, h100);
    CHECK(h100_bwd.tensor_cores);
    CHECK(h100_bwd.da_k.columns == 64);    // Dc = V = 64
    CHECK(h100_bwd.da_v.columns == 128);   // Dc = K = 128
    CHECK(plan_chunkwise(true, 64, 128, 64, true, sm86).da_v.stages == 1);       // the Da = V = 128 walk: one stage
    CHECK(plan_chunkwise(true, 64, 128, 64, true, sm86).da_k.stages == 2);
    CHECK_FALSE(plan_chunkwise(true, 32, 128, 64, true, h100).tensor_cores);   // dq, dk: Dc = K = 32 is no 64-column tile
    // dk and dv in one dual walk where K = V = 64 or 128 and two stages fit: an H100 (174,080 bytes), not an A100 or
    // an sm_86/89 card at 128; two walks under split or narrow, or where K != V
    const long a100 = 166912;
    CHECK(chunk_mma_shared_bytes(128, 2, 128, true) == 174080);
    CHECK(chunk_mma_shared_bytes(128, 2, 128, true, 2) == 208896);
    CHECK(plan_chunkwise(true, 128, 128, 64, true, h100).dkdv.ok);
    CHECK(plan_chunkwise(true, 128, 128, 64, true, h100).dkdv.stages == 2);
    CHECK(plan_chunkwise(true, 128, 128, 64, true, h100).dkdv.copies == 2);
    CHECK(plan_chunkwise(true, 128, 128, 64, true, h100, false, false, false, true).dkdv.copies == 1);
    CHECK_FALSE(plan_chunkwise(true, 128, 128, 64, true, a100).dkdv.ok);   // one stage only there: two walks
    CHECK(plan_chunkwise(true, 128, 128, 64, false, a100).da_k.stages == 2);   // an A100's forward: two stages, one copy
    CHECK(plan_chunkwise(true, 128, 128, 64, false, a100).da_k.copies == 1);
    CHECK(plan_chunkwise(true, 128, 128, 64, false, sm86).da_k.copies == 1);   // one stage: one copy
    // two copies only where they cost no residency: an H100's SM (233,472 bytes) holds one 139,264-byte block either
    // way at Da = 128, 128 columns; two of Da = 96's 114,688-byte blocks but one of 141,312; two of 64 columns' 105,472
    // but one of 122,880
    const long h100_sm = 233472;
    CHECK(plan_chunkwise(true, 128, 128, 64, false, h100, false, false, false, false, h100_sm).da_k.copies == 2);
    CHECK(plan_chunkwise(true, 96, 128, 64, false, h100, false, false, false, false, h100_sm).da_k.copies == 1);
    CHECK(plan_chunkwise(true, 128, 128, 64, false, h100, true, false, false, false, h100_sm).da_k.copies == 1);
    CHECK(plan_chunkwise(true, 128, 128, 64, true, h100, false, false, false, false, h100_sm).dkdv.copies == 2);
    CHECK(plan_chunkwise(true, 64, 64, 64, true, h100, false, false, false, false, h100_sm).dkdv.copies == 2);
    CHECK(plan_chunkwise(true, 128, 128, 64, true, h100, false, true, true).da_k.stages == 1);   // mma1
    CHECK(plan_chunkwise(true, 128, 128, 64, true, h100, false, true, true).da_k.columns == 128);
    CHECK_FALSE(plan_chunkwise(true, 128, 128, 64, true, sm86).dkdv.ok);   // 104,448 bytes: two walks there
    CHECK(plan_chunkwise(true, 64, 64, 64, true, sm86).dkdv.stages == 2);
    CHECK_FALSE(plan_chunkwise(true, 128, 128, 64, false, h100).dkdv.ok);          // forward: no dk, dv
    CHECK_FALSE(plan_chunkwise(true, 128, 128, 64, true, h100, false, true).dkdv.ok);   // split
    CHECK_FALSE(plan_chunkwise(true, 128, 128, 64, true, h100, true).dkdv.ok);          // narrow
    CHECK_FALSE(plan_chunkwise(true, 128, 64, 64, true, h100).dkdv.ok);            // K != V
    // refusals: one line each, naming the limit and the fix
    CHECK(retention_launch_refusal(8, 32, 128, 128, h100).empty());
    const std::string grid = retention_launch_refusal(3000, 32, 64, 64, h100);
    CHECK(grid.find("B*H = 96000") != std::string::npos);
    CHECK(grid.find("split the batch") != std::string::npos);
    CHECK(retention_launch_refusal(65535, 1, 64, 64, h100).empty());
    const std::string smem = retention_launch_refusal(1, 1, 256, 256, small);
    CHECK(smem.find("83968 bytes of shared memory") != std::string::npos);
    CHECK(smem.find('\n') == std::string::npos);
    CHECK(retention_launch_refusal(1, 1, 256, 256, sm86).empty());
}

TEST_CASE("retention: retro-bench retention reports the fastest mode at each T and the chunkwise forward against the bandwidth bound") {
    retro::test::TempDir dir("retention-bench");
    const auto json_path = dir / "ret.json";
    auto r = retro::test::run_tool("retro-bench", "retention --modes parallel,recurrent,chunkwise --T 64,128 --B 1 --H 2 "
                                                  "--K 16 --V 16 --repeats 1 --json " + json_path.string());
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(r.out.find("fastest") != std::string::npos);
    const auto j = nlohmann::json::parse(retro::test::read_text(json_path));
    // the envelope every retro-bench --json file shares (bench_json_write), beside this subcommand's own top-level stamp
    CHECK(j["stamp"]["tool"] == "retro-bench retention");
    CHECK(j["stamp"]["commit"] == j["commit"]);
    CHECK(j["machine"]["cpu"].is_string());
    CHECK(j["machine"]["hardware_threads"].get<int>() >= 1);
    const double gbps = j["copy_gbps"].get<double>();
    CHECK(gbps > 0);
    REQUIRE(j["fastest"].size() == 2);
    for (const auto& f : j["fastest"]) {   // the fastest entry is the minimum over that T's rows
        double fwd = 1e300, fb = 1e300;
        for (const auto& row : j["rows"])
            if (row["T"] == f["T"]) {
                fwd = std::min(fwd, row["fwd_ms"].get<double>());
                fb = std::min(fb, row["fwdbwd_ms"].get<double>());
            }
        CHECK(f["fwd_ms"].get<double>() == fwd);
        CHECK(f["fwdbwd_ms"].get<double>() == fb);
    }
    for (const auto& row : j["rows"]) {
        if (row["mode"] != "chunkwise") {
            CHECK(row["of_bandwidth_bound"].is_null());
            continue;
        }
        // q, k, v read and o written: 4 bytes x B T H (2K + 2V), at the run's copy bandwidth
        const double bytes = 4.0 * 1 * row["T"].get<double>() * 2 * (2 * 16 + 2 * 16);
        CHECK(row["bandwidth_bound_ms"].get<double>() == doctest::Approx(bytes / (gbps * 1e9) * 1e3));
        CHECK(row["of_bandwidth_bound"].get<double>() ==
              doctest::Approx(row["bandwidth_bound_ms"].get<double>() / row["fwd_ms"].get<double>()));
    }
}
