#include "data/neighbour_window.h"

#include <algorithm>
#include <vector>

#include "core/error.h"
#include "data/chunk_db.h"

namespace retro {

NeighbourAlignment neighbour_alignment_from_string(const std::string& s) {
    if (s == "chunk") return NeighbourAlignment::chunk;
    if (s == "match") return NeighbourAlignment::match;
    user_error_in("neighbour_alignment", "must be \"chunk\" or \"match\", got \"" + s + "\"");
}

const char* neighbour_alignment_name(NeighbourAlignment a) { return a == NeighbourAlignment::match ? "match" : "chunk"; }

NeighbourMatch neighbour_match(const ChunkDb& db, const std::int32_t* query, std::int64_t id, std::int32_t pad) {
    const int cs = db.chunk_size();
    const std::int64_t doc = db.doc_of_checked(id);
    const std::int64_t first = std::max(id - 1, db.doc_first(doc)), end = std::min(id + 2, db.doc_end(doc));
    thread_local std::vector<std::int32_t> text;
    text.clear();
    db.rows(first, end, text);
    const int m = static_cast<int>(text.size());
    // longest common run: run[j] = length of the common run ending at query[i], text[j]
    thread_local std::vector<int> prev, cur;
    prev.assign(static_cast<std::size_t>(m) + 1, 0);
    cur.assign(static_cast<std::size_t>(m) + 1, 0);
    int best = 0, best_qi = -1, best_tj = -1;
    for (int i = 0; i < cs; i++) {
        const std::int32_t q = query[i];
        for (int j = 0; j < m; j++) {
            const int run = (q != pad && text[j] == q) ? prev[j] + 1 : 0;
            cur[j + 1] = run;
            // ">=" on i (later query end wins ties), ">" on j within one i (earliest text position wins)
            if (run > best || (run == best && run > 0 && i > best_qi)) {
                best = run;
                best_qi = i;
                best_tj = j;
            }
        }
        std::swap(prev, cur);
    }
    NeighbourMatch match;
    match.run = best;
    // text[best_tj] (token (first - id) * cs + best_tj from chunk id's start) must land at window position best_qi
    if (best >= kMinAlignRun) match.offset = (first - id) * cs + best_tj - best_qi;
    return match;
}

void neighbour_window(const ChunkDb& db, std::int64_t id, std::int64_t offset, std::int32_t pad, std::int32_t* out) {
    const int cs = db.chunk_size();
    const std::int64_t doc = db.doc_of_checked(id);
    const std::int64_t lo = db.doc_first(doc) * cs, hi = db.doc_end(doc) * cs;   // flat token range of the document
    const std::int64_t start = id * cs + offset;
    for (int t = 0; t < 2 * cs; t++) {
        const std::int64_t p = start + t;
        out[t] = (p >= lo && p < hi) ? db.token(p / cs, static_cast<int>(p % cs)) : pad;
    }
}

bool neighbour_read(const ChunkDb& db, NeighbourAlignment a, int min_match, const std::int32_t* query,
                    std::int64_t id, std::int32_t pad, std::int32_t* out) {
    const int r = 2 * db.chunk_size();
    if (a == NeighbourAlignment::chunk && min_match <= 0) {
        db.neighbour_tokens(id, out);
        return true;
    }
    const NeighbourMatch m = neighbour_match(db, query, id, pad);
    if (m.run < min_match) {
        std::fill(out, out + r, pad);
        return false;
    }
    // chunk-aligned (or a match too short to shift by): RETRO's unit, with RP's continuation rule
    if (a == NeighbourAlignment::chunk || m.run < kMinAlignRun) db.neighbour_tokens(id, out);
    else neighbour_window(db, id, m.offset, pad, out);
    return true;
}

}  // namespace retro
