// IVF search (IVF-Flat, and IVF-PQ with 8-bit codes) over a FAISS IndexIVF read in place, grouped
// by list: the coarse quantizer picks each query's nprobe lists (Flat: exact_search_ip over the
// centroids, or sgemm + a selection beyond 32 probes; HNSW: hnsw_search.h), the (query, list) pairs are bucketed by list, and each list is
// scanned once for all the queries that probe it with the exact-search kernels (exact_scan.h), so
// a list is read from memory once per batch instead of once per query, as FAISS does.
//   IVF-Flat: score = q . x, the list rows are the stored vectors.
//   IVF-PQ:   score = q . c_l + sum_m q_m . C_m[code_m] (FAISS's inner-product formula, RETRO.md's
//             index section); the list's residuals r = concat_m C_m[code_m] are decoded once into a
//             scratch block and the scan starts every query at its q . c_l (its coarse score).
// Threads take contiguous ranges of lists balanced by work (rows x queries), each with its own
// top-k lists for every query, merged at the end: buckets stay whole however many threads run.
// Same neighbours as FAISS's IndexIVF::search for the same nprobe, ties aside (scores are summed
// in another order).
#pragma once
#include <vector>

#include "index/ann_search.h"

namespace faiss {
struct IndexIVF;
struct IndexIVFPQ;
struct ArrayInvertedLists;
}

namespace retro {

struct TopK;

class IvfSearcher final : public AnnSearcher {
public:
    // Null with `why` set when the index is not covered.
    static std::unique_ptr<IvfSearcher> create(const faiss::IndexIVF& index, std::string& why, ExactKernel kernel);
    ~IvfSearcher() override;

    void search(std::int64_t m, const float* queries, int k, const AnnFilter& filter, std::int64_t* ids,
                float* scores) const override;
    std::string name() const override;

private:
    IvfSearcher(const faiss::IndexIVF& index, const faiss::ArrayInvertedLists& lists, const faiss::IndexIVFPQ* pq,
                std::unique_ptr<AnnSearcher> quantizer, ExactKernel kernel);
    struct Buckets;
    void scan_lists(const Buckets& b, std::int64_t l0, std::int64_t l1, const float* queries, const AnnFilter& filter,
                    std::vector<TopK>& tops) const;
    void decode_pq(std::int64_t list, std::int64_t n, float* out) const;
    static constexpr int kHeapProbeLimit = 32;   // more probes of a Flat quantizer: sgemm + selection
    void coarse_by_selection(const float* centroids, std::int64_t m, const float* queries, int nprobe, std::int64_t* ids,
                             float* scores) const;

    const faiss::IndexIVF& ivf_;
    const faiss::ArrayInvertedLists& lists_;
    const faiss::IndexIVFPQ* pq_;                 // null: IVF-Flat
    std::unique_ptr<AnnSearcher> quantizer_;      // over the centroids
    int d_;
    ExactKernel kernel_;   // resolved: AVX512 or SGEMM
};

}  // namespace retro
