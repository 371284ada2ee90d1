// The decode step's AVX-512 GEMV (lib/nn/gemv_avx512.h) against a double Σ_k W[o,k]·x[k], for row counts on both
// sides of its 8-row groups (and of the prefetched next group) and column counts on both sides of its 16-lane steps,
// with a leading dimension wider than the rows, accumulate on and off, and a sentinel after y; and linear_forward's
// few-row path (which calls it) against the same reference with its bias.
#include <cmath>
#include <random>
#include <vector>

#include "nn/gemv_avx512.h"
#include "nn/linear.h"
#include "test_util.h"

using namespace retro;

namespace {

// Worst |got - want| / (1e-5 · (Σ_k |W x| + |y0|) + 1e-30) over the outputs: pass below 1 (fp32 rounding of an
// I-term sum stays far inside it).
double worst_error(const std::vector<float>& W, std::int64_t O, std::int64_t I, std::int64_t ldw, const std::vector<float>& x,
                   const std::vector<float>& y0, const std::vector<float>& got, bool accumulate) {
    double worst = 0;
    for (std::int64_t o = 0; o < O; ++o) {
        double want = accumulate ? y0[static_cast<std::size_t>(o)] : 0.0, scale = accumulate ? std::fabs(want) : 0.0;
        for (std::int64_t k = 0; k < I; ++k) {
            const double t = double(W[static_cast<std::size_t>(o * ldw + k)]) * x[static_cast<std::size_t>(k)];
            want += t;
            scale += std::fabs(t);
        }
        worst = std::max(worst, std::fabs(got[static_cast<std::size_t>(o)] - want) / (1e-5 * scale + 1e-30));
    }
    return worst;
}

}  // namespace

TEST_CASE("gemv avx512: every row and column edge equals a double W·x, accumulate on and off") {
    if (!nn::gemv_avx512_available()) {
        MESSAGE("skipped: no AVX-512F on this CPU (linear_forward uses cblas_sgemv)");
        return;
    }
    std::mt19937 g(7);
    std::normal_distribution<float> n(0.0f, 1.0f);
    for (const std::int64_t O : {1, 7, 8, 9, 15, 16, 17, 24, 25, 100}) {
        for (const std::int64_t I : {1, 15, 16, 17, 33, 512, 515}) {
            for (const bool accumulate : {false, true}) {
                CAPTURE(O);
                CAPTURE(I);
                CAPTURE(accumulate);
                const std::int64_t ldw = I + 3;
                std::vector<float> W(static_cast<std::size_t>(O * ldw)), x(static_cast<std::size_t>(I)),
                    y0(static_cast<std::size_t>(O) + 1);
                for (auto& v : W) v = n(g) * 0.05f;
                for (auto& v : x) v = n(g);
                for (auto& v : y0) v = n(g);
                std::vector<float> y = y0;
                const float sentinel = y[static_cast<std::size_t>(O)];
                nn::gemv_rows_avx512(W.data(), O, I, ldw, x.data(), y.data(), accumulate);
                CHECK(worst_error(W, O, I, ldw, x, y0, y, accumulate) < 1.0);
                CHECK(y[static_cast<std::size_t>(O)] == sentinel);
            }
        }
    }
}

TEST_CASE("gemv avx512: linear_forward's few-row path equals a double x·W^T + b") {
    std::mt19937 g(11);
    std::normal_distribution<float> n(0.0f, 1.0f);
    for (const std::int64_t N : {1, 3, 4}) {
        const std::int64_t I = 512, O = 203;
        std::vector<float> W(static_cast<std::size_t>(O * I)), b(static_cast<std::size_t>(O)), x(static_cast<std::size_t>(N * I)),
            y(static_cast<std::size_t>(N * O));
        for (auto& v : W) v = n(g) * 0.05f;
        for (auto& v : b) v = n(g);
        for (auto& v : x) v = n(g);
        nn::linear_forward(y.data(), x.data(), W.data(), b.data(), N, I, O);
        for (std::int64_t r = 0; r < N; ++r) {
            const std::vector<float> xr(x.begin() + r * I, x.begin() + (r + 1) * I), yr(y.begin() + r * O, y.begin() + (r + 1) * O);
            CAPTURE(r);
            CHECK(worst_error(W, O, I, I, xr, b, yr, true) < 1.0);
        }
    }
}
