// A test helper for the samplers that draw with fixed-point weights (kernels/nn_sample.cuh): whether a uniform u lies
// so near a boundary of nn/sampling.h's reference draw that the two may disagree (tests/test_nn_sample_host.cpp and
// the CUDA case in tests/test_generate.cpp draw u again there).
// provides: test::near_sampling_boundary
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

#include "nn/sampling.h"

namespace retro::test {

// Whether x lies within 1e-9 of a boundary the draw or the top-p cut depends on: the reference's cumulative
// probabilities in its walk order (for u), and the kept mass before each id in rank order (for p).
inline bool near_sampling_boundary(const float* z, long long V, const nn::SamplingParams& o, double u) {
    const nn::SamplingWeights w = nn::sampling_weights(z, V, o);
    double acc = 0;
    for (double p : w.p) {
        acc += p / w.sum;
        if (std::fabs(acc - u) < 1e-9) return true;
    }
    if (o.top_p < 1) {
        std::vector<std::int32_t> order(static_cast<std::size_t>(V));
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) { return z[a] > z[b]; });
        if (o.top_k > 0 && o.top_k < V) order.resize(static_cast<std::size_t>(o.top_k));
        const double mx = static_cast<double>(z[order[0]]) / o.temperature;
        std::vector<double> p;
        double sum = 0;
        for (std::int32_t id : order) sum += p.emplace_back(std::exp(static_cast<double>(z[id]) / o.temperature - mx));
        double before = 0;
        for (double x : p) {
            if (std::fabs(before - o.top_p * sum) < 1e-9 * sum) return true;
            before += x;
        }
    }
    return false;
}


}  // namespace retro::test
