// Chunkwise retention's mma.sync state walk (kernels/retention_chunk_mma.cuh) on the host through the block emulator
// (tests/simt_host.h): out and the final state of the forward and the reverse walk, with and without an initial
// state (as [Da][Dc] and transposed), one and two load stages, 64 and 128 columns a block, every instantiated Da,
// partial last chunks, the dual walk (dk beside dv over one G) and the 16-warp walk (also bit for bit against the
// 8-warp one), against the walk's closed form in double on the
// bf16 operands (and bit for bit the same under the emulator's warp-serial schedules, which expose a race between
// warps of one phase):
//   forward: out_i = scale Σ_{j<=i} gamma^(i-j) (a_i·b_j) c_j + scale gamma^(i+1) a_i M0
//            fin   = gamma^T M0 + Σ_j gamma^(T-1-j) b_j^T c_j
//   reverse: out_i = scale Σ_{j>=i} gamma^(j-i) (a_i·b_j) c_j + gamma^(T-1-i) a_i M0
//            fin   = gamma^T M0 + Σ_j scale gamma^(j+1) b_j^T c_j
// (what the chunk recurrences of the kernel's header sum to; RETENTION.md §1). Bound: rms(x - ref) / rms(ref) within
// the op harness's bf16 5e-3. On a GPU the same kernel runs under the op harness (retention.chunkwise, bf16).
#define RETRO_SIMT_HOST 1
#include "simt_host.h"
//
#include "../kernels/retention_chunk_mma16.cuh"
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

using Bits = std::vector<std::uint16_t>;

// The walk's closed form (this file's header) in double for every (item, head): out [B, T, H, Dc] and, in the
// walk's own orientation, fin [B, H][Da][Dc]; state(bh, i, j) is M0[i][j] (Da x Dc).
struct Problem {
    long long B, T, H;
    std::vector<double> gamma;
    float scale;
    cm::PairDecays dec{};
    Problem(long long b, long long t, long long h, int da) : B(b), T(t), H(h), gamma(static_cast<std::size_t>(h)) {
        for (long long i = 0; i < H; ++i) {   // RetNet's 1 - 2^(-5 - h)
            gamma[static_cast<std::size_t>(i)] = 1.0 - std::pow(2.0, -5.0 - static_cast<double>(i));
            dec.lg2[i] = static_cast<float>(std::log2(gamma[static_cast<std::size_t>(i)]));
        }
        scale = 1.0f / std::sqrt(static_cast<float>(da));
    }
    std::size_t at(long long bi, long long t, long long h, long long D) const {
        return static_cast<std::size_t>(((bi * T + t) * H + h) * D);
    }
};
struct Reference {
    std::vector<double> out, fin;
};
template <typename State>
Reference walk_reference(const Problem& P, const Bits& a, const Bits& b, int Da, const Bits& c, int Dc, State state,
                         bool rev) {
    auto v = [](std::uint16_t x) { return static_cast<double>(simt::bf16_value(x)); };
    const long long T = P.T;
    Reference r{std::vector<double>(static_cast<std::size_t>(P.B * T * P.H * Dc), 0.0),
                std::vector<double>(static_cast<std::size_t>(P.B * P.H * Da * Dc), 0.0)};
    for (long long bi = 0; bi < P.B; ++bi)
        for (long long h = 0; h < P.H; ++h) {
            const double gm = P.gamma[static_cast<std::size_t>(h)];
            const long long bh = bi * P.H + h;
            for (long long i = 0; i < T; ++i) {
                double* o = r.out.data() + P.at(bi, i, h, Dc);
                const std::uint16_t* ai = a.data() + P.at(bi, i, h, Da);
                for (long long j = 0; j < T; ++j) {
                    if (rev ? j < i : j > i) continue;
                    double dot = 0;
                    for (int d = 0; d < Da; ++d) dot += v(ai[d]) * v(b[P.at(bi, j, h, Da) + static_cast<std::size_t>(d)]);
                    const double w = P.scale * std::pow(gm, static_cast<double>(std::abs(i - j))) * dot;
                    for (int d = 0; d < Dc; ++d) o[d] += w * v(c[P.at(bi, j, h, Dc) + static_cast<std::size_t>(d)]);
                }
                const double coef = rev ? std::pow(gm, static_cast<double>(T - 1 - i)) : P.scale * std::pow(gm, static_cast<double>(i + 1));
                for (int d = 0; d < Dc; ++d) {
                    double x = 0;
                    for (int k = 0; k < Da; ++k) x += v(ai[k]) * state(bh, k, d);
                    o[d] += coef * x;
                }
            }
            for (int i = 0; i < Da; ++i)
                for (int j = 0; j < Dc; ++j) {
                    double x = std::pow(gm, static_cast<double>(T)) * state(bh, i, j);
                    for (long long n = 0; n < T; ++n) {
                        const double f = rev ? P.scale * std::pow(gm, static_cast<double>(n + 1)) : std::pow(gm, static_cast<double>(T - 1 - n));
                        x += f * v(b[P.at(bi, n, h, Da) + static_cast<std::size_t>(i)]) * v(c[P.at(bi, n, h, Dc) + static_cast<std::size_t>(j)]);
                    }
                    r.fin[static_cast<std::size_t>((bh * Da + i) * Dc + j)] = x;
                }
        }
    return r;
}

Bits random_bf16(std::size_t n, std::mt19937& rng) {
    std::normal_distribution<float> nd(0.0f, 1.0f);
    Bits x(n);
    for (auto& e : x) e = simt::bf16_bits(nd(rng));
    return x;
}
std::vector<float> random_state(std::size_t n, std::mt19937& rng) {
    std::normal_distribution<float> nd(0.0f, 0.3f);
    std::vector<float> x(n);
    for (auto& e : x) e = nd(rng);
    return x;
}
std::vector<float> values(const Bits& x) {
    std::vector<float> y(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) y[i] = simt::bf16_value(x[i]);
    return y;
}
bool same_bits(const std::vector<float>& x, const std::vector<float>& y) {
    return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}
void check_close(const std::string& what, const std::vector<float>& got, const std::vector<double>& ref) {
    const double err = test::rms_ratio(got, ref);
    MESSAGE("retention chunk mma (host) " << what << ": rms ratio " << err);
    CHECK(err <= 5e-3);
}
constexpr simt::host::Schedule kWarpSerial[] = {simt::host::Schedule::warps_ascending, simt::host::Schedule::warps_descending};

struct WalkCase {
    long long B, T, H;
    int Dc;
    bool rev, with_init, with_fin, transposed;
};

// WIDE: the 16-warp walk (retention_chunk_mma16.cuh; NC = 128, two stages, two copies), also bit for bit against
// the 8-warp walk of the same configuration.
template <int DA, int NC, int STAGES, int COPIES = 1, bool WIDE = false>
void check_walk(const WalkCase& wc, std::uint64_t seed) {
    static_assert(!WIDE || (NC == cm::kWideColumns && STAGES == 2 && COPIES == 2), "the 16-warp walk's configuration");
    const int Dc = wc.Dc;
    const std::string name = "T=" + std::to_string(wc.T) + " H=" + std::to_string(wc.H) + " DA=" + std::to_string(DA) +
                             " Dc=" + std::to_string(Dc) + " NC=" + std::to_string(NC) + " stages=" + std::to_string(STAGES) +
                             " copies=" + std::to_string(COPIES) + (WIDE ? " 16 warps" : "") + (wc.rev ? " rev" : "") +
                             (wc.with_init ? " init" : "") + (wc.with_fin ? " fin" : "") +
                             (wc.transposed ? " transposed" : "");
    INFO(name);
    const Problem P(wc.B, wc.T, wc.H, DA);
    std::mt19937 rng(static_cast<unsigned>(seed));
    const auto na = static_cast<std::size_t>(P.B * P.T * P.H * DA), nc = static_cast<std::size_t>(P.B * P.T * P.H * Dc);
    const auto ns = static_cast<std::size_t>(P.B * P.H * DA * Dc);
    const Bits a = random_bf16(na, rng), b = random_bf16(na, rng), c = random_bf16(nc, rng);
    const std::vector<float> init = random_state(ns, rng);
    const cm::ChunkArgs args{P.B, P.T, P.H, Dc, P.scale, wc.transposed};

    auto run = [&](simt::host::Schedule schedule, Bits& out, std::vector<float>& fin, bool wide) {
        simt::host::ScheduleScope scope(schedule);
        out.assign(nc, 0xffff);   // NaN: a row never written shows
        fin.assign(ns, std::nanf(""));
        const int threads = wide ? cm::kWideThreads : cm::chunk_threads<NC>();
        const int smem = wide ? cm::chunk16_smem<DA>() : cm::chunk_smem<DA, NC, STAGES, false, COPIES>();
        simt::host::launch(Dc / NC, P.B * P.H, threads, static_cast<std::size_t>(smem), [&] {
            const float* i0 = wc.with_init ? init.data() : nullptr;
            float* f0 = wc.with_fin ? fin.data() : nullptr;
            if (wide) {
                if (wc.rev) cm::retention_chunk_mma16<DA, true>(out.data(), a.data(), b.data(), c.data(), i0, f0, args, P.dec);
                else cm::retention_chunk_mma16<DA, false>(out.data(), a.data(), b.data(), c.data(), i0, f0, args, P.dec);
            } else if (wc.rev)
                cm::retention_chunk_mma<DA, NC, true, STAGES, false, COPIES>(out.data(), a.data(), b.data(), c.data(), i0, f0, args, P.dec);
            else
                cm::retention_chunk_mma<DA, NC, false, STAGES, false, COPIES>(out.data(), a.data(), b.data(), c.data(), i0, f0, args, P.dec);
        });
    };
    Bits out;
    std::vector<float> fin;
    run(simt::host::Schedule::interleaved, out, fin, WIDE);
    if constexpr (WIDE) {   // the same walk as the 8-warp one, bit for bit
        Bits out8;
        std::vector<float> fin8;
        run(simt::host::Schedule::interleaved, out8, fin8, false);
        CHECK(out == out8);
        if (wc.with_fin) CHECK(same_bits(fin, fin8));
    }

    // M0[i][j] as the kernel reads it; fin in the kernel's orientation
    auto state = [&](long long bh, int i, int j) {
        const auto base = static_cast<std::size_t>(bh * DA * Dc);
        return wc.with_init ? static_cast<double>(init[base + static_cast<std::size_t>(wc.transposed ? j * DA + i : i * Dc + j)]) : 0.0;
    };
    const Reference ref = walk_reference(P, a, b, DA, c, Dc, state, wc.rev);
    check_close(name + ": out", values(out), ref.out);
    if (wc.with_fin) {
        std::vector<float> got(ns);
        for (long long bh = 0; bh < P.B * P.H; ++bh)
            for (int i = 0; i < DA; ++i)
                for (int j = 0; j < Dc; ++j)
                    got[static_cast<std::size_t>((bh * DA + i) * Dc + j)] =
                        fin[static_cast<std::size_t>(bh * DA * Dc + (wc.transposed ? j * DA + i : i * Dc + j))];
        check_close(name + ": fin", got, ref.fin);
    }
    // each warp alone to the next barrier, both orders: a warp racing another one inside a phase changes the bits
    for (const auto schedule : kWarpSerial) {
        INFO("schedule: " << simt::host::schedule_name(schedule));
        Bits out_s;
        std::vector<float> fin_s;
        run(schedule, out_s, fin_s, WIDE);
        CHECK(out_s == out);
        if (wc.with_fin) CHECK(same_bits(fin_s, fin));
    }
}

// The dual walk (K = V = D): dv = walk(k, q, dO; G) with dh0 its final G, and dk = walk(v, dO, q; G^T) beside it,
// G starting from dht [K][V] — the backward's two reverse walks in one.
template <int D, int STAGES, int COPIES = 1>
void check_dual(long long B, long long T, long long H, bool with_init, std::uint64_t seed) {
    const std::string name = "dual T=" + std::to_string(T) + " H=" + std::to_string(H) + " D=" + std::to_string(D) +
                             " stages=" + std::to_string(STAGES) + " copies=" + std::to_string(COPIES) +
                             (with_init ? " dht" : "");
    INFO(name);
    const Problem P(B, T, H, D);
    std::mt19937 rng(static_cast<unsigned>(seed));
    const auto n = static_cast<std::size_t>(B * T * H * D), ns = static_cast<std::size_t>(B * H * D * D);
    const Bits q = random_bf16(n, rng), k = random_bf16(n, rng), v = random_bf16(n, rng), dO = random_bf16(n, rng);
    const std::vector<float> dht = random_state(ns, rng);
    const cm::ChunkArgs args{B, T, H, D, P.scale, false};
    auto run = [&](simt::host::Schedule schedule, Bits& dk, Bits& dv, std::vector<float>& dh0) {
        simt::host::ScheduleScope scope(schedule);
        dk.assign(n, 0xffff);
        dv.assign(n, 0xffff);
        dh0.assign(ns, std::nanf(""));
        simt::host::launch(1, B * H, cm::chunk_threads<D>(), cm::chunk_smem<D, D, STAGES, true, COPIES>(), [&] {
            cm::retention_chunk_mma<D, D, true, STAGES, true, COPIES>(dv.data(), k.data(), q.data(), dO.data(),
                                                              with_init ? dht.data() : nullptr, dh0.data(), args,
                                                              P.dec, v.data(), dk.data());
        });
    };
    Bits dk, dv;
    std::vector<float> dh0;
    run(simt::host::Schedule::interleaved, dk, dv, dh0);
    auto g0 = [&](long long bh, int i, int j) {   // G0[i][j], i over K, j over V
        return with_init ? static_cast<double>(dht[static_cast<std::size_t>((bh * D + i) * D + j)]) : 0.0;
    };
    const Reference ref_dv = walk_reference(P, k, q, D, dO, D, g0, true);
    const Reference ref_dk = walk_reference(P, v, dO, D, q, D, [&](long long bh, int i, int j) { return g0(bh, j, i); }, true);
    check_close(name + ": dv", values(dv), ref_dv.out);
    check_close(name + ": dk", values(dk), ref_dk.out);
    check_close(name + ": dh0", dh0, ref_dv.fin);
    for (const auto schedule : kWarpSerial) {
        INFO("schedule: " << simt::host::schedule_name(schedule));
        Bits dk_s, dv_s;
        std::vector<float> dh0_s;
        run(schedule, dk_s, dv_s, dh0_s);
        CHECK(dk_s == dk);
        CHECK(dv_s == dv);
        CHECK(same_bits(dh0_s, dh0));
    }
}

}  // namespace

TEST_CASE("retention chunk mma walk on the host emulator: forward and reverse, states, stages, copies, 64 and 128 columns a block, 16 warps, the dual dk+dv walk equal the walk in double") {
    check_walk<128, 128, 2>({1, 150, 2, 128, false, true, true, false}, 1);   // the forward (q, k, v; S) at K = V = 128
    check_walk<128, 128, 2, 2>({1, 200, 2, 128, false, true, true, false}, 1);   // the same with two copies of M (H100)
    check_walk<128, 64, 2>({1, 130, 1, 128, true, true, true, true}, 2);      // dk's walk: reverse, G^T transposed, two tiles
    check_walk<64, 64, 2, 2>({1, 257, 1, 128, true, true, true, true}, 9);    // two copies, an odd number of chunks
    check_walk<64, 128, 1>({2, 100, 1, 256, true, false, true, false}, 3);    // dv's (Da = K = 64): two 128-column tiles, one stage
    check_walk<128, 64, 1>({1, 64, 2, 64, false, true, false, true}, 4);      // dq's: S^T in, one whole chunk
    check_walk<32, 64, 2>({1, 40, 1, 64, false, false, false, false}, 5);     // a single short chunk
    check_walk<96, 128, 2>({1, 192, 1, 128, true, true, true, true}, 6);      // three whole chunks, Da = 96
    // the 16-warp walk (RETRO_RETENTION_KERNELS=mma16): forward and reverse, with and without states, transposed,
    // every Da, partial and odd chunk counts, two 128-column tiles
    check_walk<128, 128, 2, 2, true>({1, 200, 2, 128, false, true, true, false}, 11);   // the forward at K = V = 128
    check_walk<128, 128, 2, 2, true>({1, 130, 1, 128, true, true, true, true}, 12);     // reverse, G^T transposed
    check_walk<64, 128, 2, 2, true>({2, 100, 1, 256, true, false, true, false}, 13);    // two tiles, Da = 64
    check_walk<32, 128, 2, 2, true>({1, 40, 1, 128, false, false, false, false}, 14);   // a single short chunk
    check_walk<96, 128, 2, 2, true>({1, 192, 1, 128, false, true, true, true}, 15);     // three whole chunks, Da = 96
    check_dual<128, 2>(1, 150, 2, true, 7);   // the backward's dk and dv at K = V = 128, dht in
    check_dual<128, 2, 2>(1, 150, 1, true, 10);   // the same with two copies of G (H100)
    check_dual<64, 1>(2, 100, 1, false, 8);   // K = V = 64, one stage, no dht
    // the host launch plan (retention/retention_launch.h) names the kernel's shared memory
    CHECK(retention::chunk_mma_shared_bytes(128, 2, 128) == cm::chunk_smem<128, 128, 2>());
    CHECK(retention::chunk_mma_shared_bytes(128, 2, 64) == cm::chunk_smem<128, 64, 2>());
    CHECK(retention::chunk_mma_shared_bytes(32, 1, 64) == cm::chunk_smem<32, 64, 1>());
    CHECK(retention::chunk_mma_shared_bytes(96, 1, 128) == cm::chunk_smem<96, 128, 1>());
    CHECK(retention::chunk_mma_shared_bytes(128, 2, 128, true) == cm::chunk_smem<128, 128, 2, true>());
    CHECK(retention::chunk_mma_shared_bytes(64, 1, 64, true) == cm::chunk_smem<64, 64, 1, true>());
    CHECK(retention::chunk_mma_shared_bytes(128, 2, 128, false, 2) == cm::chunk_smem<128, 128, 2, false, 2>());
    CHECK(retention::chunk_mma_shared_bytes(128, 2, 128, true, 2) == cm::chunk_smem<128, 128, 2, true, 2>());
    CHECK(retention::chunk_mma16_shared_bytes(128) == cm::chunk16_smem<128>());
    CHECK(retention::chunk_mma16_shared_bytes(64) == cm::chunk16_smem<64>());
}
