// HNSW search over a FAISS IndexHNSWFlat (inner product), read in place: FAISS's algorithm step for
// step (greedy descent through the upper levels, then the bounded best-first walk on level 0 with
// its "efSearch processed candidates closer than the next one" stop rule), with AVX-512 distances
// (simd_dot.h) and each step's unvisited neighbours prefetched before their distances are computed.
// ef = max(efSearch, k). Queries run in parallel, one visited table per thread. The AnnFilter drops
// results, never graph nodes.
// The walk is bound by memory (a step's rows are known only after the previous step), so by
// default it reads an fp16 copy of the rows (half the bytes; made at the first search, rebuilt if
// the index grows) and keeps its ef best instead of k, then rescores those in fp32 and returns the
// k best: scores exact, recall@10 within 0.001 of the fp32 walk on the benchmarks
// (docs/performance.md). With fp16_walk false: the fp32 walk and a result heap of k, FAISS's exact
// neighbours up to ties (tests/test_ann_search.cpp checks it against pip faiss-cpu).
#pragma once
#include <vector>

#include "index/ann_search.h"

namespace faiss {
struct IndexHNSW;
}

namespace retro {

class HnswSearcher final : public AnnSearcher {
public:
    // Null with `why` set when the index is not covered (storage not Flat/inner product, a beam
    // search on the upper levels, an unbounded queue).
    static std::unique_ptr<HnswSearcher> create(const faiss::IndexHNSW& index, std::string& why, bool fp16_walk = true);

    void search(std::int64_t m, const float* queries, int k, const AnnFilter& filter, std::int64_t* ids,
                float* scores) const override;
    std::string name() const override { return "hnsw"; }

private:
    HnswSearcher(const faiss::IndexHNSW& index, bool fp16_walk) : index_(index), fp16_walk_(fp16_walk) {}
    const faiss::IndexHNSW& index_;
    mutable bool fp16_walk_;   // cleared by search() when the fp16 copy would not fit in memory
    mutable std::vector<std::uint16_t> half_;   // the fp16 rows of the walk (searches are not concurrent)
};

}  // namespace retro
