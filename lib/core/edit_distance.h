// The Levenshtein distance between two words (insertions, deletions and substitutions of one byte, each 1), for
// "did you mean" suggestions: a misspelt option (cli/tool_main.cpp) or config field (model/config.cpp).
// provides: edit_distance, near_misspelling
#pragma once
#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

namespace retro {

inline std::size_t edit_distance(const std::string& a, const std::string& b) {
    std::vector<std::size_t> row(b.size() + 1);   // one row of the table
    for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
        std::size_t diagonal = row[0];
        row[0] = i;
        for (std::size_t j = 1; j <= b.size(); ++j) {
            const std::size_t up = row[j];
            row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
            diagonal = up;
        }
    }
    return row[b.size()];
}

// Whether `given` (at distance d from `name`) is near enough to be a misspelling of it: exact for names under 3
// letters, else within 2 edits or a quarter of the name (two swapped letters are two edits).
inline bool near_misspelling(std::size_t d, const std::string& name) {
    return name.size() < 3 ? d == 0 : d <= std::max<std::size_t>(2, name.size() / 4);
}

}  // namespace retro
