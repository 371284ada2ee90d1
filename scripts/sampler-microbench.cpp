// Microbenchmark of the host sampler (lib/generate/sampler.h): microseconds a token for one draw from 8,000 logits
// (retro-bench generate's vocabulary) at top-p 1 (softmax over every id) and top-p 0.9 (rank order + nucleus), the
// host work that follows every decode step, on THREADS threads (argument; default all cores). Not part of the
// build; from the repository root, after `make build`:
//   g++ -O2 -std=c++20 -Ilib scripts/sampler-microbench.cpp -Lbuild -lretrokit -Wl,-rpath,$PWD/build -o /tmp/smb && /tmp/smb 1
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "core/threads.h"
#include "generate/sampler.h"

int main(int argc, char** argv) {
    retro::set_thread_count(argc > 1 ? std::atoi(argv[1]) : 0);
    const int V = 8000, draws = 2000;
    std::vector<float> z(V);
    std::mt19937 g(1);
    std::normal_distribution<float> normal(0, 2);
    for (auto& v : z) v = normal(g);
    retro::SplitMix64 rng(1);
    for (double top_p : {1.0, 0.9}) {
        retro::SamplerOptions o;
        o.top_p = top_p;
        long sum = 0;   // keeps the draws alive
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < draws; i++) sum += retro::sample_token(z.data(), V, o, rng);
        const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / draws;
        std::printf("%d thread(s), top-p %.1f: %.1f us a token (checksum %ld)\n", retro::thread_count(), top_p, us, sum);
    }
}
