// HNSW search over a FAISS IndexHNSWFlat (inner product), read in place: FAISS 1.7.3's algorithm
// step for step (greedy descent through the upper levels, then the bounded best-first walk on
// level 0 with its "efSearch processed candidates closer than the next one" stop rule and a result
// heap of k), so the neighbours equal FAISS's own up to ties, with AVX-512 distances (simd_dot.h)
// and each step's unvisited neighbours prefetched before their distances are computed (the walk
// is bound by memory latency: one row per neighbour). ef = max(efSearch, k). Queries run in
// parallel, one visited table per thread. The AnnFilter drops results, never graph nodes.
#pragma once
#include "index/ann_search.h"

namespace faiss {
struct IndexHNSW;
}

namespace retro {

class HnswSearcher final : public AnnSearcher {
public:
    // Null with `why` set when the index is not covered (storage not Flat/inner product, a beam
    // search on the upper levels, an unbounded queue).
    static std::unique_ptr<HnswSearcher> create(const faiss::IndexHNSW& index, std::string& why);

    void search(std::int64_t m, const float* queries, int k, const AnnFilter& filter, std::int64_t* ids,
                float* scores) const override;
    std::string name() const override { return "hnsw"; }

private:
    explicit HnswSearcher(const faiss::IndexHNSW& index) : index_(index) {}
    const faiss::IndexHNSW& index_;
};

}  // namespace retro
