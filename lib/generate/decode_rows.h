// The rows of one decoding step, shared by the KV-cached decoders (generate/cached_decoder.h on the CPU,
// generate/backend_decoder.h on a backend): each sequence's new tokens in sequence order, with their positions, and
// the checks a step makes first (length within max_seq_len, ids in the vocabulary, and with retrieval the
// neighbours of every chunk the step completes).
// provides: DecodeRows, decode_rows
#pragma once
#include <cstdint>
#include <vector>

#include "model/config.h"

namespace retro {

struct DecodeRows {
    std::vector<std::int64_t> seq, pos;   // per row: its sequence and position
    std::vector<std::int32_t> ids;        // per row
    std::vector<std::int64_t> begin;      // first row of each sequence, size S + 1
};

// tokens[s]: sequence s's new ids (possibly none); lengths[s]: positions it has been fed; neighbour_chunks[s]: chunks
// with neighbours (empty: no retrieval). UserError "generation: ..." for a length past max_seq_len or an id outside
// the vocabulary; InternalError for a chunk reached without neighbours.
DecodeRows decode_rows(const std::vector<std::vector<std::int32_t>>& tokens, const std::vector<std::int64_t>& lengths,
                       const std::vector<std::int64_t>& neighbour_chunks, const RetroConfig& c);

}  // namespace retro
