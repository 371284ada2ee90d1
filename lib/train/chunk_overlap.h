// RETRO §2.6's measure of how much of an evaluated chunk was handed to the model by retrieval: the
// longest run of consecutive tokens the chunk shares with any of its neighbours (each neighbour read
// with its continuation, as the model reads it), divided by the chunk's length. r = 0: nothing in
// common; r = 1: the whole chunk appears verbatim in a neighbour. `retro-train eval` filters its
// losses by r <= alpha (docs/retrieval.md).
#pragma once
#include <cstdint>

namespace retro {

// Length of the longest common run of equal tokens of a[0..na) and b[0..nb); a `pad` token never
// matches (pads mark missing text, not text).
int longest_common_run(const std::int32_t* a, int na, const std::int32_t* b, int nb, std::int32_t pad);

// r for one chunk of `cs` ids against k retrieved units of r_len ids each ([k, r_len], pads where a
// neighbour is missing): max over neighbours of longest_common_run / (non-pad ids of the chunk);
// 0 for a chunk of pads only.
double chunk_overlap(const std::int32_t* chunk, int cs, const std::int32_t* retrieved, int k, int r_len,
                     std::int32_t pad);

}  // namespace retro
