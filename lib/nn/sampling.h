// Next-token sampling from one row of logits: the reference every backend's NnBackend::sample_rows is held to
// (generate/sampler.h is its face to the user: the flags, their validation, the random stream; RETRO.md C.2 and D.9,
// docs/generate.md). In this order:
//   1. temperature T:  z = logits / T                                        (T > 0; greedy = argmax)
//   2. top-k (a count, 0 = off): keep the k largest z; ties at the k-th broken by lower id (exactly k kept)
//   3. top-p (nucleus mass p in (0, 1], 1 = off): sort the kept ids by z descending (ties: lower id first),
//      keep the shortest prefix whose softmax mass reaches p, i.e. id i stays iff the mass ranked before
//      it is < p (the top id always stays). RP's top_p(thres) is this with p = 1 - thres.
//   4. draw from softmax(z) over the kept ids by inverse CDF in double with one uniform u in [0, 1): the ids walked
//      in rank order where top-k or top-p is on, in id order otherwise.
// provides: SamplingParams, SamplingWeights, sampling_weights, sample_row
#pragma once
#include <cstdint>
#include <vector>

namespace retro::nn {

struct SamplingParams {
    double temperature = 1.0;
    std::int64_t top_k = 0;   // 0 = off
    double top_p = 1.0;       // 1 = off
    bool greedy = false;
};

// The kept ids' unnormalized weights p (exp(z / T - max z / T), double) and their sum, in the order the draw walks
// them; ids empty = every id in id order (no top-k or top-p: no id list to build).
struct SamplingWeights {
    std::vector<std::int32_t> ids;
    std::vector<double> p;
    double sum = 0;
};
SamplingWeights sampling_weights(const float* logits, std::int64_t V, const SamplingParams& o);

// One token: argmax (lowest id on ties; u unused) when greedy, else the draw of step 4 with uniform u.
std::int32_t sample_row(const float* logits, std::int64_t V, const SamplingParams& o, double u);

}  // namespace retro::nn
