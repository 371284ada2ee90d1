// parallel_row_blocks: the rows of an encoder's batch cut into blocks that the row count alone fixes, each block taken
// whole by one thread, so that every GEMM over a block (nn::PackedLinear::apply: OpenBLAS's sgemm without AVX-512,
// which sums a row by the call's row count) sees the same rows, and gives the same bits, at any thread count.
// Threads split whole blocks (contiguous runs, parallel_ranges over the blocks), so the scratch of a block can be the
// thread's. tests/test_embed_threads.cpp holds every dense embedder to it.
#pragma once
#include <algorithm>
#include <cstdint>

#include "core/threads.h"

namespace retro {

// fn(r0, rows, thread) for the blocks [r0, r0 + rows) of [0, n): r0 = i · block, rows = min(block, n - r0).
template <typename Fn>
void parallel_row_blocks(std::int64_t n, std::int64_t block, const Fn& fn) {
    const std::int64_t blocks = (n + block - 1) / block;
    parallel_ranges(blocks, [&](std::int64_t b0, std::int64_t b1, int thread) {
        for (std::int64_t b = b0; b < b1; ++b) fn(b * block, std::min(block, n - b * block), thread);
    });
}

}  // namespace retro
