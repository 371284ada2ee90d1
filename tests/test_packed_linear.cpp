// PackedLinear (lib/nn/packed_linear.h): the AVX-512 packed kernel and the cblas fallback against a
// double-precision x·W^T + b (and GELU) for shapes on both sides of every tile and block edge (8-row
// tiles, 192-row x blocks, 48-column panels, 8-panel W blocks, 384-deep K blocks), with buffers of
// exactly the right size and sentinels after y; and the packed result does not depend on how the
// rows are split between calls or threads (each thread packs x into its own scratch).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "nn/packed_linear.h"
#include "test_util.h"

using namespace retro;
using nn::LinearEpilogue;
using nn::PackedLinear;

namespace {

struct Shape {
    int rows, out, in;
};

std::vector<Shape> shapes() {
    const int rows[] = {1, 7, 8, 9, 95, 96, 97, 200};
    const int outs[] = {1, 16, 47, 48, 49, 100, 385, 433};
    const int ins[] = {1, 7, 8, 9, 383, 384, 385, 800};
    std::vector<Shape> v;
    for (int i = 0; i < 8; ++i)
        for (int j = 0; j < 8; ++j) v.push_back({rows[(i + 3 * j) % 8], outs[i], ins[j]});
    v.push_back({200, 1152, 384});   // MiniLM's QKV, O, FFN1 and FFN2 shapes
    v.push_back({97, 384, 384});
    v.push_back({103, 1536, 384});
    v.push_back({90, 384, 1536});
    return v;
}

struct Problem {
    std::vector<float> w, b, x;
};

// W [out, in] ~ N(0, 0.05²), b and x [rows, in] ~ N(0, 1).
Problem random_problem(int rows, int out, int in, std::uint32_t seed) {
    std::mt19937 g(seed);
    std::normal_distribution<float> n(0.0f, 1.0f);
    Problem p{std::vector<float>(static_cast<std::size_t>(out) * in), std::vector<float>(out),
              std::vector<float>(static_cast<std::size_t>(rows) * in)};
    for (auto& v : p.w) v = n(g) * 0.05f;
    for (auto& v : p.b) v = n(g);
    for (auto& v : p.x) v = n(g);
    return p;
}

double gelu(double v) { return 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))); }

// Worst |got - want| / tolerance over the outputs (pass: < 1). tolerance = 1e-5 · (Σ_k |x·w| + |b|),
// plus the fast erf's error for GELU. Returns 1e9 if a sentinel after y was overwritten.
double check_case(const Shape& s, bool avx512, bool with_bias, LinearEpilogue ep, std::uint32_t seed) {
    std::mt19937 g(seed);
    std::normal_distribution<float> n(0.0f, 1.0f);
    std::vector<float> w(static_cast<std::size_t>(s.out) * s.in), b(s.out), x(static_cast<std::size_t>(s.rows) * s.in);
    for (auto& v : w) v = n(g) / std::sqrt(static_cast<float>(s.in));
    for (auto& v : b) v = n(g);
    for (auto& v : x) v = n(g);
    const int guard = 64;
    std::vector<float> y(static_cast<std::size_t>(s.rows) * s.out + guard, 12345.0f);
    PackedLinear layer(w.data(), with_bias ? b.data() : nullptr, s.out, s.in, avx512);
    layer.apply(x.data(), s.rows, y.data(), ep);
    for (int i = 0; i < guard; ++i)
        if (y[static_cast<std::size_t>(s.rows) * s.out + i] != 12345.0f) return 1e9;
    double worst = 0;
    for (int r = 0; r < s.rows; ++r)
        for (int o = 0; o < s.out; ++o) {
            double pre = with_bias ? b[o] : 0.0, norm = std::abs(pre);
            for (int k = 0; k < s.in; ++k) {
                const double t = double(x[static_cast<std::size_t>(r) * s.in + k]) * w[static_cast<std::size_t>(o) * s.in + k];
                pre += t;
                norm += std::abs(t);
            }
            const double want = ep == LinearEpilogue::GELU_ERF ? gelu(pre) : pre;
            const double tol = 1e-5 * norm + (ep == LinearEpilogue::GELU_ERF ? 1e-6 * (1.0 + std::abs(pre)) : 0.0) + 1e-30;
            worst = std::max(worst, std::abs(y[static_cast<std::size_t>(r) * s.out + o] - want) / tol);
        }
    return worst;
}

}  // namespace

TEST_CASE("packed linear: both paths equal a double x·W^T + b (and GELU) at every tile and block edge") {
    const bool have = PackedLinear::avx512_supported();
    for (bool avx512 : {true, false}) {
        double worst = 0;
        std::uint32_t seed = 1;
        for (const Shape& s : shapes())
            for (LinearEpilogue ep : {LinearEpilogue::NONE, LinearEpilogue::GELU_ERF}) {
                const bool with_bias = seed % 5 != 0;
                const double err = check_case(s, avx512, with_bias, ep, seed++);
                CAPTURE(avx512);
                CAPTURE(s.rows);
                CAPTURE(s.out);
                CAPTURE(s.in);
                CAPTURE(with_bias);
                CAPTURE(ep == LinearEpilogue::GELU_ERF);
                CHECK(err < 1.0);
                worst = std::max(worst, err);
            }
        const std::string note = avx512 && !have ? " (no AVX-512F: the cblas path ran)" : "";
        MESSAGE(std::string(avx512 ? "packed" : "cblas") << " linear: worst error / tolerance " << worst << note);
    }
}

TEST_CASE("packed linear: the packed result is bitwise independent of how rows are split between calls") {
    if (!PackedLinear::avx512_supported()) RETRO_SKIP("no AVX-512F: the packed path is not used on this CPU");
    const int rows = 203, out = 433, in = 800;
    const Problem pr = random_problem(rows, out, in, 7);
    const std::vector<float>& x = pr.x;
    PackedLinear layer(pr.w.data(), pr.b.data(), out, in);
    std::vector<float> whole(static_cast<std::size_t>(rows) * out), split(whole.size());
    layer.apply(x.data(), rows, whole.data(), LinearEpilogue::GELU_ERF);
    const int cuts[] = {0, 1, 38, 133, rows};
    for (int c = 0; c + 1 < 5; ++c)
        layer.apply(x.data() + static_cast<std::size_t>(cuts[c]) * in, cuts[c + 1] - cuts[c],
                    split.data() + static_cast<std::size_t>(cuts[c]) * out, LinearEpilogue::GELU_ERF);
    CHECK(std::memcmp(whole.data(), split.data(), sizeof(float) * whole.size()) == 0);
}

TEST_CASE("packed linear: threads applying one layer to their own rows give the single-call result bitwise") {
    if (!PackedLinear::avx512_supported()) RETRO_SKIP("no AVX-512F: the packed path is not used on this CPU");
    const int rows = 4 * 197, out = 385, in = 800, threads = 4;
    const Problem pr = random_problem(rows, out, in, 11);
    const std::vector<float>& x = pr.x;
    PackedLinear layer(pr.w.data(), pr.b.data(), out, in);
    std::vector<float> whole(static_cast<std::size_t>(rows) * out), split(whole.size());
    layer.apply(x.data(), rows, whole.data());
    for (int round = 0; round < 5; ++round) {   // several rounds: a shared scratch would race
        std::fill(split.begin(), split.end(), 0.0f);
        std::vector<std::thread> pool;
        for (int t = 0; t < threads; ++t)
            pool.emplace_back([&, t] {
                const int r0 = t * rows / threads, r1 = (t + 1) * rows / threads;
                for (int r = r0; r < r1; r += 37)   // many calls per thread, interleaved with the others
                    layer.apply(x.data() + static_cast<std::size_t>(r) * in, std::min(37, r1 - r),
                                split.data() + static_cast<std::size_t>(r) * out);
            });
        for (auto& th : pool) th.join();
        CHECK(std::memcmp(whole.data(), split.data(), sizeof(float) * whole.size()) == 0);
    }
}
