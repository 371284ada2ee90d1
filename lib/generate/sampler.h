// Next-token sampling from logits (RETRO.md C.2 and D.9; docs/generate.md says how RetroKit's flags map
// to RETRO-pytorch's and Megatron's). In this order:
//   1. temperature T:  z = logits / T                                        (T > 0; --greedy = argmax)
//   2. top-k (a count, 0 = off): keep the k largest z; ties at the k-th broken by lower id (exactly k kept)
//   3. top-p (nucleus mass p in (0, 1], 1 = off): sort the kept ids by z descending (ties: lower id first),
//      keep the shortest prefix whose softmax mass reaches p, i.e. id i stays iff the mass ranked before
//      it is < p (the top id always stays). RP's top_p(thres) is this with p = 1 - thres.
//   4. draw from softmax(z) over the kept ids (inverse CDF in double, one uniform per draw).
// The generator is a splitmix64 stream (core/splitmix.h): one seed gives one sequence of draws on any machine.
#pragma once
#include <cstdint>
#include <vector>

#include "core/splitmix.h"

namespace retro {

struct SamplerOptions {
    double temperature = 1.0;
    std::int64_t top_k = 0;   // 0 = off
    double top_p = 1.0;       // 1 = off
    bool greedy = false;
};

// UserError (naming the flag) for T <= 0, top_k < 0, p outside (0, 1].
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
