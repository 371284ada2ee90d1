// Retention's tensor-core pair kernel (kernels/retention_pair_mma.cuh) on the host through the block emulator
// (tests/simt_host.h): out_i (=|+=) scale Σ_j gamma^|i-j| (a_i·b_j) c_j over i's window, both directions, the whole
// sequence (the parallel mode) and chunk windows aligned and not aligned to the kernel's 64-row tiles, against the
// same sum in double on the bf16 operands: rms(x - ref) / rms(ref) within the op harness's bf16 bound (5e-3).
// On a GPU the same kernel runs under the op harness (retention.parallel and retention.chunkwise, bf16).
#define RETRO_SIMT_HOST 1
#include "simt_host.h"
//
#include "../kernels/retention_pair_mma.cuh"
#include "retention/retention_launch.h"

#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

using namespace retro;
namespace pm = retro::retention::pair_mma;

namespace {

struct PairCase {
    long long B, T, H, C;
    bool rev, accumulate;
};

std::vector<std::uint16_t> random_bf16(std::size_t n, std::mt19937& rng) {
    std::normal_distribution<float> d(0.0f, 1.0f);
    std::vector<std::uint16_t> x(n);
    for (auto& e : x) e = simt::bf16_bits(d(rng));
    return x;
}

template <int DA, int DC>
void check_pair(const PairCase& pc, std::uint64_t seed) {
    const long long B = pc.B, T = pc.T, H = pc.H, C = pc.C;
    INFO("B=" << B << " T=" << T << " H=" << H << " C=" << C << " DA=" << DA << " DC=" << DC << (pc.rev ? " rev" : "")
              << (pc.accumulate ? " +=" : ""));
    std::mt19937 rng(static_cast<unsigned>(seed));
    const auto na = static_cast<std::size_t>(B * T * H * DA), nc = static_cast<std::size_t>(B * T * H * DC);
    const auto a = random_bf16(na, rng), b = random_bf16(na, rng), c = random_bf16(nc, rng);
    const auto start = random_bf16(nc, rng);   // out's previous content (+=)
    pm::PairDecays g{};
    std::vector<double> gamma(static_cast<std::size_t>(H));
    for (long long h = 0; h < H; ++h) {   // RetNet's 1 - 2^(-5 - h)
        gamma[static_cast<std::size_t>(h)] = 1.0 - std::pow(2.0, -5.0 - static_cast<double>(h));
        g.lg2[h] = static_cast<float>(std::log2(gamma[static_cast<std::size_t>(h)]));
    }
    const float scale = 1.0f / std::sqrt(static_cast<float>(DA));
    const pm::PairArgs args{B, T, H, C, scale, pc.accumulate};

    std::vector<std::uint16_t> out = pc.accumulate ? start : std::vector<std::uint16_t>(nc, 0xffff);
    simt::host::launch((T + pm::kTile - 1) / pm::kTile, B * H, pm::kThreads, pm::pair_smem<DA, DC>(), [&] {
        pm::retention_pair_mma<DA, DC, false>(out.data(), a.data(), b.data(), c.data(), args, g);
    });
    if (pc.rev) {   // the other direction, into a fresh buffer (the launch above checked the forward one)
        out = pc.accumulate ? start : std::vector<std::uint16_t>(nc, 0xffff);
        simt::host::launch((T + pm::kTile - 1) / pm::kTile, B * H, pm::kThreads, pm::pair_smem<DA, DC>(), [&] {
            pm::retention_pair_mma<DA, DC, true>(out.data(), a.data(), b.data(), c.data(), args, g);
        });
    }
    auto v = [](std::uint16_t x) { return static_cast<double>(simt::bf16_value(x)); };
    auto at = [&](long long bi, long long t, long long h, long long D) {
        return static_cast<std::size_t>(((bi * T + t) * H + h) * D);
    };
    double num = 0, den = 0;
    for (long long bi = 0; bi < B; ++bi)
        for (long long h = 0; h < H; ++h)
            for (long long i = 0; i < T; ++i) {
                std::vector<double> ref(static_cast<std::size_t>(DC), 0.0);
                for (long long j = 0; j < T; ++j) {
                    if (i / C != j / C || (pc.rev ? j < i : j > i)) continue;
                    double dot = 0;
                    for (int d = 0; d < DA; ++d) dot += v(a[at(bi, i, h, DA) + d]) * v(b[at(bi, j, h, DA) + d]);
                    const double w = scale * std::pow(gamma[static_cast<std::size_t>(h)], static_cast<double>(std::abs(i - j))) * dot;
                    for (int d = 0; d < DC; ++d) ref[static_cast<std::size_t>(d)] += w * v(c[at(bi, j, h, DC) + d]);
                }
                for (int d = 0; d < DC; ++d) {
                    const double r = ref[static_cast<std::size_t>(d)] + (pc.accumulate ? v(start[at(bi, i, h, DC) + d]) : 0.0);
                    const double x = v(out[at(bi, i, h, DC) + d]);
                    num += (x - r) * (x - r);
                    den += r * r;
                }
            }
    const double err = std::sqrt(num / den);
    MESSAGE("retention pair mma (host) T=" << T << " C=" << C << " DA=" << DA << " DC=" << DC
                                           << std::string(pc.rev ? " rev" : "") << std::string(pc.accumulate ? " +=" : "")
                                           << ": rms ratio " << err);
    CHECK(err <= 5e-3);
}

// rms(x - ref) / rms(ref) of out [B, T, H, dc] against the reverse pair of (a [.., da], b [.., da], c [.., dc]) in
// double over the whole sequence
double reverse_pair_error(const std::vector<std::uint16_t>& out, const std::vector<std::uint16_t>& a,
                          const std::vector<std::uint16_t>& b, const std::vector<std::uint16_t>& c, long long B,
                          long long T, long long H, int da, int dc, const std::vector<double>& gamma, double scale) {
    auto v = [](std::uint16_t x) { return static_cast<double>(simt::bf16_value(x)); };
    auto at = [&](long long bi, long long t, long long h, long long D) { return static_cast<std::size_t>(((bi * T + t) * H + h) * D); };
    double num = 0, den = 0;
    for (long long bi = 0; bi < B; ++bi)
        for (long long h = 0; h < H; ++h)
            for (long long i = 0; i < T; ++i) {
                std::vector<double> ref(static_cast<std::size_t>(dc), 0.0);
                for (long long j = i; j < T; ++j) {
                    double dot = 0;
                    for (int d = 0; d < da; ++d) dot += v(a[at(bi, i, h, da) + d]) * v(b[at(bi, j, h, da) + d]);
                    const double w = scale * std::pow(gamma[static_cast<std::size_t>(h)], static_cast<double>(j - i)) * dot;
                    for (int d = 0; d < dc; ++d) ref[static_cast<std::size_t>(d)] += w * v(c[at(bi, j, h, dc) + d]);
                }
                for (int d = 0; d < dc; ++d) {
                    const double r = ref[static_cast<std::size_t>(d)], x = v(out[at(bi, i, h, dc) + d]);
                    num += (x - r) * (x - r);
                    den += r * r;
                }
            }
    return std::sqrt(num / den);
}

// The dual form (the backward's dk and dv from one kernel): out = pair(a, b, c), out2 = pair(a2, c, b), reverse.
template <int DA, int DC>
void check_dual(long long B, long long T, long long H, std::uint64_t seed) {
    std::mt19937 rng(static_cast<unsigned>(seed));
    const auto na = static_cast<std::size_t>(B * T * H * DA), nc = static_cast<std::size_t>(B * T * H * DC);
    const auto a = random_bf16(na, rng), b = random_bf16(na, rng), c = random_bf16(nc, rng), a2 = random_bf16(nc, rng);
    pm::PairDecays g{};
    std::vector<double> gamma(static_cast<std::size_t>(H));
    for (long long h = 0; h < H; ++h) {
        gamma[static_cast<std::size_t>(h)] = 1.0 - std::pow(2.0, -5.0 - static_cast<double>(h));
        g.lg2[h] = static_cast<float>(std::log2(gamma[static_cast<std::size_t>(h)]));
    }
    const float scale = 1.0f / std::sqrt(static_cast<float>(DA));
    const pm::PairArgs args{B, T, H, T, scale, false};
    std::vector<std::uint16_t> out(nc, 0xffff), out2(na, 0xffff);
    simt::host::launch((T + pm::kTile - 1) / pm::kTile, B * H, pm::kThreads, pm::pair_smem<DA, DC, true>(), [&] {
        pm::retention_pair_mma<DA, DC, true, true>(out.data(), a.data(), b.data(), c.data(), args, g, a2.data(), out2.data());
    });
    const double e1 = reverse_pair_error(out, a, b, c, B, T, H, DA, DC, gamma, scale);
    const double e2 = reverse_pair_error(out2, a2, c, b, B, T, H, DC, DA, gamma, scale);
    MESSAGE("retention pair mma dual (host) T=" << T << " DA=" << DA << " DC=" << DC << ": rms ratio " << e1 << ", " << e2);
    CHECK(e1 <= 5e-3);
    CHECK(e2 <= 5e-3);
}

}  // namespace

TEST_CASE("retention pair mma kernel on the host emulator: both directions and windows equal the pair in double") {
    check_pair<64, 128>({2, 150, 2, 150, false, false}, 1);   // the parallel mode's dQ-like product: the whole sequence
    check_pair<64, 128>({1, 150, 2, 150, true, false}, 2);    // reverse (dK, dV)
    check_pair<128, 64>({1, 140, 1, 64, false, true}, 3);     // chunk windows aligned to the tiles, +=
    check_pair<128, 128>({1, 130, 1, 100, true, true}, 4);    // windows cutting tiles, reverse, +=
    check_pair<64, 64>({1, 100, 3, 7, false, false}, 5);      // a small window (chunk 7) across several heads
    check_pair<128, 128>({1, 300, 1, 300, true, false}, 6);   // five tiles: both load stages twice, both directions
    check_dual<128, 64>(1, 200, 2, 7);   // dk (Dc = K) and dv (Da = V) of the backward in one kernel, four tiles
    check_dual<64, 128>(2, 70, 1, 8);
    // the launcher's plan (retention/retention_launch.h) names the kernel's shared memory
    CHECK(retention::pair_mma_shared_bytes(64, 128) == pm::pair_smem<64, 128>());
    CHECK(retention::pair_mma_shared_bytes(128, 64) == pm::pair_smem<128, 64>());
    CHECK(retention::pair_mma_shared_bytes(128, 64, true) == pm::pair_smem<128, 64, true>());
    CHECK(retention::pair_mma_shared_bytes(64, 128, true) == pm::pair_smem<64, 128, true>());
}
