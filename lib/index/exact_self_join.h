// Exact k nearest neighbours of every row of a base among the base's other rows (a self-join:
// retro-knn over the database's own chunks, with --exact or a Flat index), computing each pair's
// score once. s_ij and s_ji are the same bits (the fused kernel sums q[t]·x[t] by one fma per t in
// order, and fma(a, b, c) = fma(b, a, c)), so a tile of scores updates both the queries' lists and
// the base rows' own lists: half the FLOPs of exact_search_ip(base, base), the same results.
//
// Work goes block by block in increasing order. Block a's list is complete once it has been
// scanned against every row of blocks c >= a (updating the rows of later pending blocks as it goes)
// and of blocks already finished before this run (resume), and merged with what earlier blocks of
// this run offered it; `done` then receives it, so a killed run keeps every block already passed
// to `done`. Threads split the rows scanned for a block (each thread its own rows: no two threads
// touch one row's list), each with its own lists for the block's queries, merged at the end.
// Same order and padding rules as exact_search_ip. Needs AVX-512F (self_join_available()).
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

namespace retro {

struct SelfJoinOptions {
    int k = 10;
    std::int64_t block = 16384;                 // rows per block (the caller's resumable block)
    const std::int64_t* docs = nullptr;         // optional: a row's document; same-document pairs skipped
};

bool self_join_available();

// pending: the blocks to compute, increasing (a block not listed is complete already: its rows are
// scanned as plain base rows). done(b, ids, scores): rows of block b, [rows x k] each.
void exact_self_join_ip(const float* base, std::int64_t n, int d, const SelfJoinOptions& opts,
                        const std::vector<std::int64_t>& pending,
                        const std::function<void(std::int64_t b, const std::int64_t* ids, const float* scores)>& done);

}  // namespace retro
