// Microbenchmark of the element-wise float kernels that run in RETRO_SIMD_CLONES clones (nn/fast_math.h): GELU,
// RMSNorm, cross-entropy forward and backward, one thread, median of 15 calls each. With scripts/simd-clone-ab.py it
// times one clone list against another on one machine (docs/performance.md "Session 59"). Not part of the build;
// from the repository root, after `make build`:
//   g++ -O2 -std=c++20 -Ilib scripts/simd-clone-microbench.cpp -Lbuild -lretrokit -Wl,-rpath,$PWD/build -o /tmp/scm
//   LD_LIBRARY_PATH=/tmp/ab/avx2 /tmp/scm; LD_LIBRARY_PATH=/tmp/ab/v3 /tmp/scm   (the folders simd-clone-ab.py made)
// The last line, a sum of outputs, shows the arithmetic differs between clone lists (FMA rounds once).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>
#include "nn/gelu.h"
#include "nn/rmsnorm.h"
#include "nn/cross_entropy.h"
#include "core/threads.h"
using namespace retro::nn;
template <class F> double median_ms(F f) {
    std::vector<double> t;
    f();
    for (int i = 0; i < 15; ++i) {
        auto a = std::chrono::steady_clock::now(); f();
        t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count());
    }
    std::sort(t.begin(), t.end()); return t[t.size() / 2];
}
int main() {
    retro::set_thread_count(1);
    std::mt19937 g(1); std::normal_distribution<float> d;
    const std::int64_t n = 1 << 22;
    std::vector<float> x(n), y(n), dy(n), dx(n);
    for (auto& v : x) v = d(g); for (auto& v : dy) v = d(g);
    std::printf("gelu_forward  n=4M   %.3f ms\n", median_ms([&] { gelu_forward(y.data(), x.data(), n); }));
    std::printf("gelu_backward n=4M   %.3f ms\n", median_ms([&] { gelu_backward(dx.data(), dy.data(), x.data(), n); }));
    const std::int64_t N = 8192, C = 512;
    std::vector<float> gamma(C, 1.f), norm(N), dg(C);
    std::printf("rmsnorm_fwd  8192x512 %.3f ms\n", median_ms([&] { rmsnorm_forward(y.data(), norm.data(), x.data(), gamma.data(), N, C); }));
    std::printf("rmsnorm_bwd  8192x512 %.3f ms\n", median_ms([&] { rmsnorm_backward(dx.data(), dg.data(), dy.data(), x.data(), gamma.data(), norm.data(), N, C); }));
    const std::int64_t R = 512, V = 8000;
    std::vector<std::int32_t> tg(R); for (auto& t : tg) t = g() % V;
    std::vector<float> lse(R); std::int64_t valid = 0;
    std::printf("xent_fwd     512x8000 %.3f ms\n", median_ms([&] { cross_entropy_forward(lse.data(), &valid, x.data(), tg.data(), R, V, -100); }));
    std::printf("xent_bwd     512x8000 %.3f ms\n", median_ms([&] { cross_entropy_backward(dx.data(), 1.f, x.data(), lse.data(), tg.data(), R, V, -100, valid); }));
    double s = 0; for (std::int64_t i = 0; i < 1000; ++i) s += y[i] + dx[i];
    std::printf("check %.6f\n", s);
}
