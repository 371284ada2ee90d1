// The fused attention's mma.sync kernels (kernels/nn_flash_mma.cuh) run on the host through the block emulator
// (tests/simt_host.h): every thread of every block, the warps' fragment exchanges as the PTX ISA lays them out. The
// forward (out, lse), Delta and both backward kernels (dQ; dK, dV) against attention in double on the bf16-rounded
// inputs, at each head size the kernels take, causal or not, N not a multiple of the 64-row blocks: rms(x - ref) /
// rms(ref) within the op harness's bf16 bound (5e-3). This runs on every machine; on a GPU the same kernels are
// checked by the op harness (`nn.flash_attention`), compiled by nvcc from the same header.
#define RETRO_SIMT_HOST 1
#include "simt_host.h"
//
#include "../kernels/nn_flash_mma.cuh"

#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

using namespace retro;
namespace fl = retro::nn::flash;

namespace {

double bf16_round(float x) { return simt::bf16_value(simt::bf16_bits(x)); }

double rms_ratio(const std::vector<float>& got, const std::vector<double>& ref) {
    double num = 0, den = 0;
    for (std::size_t i = 0; i < ref.size(); ++i) {
        num += (got[i] - ref[i]) * (got[i] - ref[i]);
        den += ref[i] * ref[i];
    }
    return std::sqrt(num / (den > 0 ? den : 1));
}

struct Reference {   // attention in double over [B, N, H*D] tensors (q already scaled), lse [B, H, N]
    std::vector<double> out, lse, dq, dk, dv;
};

Reference reference(const fl::FlashDims& m, const std::vector<float>& q, const std::vector<float>& k,
                    const std::vector<float>& v, const std::vector<float>& dout) {
    const long long B = m.B, N = m.N, H = m.H, D = m.D, HD = m.HD;
    Reference r;
    r.out.assign(q.size(), 0);
    r.dq.assign(q.size(), 0);
    r.dk.assign(q.size(), 0);
    r.dv.assign(q.size(), 0);
    r.lse.assign(static_cast<std::size_t>(B * H * N), 0);
    auto at = [&](long long b, long long i, long long h, long long d) { return static_cast<std::size_t>((b * N + i) * HD + h * D + d); };
    for (long long b = 0; b < B; ++b)
        for (long long h = 0; h < H; ++h) {
            std::vector<double> P(static_cast<std::size_t>(N * N), 0), dP(static_cast<std::size_t>(N * N), 0);
            for (long long i = 0; i < N; ++i) {
                double mx = -INFINITY;
                std::vector<double> s(static_cast<std::size_t>(N), -INFINITY);
                for (long long j = 0; j < N; ++j) {
                    if (m.causal && j > i) continue;
                    double acc = 0;
                    for (long long d = 0; d < D; ++d) acc += bf16_round(q[at(b, i, h, d)]) * bf16_round(k[at(b, j, h, d)]);
                    s[static_cast<std::size_t>(j)] = acc;
                    mx = std::max(mx, acc);
                }
                double sum = 0;
                for (long long j = 0; j < N; ++j) sum += std::exp(s[static_cast<std::size_t>(j)] - mx);
                r.lse[static_cast<std::size_t>((b * H + h) * N + i)] = mx + std::log(sum);
                for (long long j = 0; j < N; ++j) P[static_cast<std::size_t>(i * N + j)] = std::exp(s[static_cast<std::size_t>(j)] - mx) / sum;
                for (long long d = 0; d < D; ++d) {
                    double o = 0;
                    for (long long j = 0; j < N; ++j) o += P[static_cast<std::size_t>(i * N + j)] * bf16_round(v[at(b, j, h, d)]);
                    r.out[at(b, i, h, d)] = o;
                }
            }
            for (long long i = 0; i < N; ++i) {   // dS = P (dP - rowsum(P dP)), dP = dO V^T
                double delta = 0;
                for (long long j = 0; j < N; ++j) {
                    double acc = 0;
                    for (long long d = 0; d < D; ++d) acc += bf16_round(dout[at(b, i, h, d)]) * bf16_round(v[at(b, j, h, d)]);
                    dP[static_cast<std::size_t>(i * N + j)] = acc;
                    delta += acc * P[static_cast<std::size_t>(i * N + j)];
                }
                for (long long j = 0; j < N; ++j) {
                    const double p = P[static_cast<std::size_t>(i * N + j)];
                    const double ds = p * (dP[static_cast<std::size_t>(i * N + j)] - delta);
                    for (long long d = 0; d < D; ++d) {
                        r.dq[at(b, i, h, d)] += ds * bf16_round(k[at(b, j, h, d)]);
                        r.dk[at(b, j, h, d)] += ds * bf16_round(q[at(b, i, h, d)]);
                        r.dv[at(b, j, h, d)] += p * bf16_round(dout[at(b, i, h, d)]);
                    }
                }
            }
        }
    return r;
}

template <int D>
void check_shape(long long B, long long N, long long H, bool causal, std::uint64_t seed) {
    const fl::FlashDims m{B, N, H, D, H * D, causal};
    CAPTURE(B);
    CAPTURE(N);
    CAPTURE(H);
    CAPTURE(D);
    CAPTURE(causal);
    const std::size_t n = static_cast<std::size_t>(B * N * H * D);
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> q(n), k(n), v(n), dout(n);
    const float scale = 1.0f / std::sqrt(static_cast<float>(D));
    for (auto& x : q) x = normal(rng) * scale;   // the attention layer scales the queries before the kernel
    for (auto& x : k) x = normal(rng);
    for (auto& x : v) x = normal(rng);
    for (auto& x : dout) x = normal(rng);
    const Reference ref = reference(m, q, k, v, dout);

    const long long blocks = (N + fl::kTile - 1) / fl::kTile;
    std::vector<float> out(n, NAN), lse(static_cast<std::size_t>(B * H * N), NAN);
    simt::host::launch(blocks, B * H, fl::kThreads, fl::forward_smem<D>(),
                       [&] { fl::flash_mma_forward<D>(out.data(), lse.data(), q.data(), k.data(), v.data(), m); });
    // Delta as kernels/nn_flash_attention_cuda.cu's flash_delta makes it: sum_d dO O, from the kernel's out
    std::vector<float> delta(static_cast<std::size_t>(B * H * N));
    for (long long b = 0; b < B; ++b)
        for (long long h = 0; h < H; ++h)
            for (long long i = 0; i < N; ++i) {
                float s = 0;
                for (long long d = 0; d < D; ++d) {
                    const auto x = static_cast<std::size_t>((b * N + i) * H * D + h * D + d);
                    s += dout[x] * out[x];
                }
                delta[static_cast<std::size_t>((b * H + h) * N + i)] = s;
            }
    std::vector<float> dq(n, NAN), dk(n, NAN), dv(n, NAN);
    simt::host::launch(blocks, B * H, fl::kThreads, fl::dq_smem<D>(), [&] {
        fl::flash_mma_backward_dq<D>(dq.data(), q.data(), k.data(), v.data(), dout.data(), lse.data(), delta.data(), m);
    });
    simt::host::launch(blocks, B * H, fl::kThreads, fl::dkdv_smem<D>(), [&] {
        fl::flash_mma_backward_dkdv<D>(dk.data(), dv.data(), q.data(), k.data(), v.data(), dout.data(), lse.data(),
                                       delta.data(), m);
    });

    constexpr double bound = 5e-3;   // ops/op_registry: the bf16 bound of nn.flash_attention
    const double e_out = rms_ratio(out, ref.out), e_dq = rms_ratio(dq, ref.dq), e_dk = rms_ratio(dk, ref.dk),
                 e_dv = rms_ratio(dv, ref.dv);
    double e_lse = 0;
    for (std::size_t i = 0; i < lse.size(); ++i) e_lse = std::max(e_lse, std::abs(lse[i] - ref.lse[i]));
    MESSAGE("flash mma (host) B=" << B << " N=" << N << " H=" << H << " D=" << D << std::string(causal ? " causal" : "")
                                  << ": out " << e_out << ", dq " << e_dq << ", dk " << e_dk << ", dv " << e_dv
                                  << ", lse max abs " << e_lse);
    CHECK(e_out <= bound);
    CHECK(e_dq <= bound);
    CHECK(e_dk <= bound);
    CHECK(e_dv <= bound);
    CHECK(e_lse <= 2e-2);   // S from bf16 products in fp32, l from bf16-rounded p
}

}  // namespace

TEST_CASE("flash mma kernels on the host emulator: forward, dQ, dK, dV equal attention in double") {
    check_shape<32>(1, 130, 2, true, 1);    // three query blocks, the last of two rows
    check_shape<64>(2, 100, 1, false, 2);   // not causal: every key block, keys past N masked
    check_shape<64>(1, 64, 1, true, 3);     // exactly one block: only the diagonal masks
    check_shape<128>(1, 70, 1, true, 4);
}

TEST_CASE("flash mma kernels on the host emulator: a divergent barrier is reported, not hung") {
    // the emulator's own check: a warp whose lanes meet at different barriers is a deadlock, named
    auto divergent = [] {
        if (simt::thread_x() % 32 < 16) simt::sync_warp();
        else simt::sync_block();
    };
    CHECK_THROWS_WITH_AS(simt::host::launch(1, 1, 64, 0, divergent), doctest::Contains("deadlock"), std::logic_error);
    // and an exchange answers with the partner lane's value
    std::vector<float> got(32);
    simt::host::launch(1, 1, 32, 0, [&] {
        const int lane = simt::thread_x();
        got[static_cast<std::size_t>(lane)] = simt::shfl_xor(static_cast<float>(lane), 5);
    });
    for (int l = 0; l < 32; ++l) CHECK(got[static_cast<std::size_t>(l)] == static_cast<float>(l ^ 5));
}
