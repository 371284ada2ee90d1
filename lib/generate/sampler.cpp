#include "generate/sampler.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <numeric>

#include "core/error.h"

namespace retro {

namespace {
// x with as many digits as tell it apart from every other double (1.0000001 is not "1")
std::string shortest_exact(double x) {
    char buf[32];
    for (int digits = 6; digits <= 17; digits++) {
        std::snprintf(buf, sizeof buf, "%.*g", digits, x);
        if (std::strtod(buf, nullptr) == x) break;
    }
    return buf;
}
}  // namespace

void sampler_validate(const SamplerOptions& o) {
    if (o.greedy) return;
    if (!(o.temperature > 0) || !std::isfinite(o.temperature))
        user_error_in("--temperature", cat("must be > 0, got ", o.temperature), "use --greedy for argmax decoding");
    // (below it the draw is the argmax up to rounding, and z / T overflows to inf - inf for tiny T: no distribution)
    if (o.temperature < kMinTemperature)
        user_error_in("--temperature", cat("must be at least ", kMinTemperature, ", got ", o.temperature),
                      "use --greedy for argmax decoding");
    if (o.top_k < 0) user_error_in("--top-k", cat("must be >= 0 (0 = off), got ", o.top_k));
    if (!(o.top_p > 0 && o.top_p <= 1))
        user_error_in("--top-p", cat("must be in (0, 1] (1 = off), got ", shortest_exact(o.top_p)),
                      "p is the nucleus mass kept; RETRO-pytorch's top_p(thres) means p = 1 - thres");
}

SamplerChoice sampler_distribution(const float* logits, std::int64_t V, const SamplerOptions& o) {
    nn::SamplingWeights w = nn::sampling_weights(logits, V, o);
    if (w.ids.empty()) {
        w.ids.resize(w.p.size());
        std::iota(w.ids.begin(), w.ids.end(), 0);
    }
    for (auto& v : w.p) v /= w.sum;
    return {std::move(w.ids), std::move(w.p)};
}

std::int32_t sample_token(const float* logits, std::int64_t V, const SamplerOptions& o, SplitMix64& rng) {
    return nn::sample_row(logits, V, o, o.greedy ? 0.0 : rng.uniform());   // greedy takes no draw from the stream
}

}  // namespace retro
