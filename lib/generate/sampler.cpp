#include "generate/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"

namespace retro {

void sampler_validate(const SamplerOptions& o) {
    if (o.greedy) return;
    if (!(o.temperature > 0) || !std::isfinite(o.temperature))
        user_error_in("--temperature", cat("must be > 0, got ", o.temperature), "use --greedy for argmax decoding");
    if (o.top_k < 0) user_error_in("--top-k", cat("must be >= 0 (0 = off), got ", o.top_k));
    if (!(o.top_p > 0 && o.top_p <= 1))
        user_error_in("--top-p", cat("must be in (0, 1] (1 = off), got ", o.top_p),
                      "p is the nucleus mass kept; RETRO-pytorch's top_p(thres) means p = 1 - thres");
}

SamplerChoice sampler_distribution(const float* logits, std::int64_t V, const SamplerOptions& o) {
    RETRO_CHECK(V > 0, "sampler: empty vocabulary");
    const double T = o.greedy ? 1.0 : o.temperature;
    // rank order: z descending, ties by lower id (a total order, so the result is deterministic)
    std::vector<std::int32_t> order(static_cast<std::size_t>(V));
    std::iota(order.begin(), order.end(), 0);
    auto before = [&](std::int32_t a, std::int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
    std::int64_t keep = V;
    if (o.top_k > 0 && o.top_k < V) {
        keep = o.top_k;
        std::partial_sort(order.begin(), order.begin() + keep, order.end(), before);
    } else if (o.top_p < 1) {
        std::sort(order.begin(), order.end(), before);
    }   // else every id stays, in id order
    order.resize(static_cast<std::size_t>(keep));
    float top = logits[order[0]];
    for (auto id : order) top = std::max(top, logits[id]);
    const double mx = static_cast<double>(top) / T;
    std::vector<double> p(order.size());
    double sum = 0;
    for (std::size_t i = 0; i < order.size(); i++) sum += (p[i] = std::exp(static_cast<double>(logits[order[i]]) / T - mx));
    if (o.top_p < 1) {   // shortest prefix whose mass reaches p: id i stays iff the mass before it is < p
        double before_mass = 0;
        std::size_t n = 0;
        while (n < p.size() && before_mass < o.top_p * sum) before_mass += p[n++];
        order.resize(n);
        p.resize(n);
        sum = before_mass;
    }
    for (auto& v : p) v /= sum;
    return {std::move(order), std::move(p)};
}

std::int32_t sample_token(const float* logits, std::int64_t V, const SamplerOptions& o, SplitMix64& rng) {
    if (o.greedy) {
        std::int64_t best = 0;
        for (std::int64_t i = 1; i < V; i++)
            if (logits[i] > logits[best]) best = i;
        return static_cast<std::int32_t>(best);
    }
    const SamplerChoice c = sampler_distribution(logits, V, o);
    const double u = rng.uniform();
    double acc = 0;
    for (std::size_t i = 0; i < c.ids.size(); i++) {
        acc += c.probs[i];
        if (u < acc) return c.ids[i];
    }
    return c.ids.back();   // u within rounding of 1
}

}  // namespace retro
