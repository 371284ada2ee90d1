// Approximate (and Flat) search over FAISS index structures with RetroKit's own SIMD kernels.
// Debian's libfaiss is a baseline x86-64 build whose list scans and graph steps run scalar code
// (docs/index.md, "Why our own search"); FAISS keeps training, the coarse quantizer's training,
// adding and the file format, while searching reads the index's arrays in place:
//   Flat                      exact_search_ip (the fused AVX-512 / sgemm kernels)
//   IVF-Flat, IVF-PQ (8-bit)  queries grouped by probed list, one GEMM-shaped scan per list
//                             (ivf_search.h); coarse quantizer Flat or HNSW
//   HNSW (Flat storage)       FAISS's graph walk with AVX-512 distances and prefetching (hnsw_search.h)
//   an OPQ / PCA pre-transform in front of any of these (FAISS applies it, a GEMM)
// Inner product only. Every searcher returns the k best per query by (score desc, id asc), pads
// with id -1 / score -inf, and can drop a query's own document inside the search (AnnFilter).
// Parameters (nprobe, efSearch) are read from the FAISS structures at each search, so
// FaissIndex::set_nprobe / set_ef_search keep working.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "index/exact_search.h"

namespace faiss {
struct Index;
}

namespace retro {

// Same-document filter: candidate j is skipped for query i when base_docs[j] == query_docs[i].
// Both null = no filter.
struct AnnFilter {
    const std::int64_t* query_docs = nullptr;
    const std::int64_t* base_docs = nullptr;
};

class AnnSearcher {
public:
    virtual ~AnnSearcher() = default;
    // ids[m*k], scores[m*k]
    virtual void search(std::int64_t m, const float* queries, int k, const AnnFilter& filter, std::int64_t* ids,
                        float* scores) const = 0;
    virtual std::string name() const = 0;   // "flat", "ivf-flat", "ivf-pq", "hnsw", with "+pretransform"
};

struct AnnOptions {
    ExactKernel kernel = ExactKernel::AUTO;   // scan kernel of Flat and IVF lists (tests force sgemm)
    // HNSW (top level) walks on an fp16 copy of its rows, then rescores its ef best in fp32 (hnsw_search.h);
    // false: FAISS's walk in fp32 step for step (the equality tests)
    bool hnsw_fp16_walk = true;
};

// A searcher reading `index` in place (index must outlive it and not change shape), or null with
// `why` saying what it does not cover (FAISS's own search is then used).
std::unique_ptr<AnnSearcher> ann_searcher_for(const faiss::Index& index, std::string& why, const AnnOptions& opts = {});

// The FAISS class of `index` as its source names it ("IndexScalarQuantizer"), for the log's "searched by FAISS" note.
std::string faiss_type_name(const faiss::Index& index);

}  // namespace retro
