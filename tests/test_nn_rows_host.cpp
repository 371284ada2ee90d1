// The CUDA NnBackend's RMSNorm and column-sum kernels (kernels/nn_rows.cuh) on the host through the block emulator
// (tests/simt_host.h): every form (plain, residual, backward =, backward += and in place) against nn/rmsnorm.h in
// double within the op harness's fp32 bound (1e-5 relative rms), a zero row (norm 0: the clamp's branch) among the
// rows, the residual sum bit-exact, and the column sums (several chunks, a column count not a multiple of 32) against
// sums in double, and the first pass's bf16 copy of its terms bit for bit. On a GPU the same kernels run under the op
// harness (nn.rmsnorm, nn.residual_rmsnorm, nn.linear's db, nn.gelu_linear_backward).
#define RETRO_SIMT_HOST 1
#include "simt_host.h"
//
#include "../kernels/nn_rows.cuh"
#include "core/cuda_device.h"
#include "nn/rmsnorm.h"

#include <doctest/doctest.h>

#include "test_util.h"

#include <cmath>
#include <random>
#include <vector>

using namespace retro;
namespace rw = retro::nn::rows;

namespace {

std::vector<double> to_double(const std::vector<float>& x) { return {x.begin(), x.end()}; }

// grid of the row kernels for N rows (deliberately fewer blocks than rows / 8: the grid-stride loop runs)
long long row_grid(long long N) { return std::max<long long>(1, N / (rw::kWarps * 3)); }

struct HostGammaTerm {   // kernels/nn_backend_cuda.cu's GammaTerm: dy x / max(norm, eps)
    const float *dy, *x, *norm;
    long long C;
    float eps;
    float operator()(long long n, long long j) const {
        const float nm = norm[n];
        return dy[n * C + j] * x[n * C + j] * (1.0f / (nm < eps ? eps : nm));
    }
};

// the CUDA backend's column_sums: out += the column sums of term, in its two passes; copy (not null): each term also
// there as bf16 bits
void column_sums(float* out, const HostGammaTerm& term, long long N, long long C, std::uint16_t* copy = nullptr) {
    const long long per = rw::column_chunk_rows(N), chunks = (N + per - 1) / per;
    std::vector<float> part(static_cast<std::size_t>(chunks * C), NAN);
    const long long tiles = (C + rw::kColumnTile - 1) / rw::kColumnTile;
    simt::host::launch(tiles, chunks, rw::kThreads, rw::kColumnSmemBytes,
                       [&] { rw::column_partials_tiles(part.data(), N, C, per, term, copy); });
    simt::host::launch(tiles, 1, rw::kThreads, rw::kColumnSmemBytes,
                       [&] { rw::column_partials_add_tiles(out, part.data(), C, chunks); });
}

}  // namespace

TEST_CASE("nn rows kernels on the host emulator: rmsnorm forms and column sums equal nn/rmsnorm.h in double") {
    for (const auto& [N, C] : {std::pair<long long, long long>{37, 70}, {5000, 33}, {9, 512}, {9000, 20}}) {
        CAPTURE(N);
        CAPTURE(C);
        std::mt19937 rng(static_cast<unsigned>(N + C));
        const auto n = static_cast<std::size_t>(N * C);
        auto a = test::normal_floats(n, rng), b = test::normal_floats(n, rng),
             gamma = test::normal_floats(static_cast<std::size_t>(C), rng), dy = test::normal_floats(n, rng);
        for (long long c = 0; c < C; ++c) a[static_cast<std::size_t>(3 * C + c)] = b[static_cast<std::size_t>(3 * C + c)] = 0;   // row 3: zero
        const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(C)));
        const float eps = static_cast<float>(nn::RMSNORM_EPS);

        // residual form: x = a + b (bit-exact), then y and norm; the plain form on that x gives the same bits
        std::vector<float> x(n, NAN), y(n, NAN), norm(static_cast<std::size_t>(N), NAN);
        simt::host::launch(row_grid(N), 1, rw::kThreads, 0, [&] {
            rw::rmsnorm_forward_warps<true>(y.data(), norm.data(), x.data(), a.data(), b.data(), gamma.data(), N, C,
                                            scale, eps);
        });
        bool sum_exact = true;
        for (std::size_t i = 0; i < n; ++i) sum_exact &= x[i] == a[i] + b[i];
        CHECK(sum_exact);
        std::vector<float> y2(n, NAN), norm2(static_cast<std::size_t>(N), NAN);
        simt::host::launch(row_grid(N), 1, rw::kThreads, 0, [&] {
            rw::rmsnorm_forward_warps<false>(y2.data(), norm2.data(), x.data(), nullptr, nullptr, gamma.data(), N, C,
                                             scale, eps);
        });
        CHECK(y2 == y);
        CHECK(norm2 == norm);
        CHECK(norm[3] == 0.0f);
        // with y stored only as bf16 (residual_rmsnorm_forward_bf16): x and norm the same, y16 the rounding of y
        std::vector<float> x3(n, NAN), norm3(static_cast<std::size_t>(N), NAN);
        std::vector<std::uint16_t> y16(n, 0xffff);
        simt::host::launch(row_grid(N), 1, rw::kThreads, 0, [&] {
            rw::rmsnorm_forward_warps<true, true>(nullptr, norm3.data(), x3.data(), a.data(), b.data(), gamma.data(), N,
                                                  C, scale, eps, y16.data());
        });
        CHECK(x3 == x);
        CHECK(norm3 == norm);
        bool rounded = true;
        for (std::size_t i = 0; i < n; ++i) rounded &= y16[i] == to_bf16(y[i]).bits;   // (core/cuda_device.h's rounding)
        CHECK(rounded);
        // the plain form stored only as bf16 (rmsnorm_forward_bf16: the first layer's norm, the encoder's final one)
        std::vector<float> norm4(static_cast<std::size_t>(N), NAN);
        std::vector<std::uint16_t> y16p(n, 0xffff);
        simt::host::launch(row_grid(N), 1, rw::kThreads, 0, [&] {
            rw::rmsnorm_forward_warps<false, true>(nullptr, norm4.data(), x.data(), nullptr, nullptr, gamma.data(), N, C,
                                                   scale, eps, y16p.data());
        });
        CHECK(norm4 == norm);
        CHECK(y16p == y16);

        const auto xd = to_double(x), gd = to_double(gamma), dyd = to_double(dy);
        std::vector<double> ry(n), rnorm(static_cast<std::size_t>(N)), rdx(n), rdgamma(static_cast<std::size_t>(C), 0.0);
        nn::rmsnorm_forward(ry.data(), rnorm.data(), xd.data(), gd.data(), N, C);
        nn::rmsnorm_backward(rdx.data(), rdgamma.data(), dyd.data(), xd.data(), gd.data(), rnorm.data(), N, C);
        CHECK(test::rms_ratio(y, ry) <= 1e-5);
        CHECK(test::rms_ratio(norm, rnorm) <= 1e-5);

        // backward: dx =, dgamma += through the column sums (from 1: the += shows)
        std::vector<float> dx(n, NAN), dgamma(static_cast<std::size_t>(C), 1.0f);
        column_sums(dgamma.data(), HostGammaTerm{dy.data(), x.data(), norm.data(), C, eps}, N, C);
        simt::host::launch(row_grid(N), 1, rw::kThreads, 0, [&] {
            rw::rmsnorm_backward_warps<false>(dx.data(), dy.data(), x.data(), gamma.data(), norm.data(), N, C, eps);
        });
        std::vector<double> rdgamma1(rdgamma);
        for (auto& e : rdgamma1) e += 1.0;
        CHECK(test::rms_ratio(dx, rdx) <= 1e-5);
        CHECK(test::rms_ratio(dgamma, rdgamma1) <= 1e-5);

        // the first pass with a bf16 copy of its terms (gelu_linear_backward's dy): the same sums, every term's bits
        const HostGammaTerm term{dy.data(), x.data(), norm.data(), C, eps};
        std::vector<float> dgamma_copy(static_cast<std::size_t>(C), 1.0f);
        std::vector<std::uint16_t> copy(n, 0xffff);
        column_sums(dgamma_copy.data(), term, N, C, copy.data());
        CHECK(dgamma_copy == dgamma);
        bool copy_bits = true;
        for (long long r = 0; r < N; ++r)
            for (long long c = 0; c < C; ++c)
                copy_bits &= copy[static_cast<std::size_t>(r * C + c)] == simt::bf16_bits(term(r, c));
        CHECK(copy_bits);

        // in place (dx = dy's buffer): the same bits
        std::vector<float> inplace(dy);
        simt::host::launch(row_grid(N), 1, rw::kThreads, 0, [&] {
            rw::rmsnorm_backward_warps<false>(inplace.data(), inplace.data(), x.data(), gamma.data(), norm.data(), N, C,
                                              eps);
        });
        CHECK(inplace == dx);

        // dx += : onto a, the sum of a and the = form's dx
        std::vector<float> acc(a);
        simt::host::launch(row_grid(N), 1, rw::kThreads, 0, [&] {
            rw::rmsnorm_backward_warps<true>(acc.data(), dy.data(), x.data(), gamma.data(), norm.data(), N, C, eps);
        });
        bool add_exact = true;
        for (std::size_t i = 0; i < n; ++i) add_exact &= acc[i] == a[i] + dx[i];
        CHECK(add_exact);

        // dx and dgamma's per-block partials in one pass (rmsnorm_backward_dgamma_warps), then the blocks' partials
        // added (pass 2): dx the two-kernel form's bits, =, in place and +=; dgamma (+= from 1) within the bound
        auto one_pass = [&](float* out, const float* dyp, bool add, std::vector<float>& dg) {
            const long long per = rw::dgamma_block_rows(N), blocks = (N + per - 1) / per;
            std::vector<float> part(static_cast<std::size_t>(blocks * C), NAN);
            simt::host::launch(blocks, 1, rw::kThreads, static_cast<std::size_t>(rw::dgamma_smem_bytes(C)), [&] {
                if (add)
                    rw::rmsnorm_backward_dgamma_warps<true>(out, part.data(), dyp, x.data(), gamma.data(), norm.data(),
                                                            N, C, per, eps);
                else
                    rw::rmsnorm_backward_dgamma_warps<false>(out, part.data(), dyp, x.data(), gamma.data(),
                                                             norm.data(), N, C, per, eps);
            });
            const long long tiles = (C + rw::kColumnTile - 1) / rw::kColumnTile;
            simt::host::launch(tiles, 1, rw::kThreads, rw::kColumnSmemBytes,
                               [&] { rw::column_partials_add_tiles(dg.data(), part.data(), C, blocks); });
        };
        std::vector<float> dx1(n, NAN), dg1(static_cast<std::size_t>(C), 1.0f);
        one_pass(dx1.data(), dy.data(), false, dg1);
        CHECK(dx1 == dx);
        CHECK(test::rms_ratio(dg1, rdgamma1) <= 1e-5);
        std::vector<float> in_place1(dy), dg2(static_cast<std::size_t>(C), 1.0f);
        one_pass(in_place1.data(), in_place1.data(), false, dg2);
        CHECK(in_place1 == dx);
        CHECK(dg2 == dg1);
        std::vector<float> acc1(a), dg3(static_cast<std::size_t>(C), 1.0f);
        one_pass(acc1.data(), dy.data(), true, dg3);
        CHECK(acc1 == acc);
        CHECK(dg3 == dg1);
    }
}

TEST_CASE("nn rows kernels on the host emulator: a row whose norm is below eps but not 0 passes no gradient through its norm") {
    // nn/rmsnorm.h: d = max(norm, eps), and the x (sum gamma dy x) / (d^2 norm C) term only where norm >= eps (RP's
    // clamp: a clamped norm is a constant). The zero row of the case above cannot tell, its x being 0: here rows of
    // norm ~1e-11 and ~3e-9 beside a normal row, both backward kernels, each row against the reference in double
    const long long N = 3, C = 40;
    std::mt19937 rng(77);
    auto x = test::normal_floats(static_cast<std::size_t>(N * C), rng);
    const auto gamma = test::normal_floats(static_cast<std::size_t>(C), rng), dy = test::normal_floats(x.size(), rng);
    for (long long c = 0; c < C; ++c) {
        x[static_cast<std::size_t>(1 * C + c)] *= 1e-11f;
        x[static_cast<std::size_t>(2 * C + c)] *= 3e-9f;
    }
    const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(C)));
    const float eps = static_cast<float>(nn::RMSNORM_EPS);
    std::vector<float> y(x.size(), NAN), norm(static_cast<std::size_t>(N), NAN);
    simt::host::launch(1, 1, rw::kThreads, 0, [&] {
        rw::rmsnorm_forward_warps<false>(y.data(), norm.data(), x.data(), nullptr, nullptr, gamma.data(), N, C, scale, eps);
    });
    REQUIRE(norm[0] > eps);
    REQUIRE((norm[1] > 0 && norm[1] < eps && norm[2] > norm[1] && norm[2] < eps));
    const auto xd = to_double(x), gd = to_double(gamma), dyd = to_double(dy);
    std::vector<double> ry(x.size()), rnorm(static_cast<std::size_t>(N)), rdx(x.size()), rdgamma(static_cast<std::size_t>(C), 0.0);
    nn::rmsnorm_forward(ry.data(), rnorm.data(), xd.data(), gd.data(), N, C);
    nn::rmsnorm_backward(rdx.data(), rdgamma.data(), dyd.data(), xd.data(), gd.data(), rnorm.data(), N, C);
    std::vector<float> dx(x.size(), NAN), dx1(x.size(), NAN), part(static_cast<std::size_t>(C), NAN);
    simt::host::launch(1, 1, rw::kThreads, 0, [&] {
        rw::rmsnorm_backward_warps<false>(dx.data(), dy.data(), x.data(), gamma.data(), norm.data(), N, C, eps);
    });
    simt::host::launch(1, 1, rw::kThreads, static_cast<std::size_t>(rw::dgamma_smem_bytes(C)), [&] {
        rw::rmsnorm_backward_dgamma_warps<false>(dx1.data(), part.data(), dy.data(), x.data(), gamma.data(), norm.data(), N,
                                                 C, rw::dgamma_block_rows(N), eps);
    });
    for (long long r = 0; r < N; ++r) {
        CAPTURE(r);
        const auto at = [&](const auto& v) { return std::remove_cvref_t<decltype(v)>(v.begin() + r * C, v.begin() + (r + 1) * C); };
        CHECK(test::rms_ratio(at(dx), at(rdx)) <= 1e-5);
        CHECK(test::rms_ratio(at(dx1), at(rdx)) <= 1e-5);
    }
    CHECK(test::rms_ratio(part, rdgamma) <= 1e-5);
}
