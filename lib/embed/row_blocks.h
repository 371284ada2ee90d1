// parallel_row_blocks: how the encoders (bert_model.cpp, modernbert_model.cpp, t5_model.cpp, clip_model.cpp) spread the
// rows of a batch over the threads for their dense layers, so that no row's bits depend on the thread count.
// - On nn::PackedLinear's AVX-512 kernel a row's outputs are the same whatever rows share the call (packed_linear.h:
//   one FMA chain per output in k order), so each thread takes an equal contiguous share of the rows, in blocks of
//   `block` rows (a block's activations stay near the core): the balance of splitting by thread, at no cost.
// - On the cblas_sgemm path (no AVX-512F) OpenBLAS sums a row by the call's row count (measured: the pooled rows'
//   calls of a few dozen rows, split among the threads, gave other bits), so the blocks are fixed by the row count
//   alone: blocks of at most min(block, 128) rows, equal but the last (a multiple of 8, at least 32 where block
//   allows), their number near a multiple of 8, each taken whole by one thread. The same rows then share a call at any thread count, 2, 4 and 8 threads
//   get near-equal work, and a batch of N rows keeps up to N / 128 threads busy (a default batch of 64 chunks,
//   ~4,200 rows: 38). Blocks of 128 rows against 1,024 through OpenBLAS's Haswell kernels (MiniLM's shape, 3,059 rows,
//   1 and 2 threads; docs/performance.md "Session 48"): 0-10 % slower, within this box's noise; 64 rows ~10 %. At
//   most 8 blocks (1,024 rows) had kept a many-core CPU without AVX-512 to 8 busy threads.
// tests/test_embed_threads.cpp holds every dense embedder to both, at 1, 2 and 3 threads.
#pragma once
#include <algorithm>
#include <cstdint>

#include "core/threads.h"

namespace retro {

// fn(r0, rows, thread) for blocks [r0, r0 + rows) covering [0, n), rows <= block; thread < thread_count().
// row_invariant: the GEMMs' rows do not depend on which rows share a call (PackedLinear::uses_avx512()).
template <typename Fn>
void parallel_row_blocks(std::int64_t n, std::int64_t block, bool row_invariant, const Fn& fn) {
    if (n <= 0) return;
    if (row_invariant) {
        parallel_ranges(n, [&](std::int64_t begin, std::int64_t end, int thread) {
            for (std::int64_t r0 = begin; r0 < end; r0 += block) fn(r0, std::min(block, end - r0), thread);
        });
        return;
    }
    const std::int64_t most = std::min<std::int64_t>(block, 128);
    const std::int64_t count = ((n + most - 1) / most + 7) / 8 * 8;
    const std::int64_t size = std::min(most, std::max<std::int64_t>(32, ((n + count - 1) / count + 7) / 8 * 8));
    parallel_ranges((n + size - 1) / size, [&](std::int64_t b0, std::int64_t b1, int thread) {
        for (std::int64_t b = b0; b < b1; ++b) fn(b * size, std::min(size, n - b * size), thread);
    });
}

}  // namespace retro
