// What the encoder reads for one retrieved neighbour: RETRO's unit (the neighbour chunk and its continuation,
// chunk-aligned, RETRO.md A.6) or, with "match" alignment (docs/retrieval.md section 7), the 2·cs tokens of
// the neighbour's document shifted so that the longest token run it shares with the query chunk sits at the
// query's own positions: the text that followed the match then sits where the continuation of the query will
// be read, so a copy is found by position (with aligned CCA query positions) instead of by content.
#pragma once
#include <cstdint>
#include <string>

namespace retro {

class ChunkDb;

enum class NeighbourAlignment { chunk, match };

NeighbourAlignment neighbour_alignment_from_string(const std::string& s);   // UserError on anything else
const char* neighbour_alignment_name(NeighbourAlignment a);

// Runs shorter than this keep the chunk-aligned window.
constexpr int kMinAlignRun = 4;

struct NeighbourMatch {
    int run = 0;               // longest run of non-pad tokens shared by the query chunk and the neighbour's text
    std::int64_t offset = 0;   // first token of the aligned window from chunk id's start (0 when run < kMinAlignRun)
};
// The match is searched in the neighbour's document from chunk id - 1 to id + 1; the longest common run wins,
// ties to the run ending latest in the query, then earliest in the neighbour. The offset lies in
// [-2cs + 1, 2cs - 1].
NeighbourMatch neighbour_match(const ChunkDb& db, const std::int32_t* query, std::int64_t id, std::int32_t pad);

// 2·cs tokens of chunk id's document from chunk id's first token + offset; pads outside the document.
void neighbour_window(const ChunkDb& db, std::int64_t id, std::int64_t offset, std::int32_t pad, std::int32_t* out);

// The unit the encoder reads for neighbour `id` of the chunk whose tokens are `query` (cs ids): 2cs pads when
// min_match > 0 and the two share no run of min_match tokens. Returns false when it wrote pads only.
bool neighbour_read(const ChunkDb& db, NeighbourAlignment a, int min_match, const std::int32_t* query,
                    std::int64_t id, std::int32_t pad, std::int32_t* out);

}  // namespace retro
