// The CUDA NnBackend's few-row linear layer (kernels/nn_gemv.cuh's linear_rows_gemv) on the host through the block
// emulator (tests/simt_host.h): every epilogue (plain, gelu with and without its pre-activation, residual in place,
// the rotary of the leading heads with some of them scaled) with and without the RMSNorm prologue, on the float4 and
// the scalar path, 1, 3 and 8 rows, against the CPU ops in double within the op harness's fp32 bound (1e-5 relative
// rms); and the fused forms bit for bit against the kernels they stand for run one after the other
// (rmsnorm_forward_warps, then the plain GEMV, then gelu_exact, the sum or kernels/nn_rotary.cuh's rotary_rows), the
// promise nn/nn_backend.h makes for rmsnorm_linear_forward, linear_residual_forward and linear_rotary_forward. On a
// GPU the same kernel runs under the op harness (nn.linear_gelu, nn.norm_linear, nn.linear_residual, nn.linear_rotary,
// nn.linear's few-row cases).
#define RETRO_SIMT_HOST 1
#include "simt_host.h"
//
#include "../kernels/nn_gemv.cuh"
#include "nn/gelu.h"
#include "nn/linear.h"
#include "nn/rmsnorm.h"
#include "nn/rotary.h"

#include <doctest/doctest.h>

#include "test_util.h"

#include <cmath>
#include <random>
#include <vector>

using namespace retro;
namespace gv = retro::nn::gemv;
namespace rw = retro::nn::rows;

namespace {

struct Gemv {   // one launch's arguments (the host vectors)
    const std::vector<float> *x, *W, *b, *gamma;
    long long N, I, O;
    long long blocks;   // fewer than O / 8 columns' worth: the grid-stride loop runs
};

// linear_rows_gemv<NR, VEC4, NORM> into y (and h), res the residual input (may be y itself)
template <int NR, bool VEC4, bool NORM>
void run(std::vector<float>& y, std::vector<float>* h, const std::vector<float>* res, const Gemv& g, gv::GemvOut out,
         const gv::GemvRotary& rot = {}) {
    const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(g.I)));
    const float eps = static_cast<float>(nn::RMSNORM_EPS);
    simt::host::launch(g.blocks, 1, gv::kThreads, static_cast<std::size_t>(gv::smem_bytes(NR, g.I, NORM)), [&] {
        gv::linear_rows_gemv<NR, VEC4, NORM>(y.data(), h ? h->data() : nullptr, g.x->data(), g.W->data(),
                                             g.b ? g.b->data() : nullptr, res ? res->data() : nullptr,
                                             NORM ? g.gamma->data() : nullptr, g.I, g.O, static_cast<int>(out), scale,
                                             eps, rot);
    });
}

// xn = rmsnorm(x) by kernels/nn_rows.cuh's rmsnorm_forward_warps (the unfused norm the fused prologue stands for)
std::vector<float> rmsnorm_rows(const std::vector<float>& x, const std::vector<float>& gamma, long long N, long long I) {
    std::vector<float> xn(x.size(), NAN), norm(static_cast<std::size_t>(N), NAN);
    simt::host::launch(1, 1, rw::kThreads, 0, [&] {
        rw::rmsnorm_forward_warps<false>(xn.data(), norm.data(), const_cast<float*>(x.data()), nullptr, nullptr,
                                         gamma.data(), N, I, static_cast<float>(1.0 / std::sqrt(static_cast<double>(I))),
                                         static_cast<float>(nn::RMSNORM_EPS));
    });
    return xn;
}

template <int NR, bool VEC4>
void check_forms(long long I, long long O, bool bias) {
    CAPTURE(NR);
    CAPTURE(VEC4);
    CAPTURE(I);
    CAPTURE(O);
    CAPTURE(bias);
    std::mt19937 rng(static_cast<unsigned>(NR * 1000 + I + O));
    const long long N = NR;
    const auto nx = static_cast<std::size_t>(N * I), ny = static_cast<std::size_t>(N * O);
    auto randn = [&](long long n) { return test::normal_floats(static_cast<std::size_t>(n), rng); };
    auto x = randn(N * I), W = randn(O * I), b = randn(O), gamma = randn(I), res = randn(N * O);
    if (N > 2)
        for (long long c = 0; c < I; ++c) x[static_cast<std::size_t>(2 * I + c)] = 0.0f;   // row 2: norm 0 (the clamp)
    const Gemv g{&x, &W, bias ? &b : nullptr, &gamma, N, I, O, std::max<long long>(1, O / (gv::kWarps * 3))};

    // the references in double: xn = rmsnorm(x), lin = x W^T + b, nlin = xn W^T + b
    const std::vector<double> xd(x.begin(), x.end()), Wd(W.begin(), W.end()), bd(b.begin(), b.end()),
        gd(gamma.begin(), gamma.end());
    std::vector<double> xnd(nx), normd(static_cast<std::size_t>(N)), lin(ny), nlin(ny);
    nn::rmsnorm_forward(xnd.data(), normd.data(), xd.data(), gd.data(), N, I);
    nn::linear_forward(lin.data(), xd.data(), Wd.data(), bias ? bd.data() : nullptr, N, I, O);
    nn::linear_forward(nlin.data(), xnd.data(), Wd.data(), bias ? bd.data() : nullptr, N, I, O);
    auto gelu_of = [](std::vector<double> v) {
        nn::gelu_forward(v.data(), v.data(), static_cast<std::int64_t>(v.size()));
        return v;
    };
    auto plus_res = [&](std::vector<double> v) {
        for (std::size_t i = 0; i < v.size(); ++i) v[i] += res[i];
        return v;
    };

    // plain; gelu with h; residual in place (y is res)
    std::vector<float> plain(ny, NAN), gel(ny, NAN), pre(ny, NAN), resid(res);
    run<NR, VEC4, false>(plain, nullptr, nullptr, g, gv::GemvOut::plain);
    run<NR, VEC4, false>(gel, &pre, nullptr, g, gv::GemvOut::gelu);
    run<NR, VEC4, false>(resid, nullptr, &resid, g, gv::GemvOut::residual);
    CHECK(test::rms_ratio(plain, lin) <= 1e-5);
    CHECK(test::rms_ratio(gel, gelu_of(lin)) <= 1e-5);
    CHECK(test::rms_ratio(resid, plus_res(lin)) <= 1e-5);
    // the epilogues' bits: h is the plain form's output, y its gelu, the residual its sum with res
    CHECK(pre == plain);
    bool gelu_bits = true, sum_bits = true;
    for (std::size_t i = 0; i < ny; ++i) {
        gelu_bits &= gel[i] == gv::gelu_exact(plain[i]);
        sum_bits &= resid[i] == res[i] + plain[i];
    }
    CHECK(gelu_bits);
    CHECK(sum_bits);
    std::vector<float> gel_no_h(ny, NAN);   // h null: only y
    run<NR, VEC4, false>(gel_no_h, nullptr, nullptr, g, gv::GemvOut::gelu);
    CHECK(gel_no_h == gel);

    // NORM: rmsnorm_forward_warps then the plain GEMV on its output gives the same bits as the fused launch
    const auto xn = rmsnorm_rows(x, gamma, N, I);
    const Gemv gn{&xn, &W, g.b, nullptr, N, I, O, g.blocks};
    std::vector<float> two_ops(ny, NAN), fused(ny, NAN), fused_gelu(ny, NAN);
    run<NR, VEC4, false>(two_ops, nullptr, nullptr, gn, gv::GemvOut::plain);
    run<NR, VEC4, true>(fused, nullptr, nullptr, g, gv::GemvOut::plain);
    run<NR, VEC4, true>(fused_gelu, nullptr, nullptr, g, gv::GemvOut::gelu);
    CHECK(fused == two_ops);
    CHECK(test::rms_ratio(fused, nlin) <= 1e-5);
    CHECK(test::rms_ratio(fused_gelu, gelu_of(nlin)) <= 1e-5);
    bool fused_gelu_bits = true;
    for (std::size_t i = 0; i < ny; ++i) fused_gelu_bits &= fused_gelu[i] == gv::gelu_exact(two_ops[i]);
    CHECK(fused_gelu_bits);
}

// GemvOut::rotary: `heads` heads of D (rotation R) lead each row of O columns, the first `scaled` of them scaled by
// 0.3; each row at its own position. Fused (with and without the norm) against the plain GEMV then rotary_rows row by
// row (bits), and against nn/rotary.h in double.
template <int NR, bool VEC4>
void check_rotary(long long I, int heads, int D, int R, int scaled, long long O) {
    CAPTURE(NR);
    CAPTURE(VEC4);
    CAPTURE(I);
    CAPTURE(heads);
    CAPTURE(D);
    CAPTURE(R);
    CAPTURE(O);
    std::mt19937 rng(static_cast<unsigned>(NR * 7 + I + O + R));
    const long long N = NR;
    const auto ny = static_cast<std::size_t>(N * O);
    auto randn = [&](long long n) { return test::normal_floats(static_cast<std::size_t>(n), rng); };
    auto x = randn(N * I), W = randn(O * I), b = randn(O), gamma = randn(I);
    std::vector<std::int64_t> pos;
    for (long long r = 0; r < N; ++r) pos.push_back(r == 0 ? 0 : 17 * r + 3);   // position 0: the identity rotation
    const auto table = nn::rotary_table<float>(pos, R);
    const float s = 0.3f;
    const gv::GemvRotary rot{table.cos.data(), table.sin.data(), heads, D, R, scaled, s};
    const Gemv g{&x, &W, &b, &gamma, N, I, O, std::max<long long>(1, O / (gv::kWarps * 4))};

    auto rotate_rows = [&](std::vector<float>& y) {   // rotary_rows over each row's leading heads, at its position
        for (long long r = 0; r < N; ++r)
            simt::host::launch(1, 1, nn::rotary::kThreads, 0, [&] {
                nn::rotary::rotary_rows<false>(y.data() + r * O, y.data() + r * O, table.cos.data() + r * R,
                                               table.sin.data() + r * R, 1, 1, heads, D, R, s, scaled, 1.0f);
            });
    };
    std::vector<float> two_ops(ny, NAN), fused(ny, NAN);
    run<NR, VEC4, false>(two_ops, nullptr, nullptr, g, gv::GemvOut::plain);
    rotate_rows(two_ops);
    run<NR, VEC4, false>(fused, nullptr, nullptr, g, gv::GemvOut::rotary, rot);
    CHECK(fused == two_ops);

    const auto xn = rmsnorm_rows(x, gamma, N, I);
    const Gemv gn{&xn, &W, &b, nullptr, N, I, O, g.blocks};
    std::vector<float> norm_two_ops(ny, NAN), norm_fused(ny, NAN);
    run<NR, VEC4, false>(norm_two_ops, nullptr, nullptr, gn, gv::GemvOut::plain);
    rotate_rows(norm_two_ops);
    run<NR, VEC4, true>(norm_fused, nullptr, nullptr, g, gv::GemvOut::rotary, rot);
    CHECK(norm_fused == norm_two_ops);

    // in double: x W^T + b, the scaled heads times s, each row's leading heads rotated at its position
    const std::vector<double> xd(x.begin(), x.end()), Wd(W.begin(), W.end()), bd(b.begin(), b.end());
    std::vector<double> ref(ny);
    nn::linear_forward(ref.data(), xd.data(), Wd.data(), bd.data(), N, I, O);
    const auto td = nn::rotary_table<double>(pos, R);
    for (long long r = 0; r < N; ++r) {
        double* row = ref.data() + r * O;
        for (long long c = 0; c < static_cast<long long>(scaled) * D; ++c) row[c] *= s;
        std::vector<double> head_part(row, row + static_cast<long long>(heads) * D);
        nn::rotary_forward(row, head_part.data(), td.cos.data() + r * R, td.sin.data() + r * R, R, 1, 1, heads, D);
    }
    CHECK(test::rms_ratio(fused, ref) <= 1e-5);
}

}  // namespace

TEST_CASE("nn gemv kernel on the host emulator: every epilogue, with and without the rmsnorm, equals the CPU ops") {
    // float4 path (I % 4 == 0), decode widths; the scalar path with an odd I; bias and none
    check_forms<1, true>(512, 300, true);
    check_forms<3, true>(96, 70, false);
    check_forms<8, true>(64, 41, true);
    check_forms<1, false>(37, 50, true);
    check_forms<3, false>(37, 29, true);
    check_forms<8, false>(45, 33, false);
}

TEST_CASE("nn gemv kernel on the host emulator: the rotary epilogue equals the GEMV then the rotary kernel") {
    check_rotary<1, true>(64, 4, 16, 8, 2, 96);    // a decode row of q | k | v (2 heads each), q scaled, R < D
    check_rotary<3, true>(32, 3, 12, 12, 3, 36);   // separate q rows, full rotation, every head scaled
    check_rotary<8, false>(37, 2, 8, 4, 0, 16);    // k rows (none scaled), the scalar path
    check_rotary<2, false>(21, 5, 6, 2, 1, 31);    // heads of 6 (one pair, four passed), a plain tail of 1 column
}
