// Implementation of relative_position.h.
#include "embed/relative_position.h"

#include <algorithm>
#include <cmath>

namespace retro {

int relative_position_bucket(int relative_position, int num_buckets, int max_distance) {
    int bucket = 0;
    const int half = num_buckets / 2;
    if (relative_position > 0) bucket += half;
    const int rp = relative_position < 0 ? -relative_position : relative_position;
    const int max_exact = half / 2;
    if (rp < max_exact) return bucket + rp;
    // float32 throughout, as torch computes log(rp.float() / max_exact) / log(max_distance / max_exact) · (half - max_exact)
    const float scaled = std::log(static_cast<float>(rp) / static_cast<float>(max_exact)) /
                         static_cast<float>(std::log(static_cast<double>(max_distance) / max_exact)) *
                         static_cast<float>(half - max_exact);
    const int large = std::min(max_exact + static_cast<int>(scaled), half - 1);
    return bucket + large;
}

std::vector<float> relative_bias_by_offset(const std::vector<float>& table, int heads, int num_buckets, int max_distance,
                                           int max_len) {
    const std::int64_t span = 2 * static_cast<std::int64_t>(max_len) - 1;
    std::vector<float> bias(static_cast<std::size_t>(std::max<std::int64_t>(heads * span, 0)));
    for (std::int64_t o = 0; o < span; ++o) {
        const int b = relative_position_bucket(static_cast<int>(o - (max_len - 1)), num_buckets, max_distance);
        for (int h = 0; h < heads; ++h) bias[h * span + o] = table[static_cast<std::size_t>(b) * heads + h];
    }
    return bias;
}

}  // namespace retro
