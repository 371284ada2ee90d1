// How one document becomes rows of the chunk database (docs/formats.md "retro-chunk"): the ids are
// wrapped in bos … eos, cut into ceil(L / chunk_size) rows, the last row right-padded with 0, and a
// training sequence starts every seq_len / chunk_size rows (RETRO.md A.2 without its empty-chunk quirk).
#pragma once
#include <cstdint>
#include <vector>

namespace retro {

// Number of rows a document of `token_count` ids (without bos/eos) occupies.
std::int64_t chunk_rows_for(std::int64_t token_count, int chunk_size);

// Appends the document's rows (bos, ids, eos, pad 0) to `rows` (row-major, chunk_size per row).
void chunk_append_rows(const std::vector<int>& ids, int chunk_size, std::vector<std::int32_t>& rows);

// Appends the first row of each training sequence of a document whose rows are
// [first_row, first_row + row_count): first_row, first_row + l, … with l = seq_len / chunk_size.
void chunk_append_seq_starts(std::int64_t first_row, std::int64_t row_count, int rows_per_seq,
                             std::vector<std::int64_t>& seq_starts);

}  // namespace retro
