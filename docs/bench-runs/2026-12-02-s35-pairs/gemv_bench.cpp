// Session 35's micro-benchmark of gemv_rows_avx512 (docs/performance.md "Session 35", weight-row pairs): O x I fp32
// weights, 8 copies in turn (out of cache), N = 1, 2, 4, 8 x rows, best of 10. From the repository root:
//   g++ -O2 -std=c++20 -Ilib docs/bench-runs/2026-12-02-s35-pairs/gemv_bench.cpp -Lbuild-cuda -lretrokit \
//       -Wl,-rpath,$PWD/build-cuda -o /tmp/gemv_bench && OMP_NUM_THREADS=1 /tmp/gemv_bench 512 2048
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>
#include "nn/gemv_avx512.h"
using namespace retro::nn;
int main(int argc, char** argv) {
    const long O = atol(argv[1]), I = atol(argv[2]);
    const int copies = 8;
    std::vector<std::vector<float>> W(copies, std::vector<float>(O * I, 0.01f));
    std::vector<float> x(8 * I, 0.5f), y(8 * O);
    for (int N : {1, 2, 4, 8}) {
        double best = 1e9;
        for (int rep = 0; rep < 10; rep++) {
            auto t0 = std::chrono::steady_clock::now();
            for (int c = 0; c < copies; c++) gemv_rows_avx512(W[c].data(), O, I, I, x.data(), I, N, y.data(), O, false);
            double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / copies;
            if (ms < best) best = ms;
        }
        double gb = O * I * 4.0 / best / 1e6, gflop = 2.0 * N * O * I / best / 1e6;
        printf("O %ld I %ld N %d: %.3f ms  %.1f GB/s  %.1f GFLOP/s\n", O, I, N, best, gb, gflop);
    }
}
