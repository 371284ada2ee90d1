// The CUDA NnBackend's rotary kernel (kernels/nn_rotary.cuh's rotary_rows) on the host through the block emulator
// (tests/simt_host.h): forward and backward, partial (R < D) and full rotation, the scaled forms (the first heads
// scaled on the way in, every result scaled on the way out), rows past the table's N (row % N), fewer blocks than
// rows (the block-stride loop) and rows wider than a block (the thread loops), out of place and in place, against
// nn/rotary.h in double within the op harness's fp32 bound (1e-5 relative rms). On a GPU the same kernel runs under
// the op harness (nn.rotary, nn.scaled_rotary, nn.scaled_rotary_backward).
#define RETRO_SIMT_HOST 1
#include "simt_host.h"
//
#include "../kernels/nn_rotary.cuh"
#include "nn/rotary.h"

#include <doctest/doctest.h>

#include "test_util.h"

#include <cmath>
#include <random>
#include <vector>

using namespace retro;
namespace rt = retro::nn::rotary;

namespace {

struct Shape {
    long long B, N;
    int H, D, R;
    float scale;
    int scaled_heads;
    float out_scale;
};

template <bool BACKWARD>
void check(const Shape& sh) {
    CAPTURE(BACKWARD);
    CAPTURE(sh.B);
    CAPTURE(sh.N);
    CAPTURE(sh.H);
    CAPTURE(sh.D);
    CAPTURE(sh.R);
    CAPTURE(sh.scaled_heads);
    std::mt19937 rng(static_cast<unsigned>(sh.B * 100 + sh.N + sh.H + sh.D + sh.R));
    std::normal_distribution<float> nd(0.0f, 1.0f);
    const long long rows = sh.B * sh.N, n = rows * sh.H * sh.D;
    std::vector<float> x(static_cast<std::size_t>(n));
    for (auto& e : x) e = nd(rng);
    const auto table = nn::rotary_table_range<float>(sh.N, sh.R);
    // fewer blocks than groups of rows (rt::rows_per_block), so that the block-stride loop runs
    const long long groups = (rows + rt::rows_per_block(sh.H, sh.R) - 1) / rt::rows_per_block(sh.H, sh.R);
    const long long blocks = std::max<long long>(1, std::min(rows / 3, groups / 2));

    std::vector<float> y(x.size(), NAN), inplace(x);
    auto run = [&](float* out, const float* in) {
        simt::host::launch(blocks, 1, rt::kThreads, 0, [&] {
            rt::rotary_rows<BACKWARD>(out, in, table.cos.data(), table.sin.data(), rows, sh.N, sh.H, sh.D, sh.R,
                                      sh.scale, sh.scaled_heads, sh.out_scale);
        });
    };
    run(y.data(), x.data());
    run(inplace.data(), inplace.data());
    CHECK(inplace == y);

    // the reference: the scaled heads' x * scale, nn/rotary.h in double, then * out_scale
    std::vector<double> xd(x.begin(), x.end()), ref(x.size());
    for (long long r = 0; r < rows; ++r)
        for (int h = 0; h < sh.scaled_heads; ++h)
            for (int d = 0; d < sh.D; ++d) xd[static_cast<std::size_t>((r * sh.H + h) * sh.D + d)] *= sh.scale;
    const auto td = nn::rotary_table_range<double>(sh.N, sh.R);
    if (BACKWARD) nn::rotary_backward(ref.data(), xd.data(), td, sh.B, sh.N, sh.H, sh.D);
    else nn::rotary_forward(ref.data(), xd.data(), td, sh.B, sh.N, sh.H, sh.D);
    for (auto& e : ref) e *= sh.out_scale;
    CHECK(test::rms_ratio(y, ref) <= 1e-5);
}

}  // namespace

TEST_CASE("nn rotary kernel on the host emulator: forward, backward and the scaled forms equal nn/rotary.h") {
    const Shape shapes[] = {
        {2, 7, 3, 64, 32, 1.0f, 0, 1.0f},        // the model's partial rotation (R = 32 of 64)
        {1, 5, 4, 8, 8, 0.35f, 2, 1.0f},         // full rotation, the first two heads scaled (q | k rows)
        {3, 4, 2, 12, 6, 1.0f, 0, 0.125f},       // an out scale (rotary_backward_scale)
        {1, 3, 40, 32, 32, 0.5f, 40, 1.0f},      // a row of 640 pairs: wider than a block
        {2, 3, 24, 48, 16, 1.0f, 12, 1.0f},      // 768 passed channels a row: wider than a block
        {4, 9, 2, 64, 32, 1.0f, 0, 1.0f},        // 8 rows a block (32 pairs a row), 36 rows: 5 groups on 2 blocks
        {3, 6, 4, 64, 32, 1.0f, 2, 1.0f},        // scaled heads at a scale of 1: in place, nothing to pass
    };
    for (const auto& sh : shapes) {
        check<false>(sh);
        check<true>(sh);
    }
}
