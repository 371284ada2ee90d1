// Chunkwise retention's mma.sync state walk (kernels/retention_chunk_mma.cuh) on the host through the block emulator
// (tests/simt_host.h): out and the final state of the forward and the reverse walk, with and without an initial
// state (as [Da][Dc] and transposed), one and two load stages, 64 and 128 columns a block, every instantiated Da,
// partial last chunks, against
// the walk's closed form in double on the bf16 operands (and bit for bit the same under the emulator's warp-serial
// schedules, which expose a race between warps of one phase):
//   forward: out_i = scale Σ_{j<=i} gamma^(i-j) (a_i·b_j) c_j + scale gamma^(i+1) a_i M0
//            fin   = gamma^T M0 + Σ_j gamma^(T-1-j) b_j^T c_j
//   reverse: out_i = scale Σ_{j>=i} gamma^(j-i) (a_i·b_j) c_j + gamma^(T-1-i) a_i M0
//            fin   = gamma^T M0 + Σ_j scale gamma^(j+1) b_j^T c_j
// (what the chunk recurrences of the kernel's header sum to; RETENTION.md §1). Bound: rms(x - ref) / rms(ref) within
// the op harness's bf16 5e-3. On a GPU the same kernel runs under the op harness (retention.chunkwise, bf16).
#define RETRO_SIMT_HOST 1
#include "simt_host.h"
//
#include "../kernels/retention_chunk_mma.cuh"
#include "retention/retention_launch.h"

#include <doctest/doctest.h>

#include "test_util.h"

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace retro;
namespace cm = retro::retention::chunk_mma;

namespace {

struct WalkCase {
    long long B, T, H;
    int Dc;
    bool rev, with_init, with_fin, transposed;
};

template <int DA, int NC, int STAGES>
void check_walk(const WalkCase& wc, std::uint64_t seed) {
    const long long B = wc.B, T = wc.T, H = wc.H;
    const int Dc = wc.Dc;
    const std::string name = "T=" + std::to_string(T) + " H=" + std::to_string(H) + " DA=" + std::to_string(DA) +
                             " Dc=" + std::to_string(Dc) + " NC=" + std::to_string(NC) + " stages=" + std::to_string(STAGES) + (wc.rev ? " rev" : "") +
                             (wc.with_init ? " init" : "") + (wc.with_fin ? " fin" : "") + (wc.transposed ? " transposed" : "");
    INFO(name);
    std::mt19937 rng(static_cast<unsigned>(seed));
    std::normal_distribution<float> nd(0.0f, 1.0f);
    auto random_bf16 = [&](std::size_t n) {
        std::vector<std::uint16_t> x(n);
        for (auto& e : x) e = simt::bf16_bits(nd(rng));
        return x;
    };
    const auto na = static_cast<std::size_t>(B * T * H * DA), nc = static_cast<std::size_t>(B * T * H * Dc);
    const auto ns = static_cast<std::size_t>(B * H * DA * Dc);
    const auto a = random_bf16(na), b = random_bf16(na), c = random_bf16(nc);
    std::vector<float> init(ns);
    for (auto& e : init) e = 0.3f * nd(rng);

    cm::PairDecays dec{};
    std::vector<double> gamma(static_cast<std::size_t>(H));
    for (long long h = 0; h < H; ++h) {   // RetNet's 1 - 2^(-5 - h)
        gamma[static_cast<std::size_t>(h)] = 1.0 - std::pow(2.0, -5.0 - static_cast<double>(h));
        dec.lg2[h] = static_cast<float>(std::log2(gamma[static_cast<std::size_t>(h)]));
    }
    const float scale = 1.0f / std::sqrt(static_cast<float>(DA));
    const cm::ChunkArgs args{B, T, H, Dc, scale, wc.transposed};

    auto run = [&](simt::host::Schedule schedule, std::vector<std::uint16_t>& out, std::vector<float>& fin) {
        simt::host::ScheduleScope scope(schedule);
        out.assign(nc, 0xffff);   // NaN: a row never written shows
        fin.assign(ns, std::nanf(""));
        simt::host::launch(Dc / NC, B * H, cm::chunk_threads<NC>(), cm::chunk_smem<DA, NC, STAGES>(), [&] {
            if (wc.rev)
                cm::retention_chunk_mma<DA, NC, true, STAGES>(out.data(), a.data(), b.data(), c.data(),
                                                          wc.with_init ? init.data() : nullptr,
                                                          wc.with_fin ? fin.data() : nullptr, args, dec);
            else
                cm::retention_chunk_mma<DA, NC, false, STAGES>(out.data(), a.data(), b.data(), c.data(),
                                                           wc.with_init ? init.data() : nullptr,
                                                           wc.with_fin ? fin.data() : nullptr, args, dec);
        });
    };
    std::vector<std::uint16_t> out;
    std::vector<float> fin;
    run(simt::host::Schedule::interleaved, out, fin);

    auto v = [](std::uint16_t x) { return static_cast<double>(simt::bf16_value(x)); };
    auto at = [&](long long bi, long long t, long long h, long long D) {
        return static_cast<std::size_t>(((bi * T + t) * H + h) * D);
    };
    auto state = [&](long long bh, int i, int j) {   // M0[i][j] of head bh as the kernel reads it
        const auto base = static_cast<std::size_t>(bh * DA * Dc);
        return wc.with_init ? static_cast<double>(init[base + static_cast<std::size_t>(wc.transposed ? j * DA + i : i * Dc + j)]) : 0.0;
    };
    std::vector<float> got_out(nc), got_fin;
    std::vector<double> ref_out(nc, 0.0), ref_fin;
    for (std::size_t e = 0; e < nc; ++e) got_out[e] = simt::bf16_value(out[e]);
    for (long long bi = 0; bi < B; ++bi)
        for (long long h = 0; h < H; ++h) {
            const double gm = gamma[static_cast<std::size_t>(h)];
            const long long bh = bi * H + h;
            for (long long i = 0; i < T; ++i) {
                double* o = ref_out.data() + at(bi, i, h, Dc);
                for (long long j = 0; j < T; ++j) {
                    if (wc.rev ? j < i : j > i) continue;
                    double dot = 0;
                    for (int d = 0; d < DA; ++d) dot += v(a[at(bi, i, h, DA) + static_cast<std::size_t>(d)]) * v(b[at(bi, j, h, DA) + static_cast<std::size_t>(d)]);
                    const double w = scale * std::pow(gm, static_cast<double>(std::abs(i - j))) * dot;
                    for (int d = 0; d < Dc; ++d) o[d] += w * v(c[at(bi, j, h, Dc) + static_cast<std::size_t>(d)]);
                }
                const double coef = wc.rev ? std::pow(gm, static_cast<double>(T - 1 - i)) : scale * std::pow(gm, static_cast<double>(i + 1));
                for (int d = 0; d < Dc; ++d) {
                    double x = 0;
                    for (int k = 0; k < DA; ++k) x += v(a[at(bi, i, h, DA) + static_cast<std::size_t>(k)]) * state(bh, k, d);
                    o[d] += coef * x;
                }
            }
            if (!wc.with_fin) continue;
            for (int i = 0; i < DA; ++i)
                for (int j = 0; j < Dc; ++j) {
                    double x = std::pow(gm, static_cast<double>(T)) * state(bh, i, j);
                    for (long long n = 0; n < T; ++n) {
                        const double f = wc.rev ? scale * std::pow(gm, static_cast<double>(n + 1)) : std::pow(gm, static_cast<double>(T - 1 - n));
                        x += f * v(b[at(bi, n, h, DA) + static_cast<std::size_t>(i)]) * v(c[at(bi, n, h, Dc) + static_cast<std::size_t>(j)]);
                    }
                    const auto e = static_cast<std::size_t>(bh * DA * Dc + (wc.transposed ? j * DA + i : i * Dc + j));
                    got_fin.push_back(fin[e]);
                    ref_fin.push_back(x);
                }
        }
    const double err_out = test::rms_ratio(got_out, ref_out);
    MESSAGE("retention chunk mma (host) " << name << ": out rms ratio " << err_out);
    CHECK(err_out <= 5e-3);
    if (wc.with_fin) {
        const double err_fin = test::rms_ratio(got_fin, ref_fin);
        MESSAGE("retention chunk mma (host) " << name << ": fin rms ratio " << err_fin);
        CHECK(err_fin <= 5e-3);
    }
    // each warp alone to the next barrier, both orders: a warp racing another one inside a phase changes the bits
    for (const auto schedule : {simt::host::Schedule::warps_ascending, simt::host::Schedule::warps_descending}) {
        INFO("schedule: " << simt::host::schedule_name(schedule));
        std::vector<std::uint16_t> out_s;
        std::vector<float> fin_s;
        run(schedule, out_s, fin_s);
        CHECK(out_s == out);
        if (wc.with_fin) CHECK(std::memcmp(fin_s.data(), fin.data(), fin.size() * sizeof(float)) == 0);
    }
}

}  // namespace

TEST_CASE("retention chunk mma walk on the host emulator: forward and reverse, states, stages, 64 and 128 columns a block equal the walk in double") {
    check_walk<128, 128, 2>({1, 150, 2, 128, false, true, true, false}, 1);   // the forward (q, k, v; S) at K = V = 128
    check_walk<128, 64, 2>({1, 130, 1, 128, true, true, true, true}, 2);      // dk's walk: reverse, G^T transposed, two tiles
    check_walk<64, 128, 1>({2, 100, 1, 256, true, false, true, false}, 3);    // dv's (Da = K = 64): two 128-column tiles, one stage
    check_walk<128, 64, 1>({1, 64, 2, 64, false, true, false, true}, 4);      // dq's: S^T in, one whole chunk
    check_walk<32, 64, 2>({1, 40, 1, 64, false, false, false, false}, 5);     // a single short chunk
    check_walk<96, 128, 2>({1, 192, 1, 128, true, true, true, true}, 6);      // three whole chunks, Da = 96
    // the host launch plan (retention/retention_launch.h) names the kernel's shared memory
    CHECK(retention::chunk_mma_shared_bytes(128, 2, 128) == cm::chunk_smem<128, 128, 2>());
    CHECK(retention::chunk_mma_shared_bytes(128, 2, 64) == cm::chunk_smem<128, 64, 2>());
    CHECK(retention::chunk_mma_shared_bytes(32, 1, 64) == cm::chunk_smem<32, 64, 1>());
    CHECK(retention::chunk_mma_shared_bytes(96, 1, 128) == cm::chunk_smem<96, 128, 1>());
}
