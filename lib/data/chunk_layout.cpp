// Implementation of chunk_layout.h.
#include "data/chunk_layout.h"

#include <algorithm>

#include "text/tokenizer.h"

namespace retro {

std::int64_t chunk_rows_for(std::int64_t token_count, int chunk_size) {
    return (token_count + 2 + chunk_size - 1) / chunk_size;
}

void chunk_append_rows(const std::vector<int>& ids, int chunk_size, std::vector<std::int32_t>& rows) {
    std::size_t start = rows.size();
    std::size_t n = static_cast<std::size_t>(chunk_rows_for(static_cast<std::int64_t>(ids.size()), chunk_size)) *
                    static_cast<std::size_t>(chunk_size);
    rows.resize(start + n, TOKEN_PAD);
    std::int32_t* out = rows.data() + start;
    out[0] = TOKEN_BOS;
    std::copy(ids.begin(), ids.end(), out + 1);
    out[ids.size() + 1] = TOKEN_EOS;
}

void chunk_append_seq_starts(std::int64_t first_row, std::int64_t row_count, int rows_per_seq,
                             std::vector<std::int64_t>& seq_starts) {
    for (std::int64_t r = 0; r < row_count; r += rows_per_seq) seq_starts.push_back(first_row + r);
}

}  // namespace retro
