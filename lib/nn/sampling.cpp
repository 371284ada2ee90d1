#include "nn/sampling.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "core/error.h"

namespace retro::nn {

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

SamplingWeights sampling_weights(const float* logits, std::int64_t V, const SamplingParams& o) {
    RETRO_CHECK(V > 0, "sampler: empty vocabulary");
    const double T = o.greedy ? 1.0 : o.temperature;
    SamplingWeights w;
    // rank order: z descending, ties by lower id (a total order, so the result is deterministic)
    if (o.top_k > 0 && o.top_k < V) {
        w.ids.resize(static_cast<std::size_t>(V));
        std::iota(w.ids.begin(), w.ids.end(), 0);
        auto before = [&](std::int32_t a, std::int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
        std::partial_sort(w.ids.begin(), w.ids.begin() + o.top_k, w.ids.end(), before);
        w.ids.resize(static_cast<std::size_t>(o.top_k));
    } else if (o.top_p < 1) {
        w.ids = rank_order(logits, V);
    }
    const std::size_t n = w.ids.empty() ? static_cast<std::size_t>(V) : w.ids.size();
    const auto z = [&](std::size_t i) { return logits[w.ids.empty() ? i : static_cast<std::size_t>(w.ids[i])]; };
    float top = z(0);
    for (std::size_t i = 0; i < n; i++) top = std::max(top, z(i));
    const double mx = static_cast<double>(top) / T;
    w.p.resize(n);
    for (std::size_t i = 0; i < n; i++) w.sum += (w.p[i] = std::exp(static_cast<double>(z(i)) / T - mx));
    if (o.top_p < 1) {   // shortest prefix whose mass reaches p: id i stays iff the mass before it is < p
        double before_mass = 0;
        std::size_t kept = 0;
        while (kept < w.p.size() && before_mass < o.top_p * w.sum) before_mass += w.p[kept++];
        w.ids.resize(kept);
        w.p.resize(kept);
        w.sum = before_mass;
    }
    return w;
}


std::int32_t sample_row(const float* logits, std::int64_t V, const SamplingParams& o, double u) {
    if (o.greedy) {
        std::int64_t best = 0;
        for (std::int64_t i = 1; i < V; i++)
            if (logits[i] > logits[best]) best = i;
        return static_cast<std::int32_t>(best);
    }
    // sampler_distribution's probabilities (generate/sampler.h), each divided only up to the drawn id: the same
    // doubles, the same draw, without the rest of the divisions or an id list for every id (104 -> ~60 us a token for
    // 8,000 ids at top-p 1 on the dev box, session 20)
    const SamplingWeights w = sampling_weights(logits, V, o);
    const auto id = [&](std::size_t i) { return w.ids.empty() ? static_cast<std::int32_t>(i) : w.ids[i]; };
    double acc = 0;
    for (std::size_t i = 0; i < w.p.size(); i++) {
        acc += w.p[i] / w.sum;
        if (u < acc) return id(i);
    }
    return id(w.p.size() - 1);   // u within rounding of 1
}

}  // namespace retro::nn
