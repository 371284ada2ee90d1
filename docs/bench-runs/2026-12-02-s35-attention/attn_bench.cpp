// Session 35's micro-benchmark of the decode step's attention (docs/performance.md "Session 35"): one query row
// of 8 heads x 64 against Nk cached keys and values, six layers' caches in turn (the bench model's), best of 20
// rounds of 50 tokens. Build and run from the repository root after `make build BUILD=build-cuda`:
//   g++ -O2 -std=c++20 -Ilib docs/bench-runs/2026-12-02-s35-attention/attn_bench.cpp -Lbuild-cuda -lretrokit \
//       -Wl,-rpath,$PWD/build-cuda -o /tmp/attn_bench
//   for nk in 128 640 2048 4096; do OMP_NUM_THREADS=1 /tmp/attn_bench $nk; OMP_NUM_THREADS=1 RETRO_GEMV=linear /tmp/attn_bench $nk; done
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>
#include "nn/attention.h"
using namespace retro::nn;
int main(int argc, char** argv) {
    const long Nk = argc > 1 ? atol(argv[1]) : 640, H = 8, D = 64, HD = H * D;
    std::vector<float> q(HD), k(Nk * HD), v(Nk * HD), o(HD);
    std::mt19937 g(1); std::normal_distribution<float> n(0, 0.3f);
    for (auto* t : {&q, &k, &v}) for (auto& x : *t) x = n(g);
    std::vector<AttentionSegment<float>> seg(1);
    seg[0].first = 0; seg[0].rows = 1; seg[0].keys = Nk; seg[0].k = k.data(); seg[0].v = v.data();
    // 6 layers' worth of caches to defeat the cache: rotate over copies
    std::vector<std::vector<float>> ks(6, k), vs(6, v);
    double best = 1e9;
    for (int rep = 0; rep < 20; rep++) {
        auto t0 = std::chrono::steady_clock::now();
        for (int it = 0; it < 50; it++) for (int l = 0; l < 6; l++) {
            seg[0].k = ks[l].data(); seg[0].v = vs[l].data();
            attention_segments_forward(o.data(), q.data(), seg, H, D, true, (const float*)nullptr, (const float*)nullptr);
        }
        double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / 50;
        if (ms < best) best = ms;
    }
    double bytes = 6.0 * 2 * Nk * HD * 4;
    printf("Nk %ld: %.4f ms per 6 layers, %.1f GB/s\n", Nk, best, bytes / best / 1e6);
}
