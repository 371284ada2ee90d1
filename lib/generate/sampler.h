// Next-token sampling from logits for the generator and the CLI: the options (nn/sampling.h says what each does, in
// which order, and holds the reference arithmetic every backend's NnBackend::sample_rows follows), their validation,
// the distribution they leave, and one draw from a random stream. docs/generate.md says how RetroKit's flags map to
// RETRO-pytorch's and Megatron's. The generator is a splitmix64 stream (core/splitmix.h): one seed gives one sequence
// of draws on any machine (on the GPU, within the kernel's fixed-point weights: kernels/nn_sample.cuh).
#pragma once
#include <cstdint>
#include <vector>

#include "core/splitmix.h"
#include "nn/sampling.h"

namespace retro {

using SamplerOptions = nn::SamplingParams;   // temperature, top_k (0 = off), top_p (1 = off), greedy

// The smallest temperature a draw takes (below it, the argmax up to rounding: --greedy).
inline constexpr double kMinTemperature = 1e-6;
// UserError (naming the flag) for T < kMinTemperature, top_k < 0, p outside (0, 1].
void sampler_validate(const SamplerOptions& o);


// The ids kept by temperature + top-k + top-p, and their probabilities (softmax over the kept ids, double).
struct SamplerChoice {
    std::vector<std::int32_t> ids;
    std::vector<double> probs;
};
SamplerChoice sampler_distribution(const float* logits, std::int64_t V, const SamplerOptions& o);

// One token: argmax (lowest id on ties) when greedy, else a draw from sampler_distribution.
std::int32_t sample_token(const float* logits, std::int64_t V, const SamplerOptions& o, SplitMix64& rng);

}  // namespace retro
