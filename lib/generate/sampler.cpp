#include "generate/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstring>
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

namespace {

// Every id in rank order — z descending, ties by lower id, +0 and -0 equal — as std::sort with that comparator
// would give, by a stable LSD radix sort (4 passes of 8 bits) of the logits' order-preserving 32-bit keys over the
// ids in ascending order (stability keeps ties by lower id). A comparison sort of the 8,000 ids of a small vocabulary
// took ~0.6 ms a token on the 2-vCPU dev box (session 20), longer than the GPU's decode step it follows.
std::vector<std::int32_t> rank_order(const float* logits, std::int64_t V) {
    const auto n = static_cast<std::size_t>(V);
    std::vector<std::uint32_t> key(n), key2(n);
    std::vector<std::int32_t> order(n), order2(n);
    for (std::size_t i = 0; i < n; i++) {
        const float z = logits[i] == 0.0f ? 0.0f : logits[i];   // -0 sorts with +0
        std::uint32_t u;
        std::memcpy(&u, &z, sizeof u);
        u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);   // ascending floats -> ascending unsigned keys
        key[i] = ~u;                                         // descending z
        order[i] = static_cast<std::int32_t>(i);
    }
    for (int shift = 0; shift < 32; shift += 8) {
        std::size_t count[257] = {};
        for (std::size_t i = 0; i < n; i++) count[((key[i] >> shift) & 0xFFu) + 1]++;
        if (count[((key[0] >> shift) & 0xFFu) + 1] == n) continue;   // one bucket: the pass would change nothing
        for (int b = 0; b < 256; b++) count[b + 1] += count[b];
        for (std::size_t i = 0; i < n; i++) {
            const std::size_t at = count[(key[i] >> shift) & 0xFFu]++;
            key2[at] = key[i];
            order2[at] = order[i];
        }
        key.swap(key2);
        order.swap(order2);
    }
    return order;
}

}  // namespace

SamplerChoice sampler_distribution(const float* logits, std::int64_t V, const SamplerOptions& o) {
    RETRO_CHECK(V > 0, "sampler: empty vocabulary");
    const double T = o.greedy ? 1.0 : o.temperature;
    // rank order: z descending, ties by lower id (a total order, so the result is deterministic)
    std::vector<std::int32_t> order;
    std::int64_t keep = V;
    if (o.top_k > 0 && o.top_k < V) {
        order.resize(static_cast<std::size_t>(V));
        std::iota(order.begin(), order.end(), 0);
        auto before = [&](std::int32_t a, std::int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
        keep = o.top_k;
        std::partial_sort(order.begin(), order.begin() + keep, order.end(), before);
    } else if (o.top_p < 1) {
        order = rank_order(logits, V);
    } else {   // every id stays, in id order
        order.resize(static_cast<std::size_t>(V));
        std::iota(order.begin(), order.end(), 0);
    }
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
