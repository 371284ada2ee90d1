#include "train/chunk_overlap.h"

#include <algorithm>
#include <vector>

namespace retro {

int longest_common_run(const std::int32_t* a, int na, const std::int32_t* b, int nb, std::int32_t pad) {
    // run[j] = length of the common run ending at a[i], b[j] (one row of the classic DP, read right to left)
    std::vector<int> run(static_cast<std::size_t>(nb) + 1, 0);
    int best = 0;
    for (int i = 0; i < na; i++)
        for (int j = nb; j >= 1; j--) {
            run[j] = a[i] != pad && a[i] == b[j - 1] ? run[j - 1] + 1 : 0;
            best = std::max(best, run[j]);
        }
    return best;
}

double chunk_overlap(const std::int32_t* chunk, int cs, const std::int32_t* retrieved, int k, int r_len,
                     std::int32_t pad) {
    const int len = static_cast<int>(std::count_if(chunk, chunk + cs, [pad](std::int32_t t) { return t != pad; }));
    if (len == 0) return 0;
    int best = 0;
    for (int j = 0; j < k && best < len; j++)
        best = std::max(best, longest_common_run(chunk, cs, retrieved + static_cast<std::ptrdiff_t>(j) * r_len, r_len, pad));
    return static_cast<double>(best) / len;
}

}  // namespace retro
