// The FAISS wrapper: a factory string picks the index (STYLE.md item 11), inner product on unit
// vectors. Chooses a default from N, lowers nlist when the training sample would give fewer than
// 39 points per centroid (Megatron-LM #699), writes the index atomically, and turns FAISS
// exceptions into one-line user errors naming the file. Searching goes through RetroKit's own
// kernels where the index type is covered (ann_search.h), FAISS's search otherwise.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "index/ann_search.h"

namespace faiss {
struct Index;
}

namespace retro {

// The default index for n vectors, chosen on measured speed and recall (docs/index.md, "The
// default index"): "Flat" below 2^20 (retro-knn then runs the exact self-join: recall 1, and on
// real corpora IVF needs ~75 % of its lists probed for recall@2 >= 0.99, which costs more),
// "IVF{index_ivf_nlist(n)},Flat" below 20M, "OPQ64_256,IVF{..}_HNSW32,PQ64" beyond (memory).
inline constexpr std::int64_t kIndexFlatBelow = std::int64_t{1} << 20;
std::string index_default_factory(std::int64_t n);
// 4 sqrt(n) rounded down to a power of two (FAISS's guideline).
std::int64_t index_ivf_nlist(std::int64_t n);

// UserError naming --index for a factory string FAISS would crash or hang on instead of refusing: a part of size 0
// (HNSW0, IVF0, PCA0, RR0, PQ8x0 ...: segfaults, assertions, or an index of dimension 0), or an NSG graph (a
// floating-point exception under IVF, no end with NSG4). index_fit_factory calls it first.
void index_check_factory(const std::string& factory);

// If `factory` names IVFn and n_train < 39*n, returns it with n lowered to n_train/39 (>= 1) and
// sets `note` to say so; otherwise returns it unchanged.
std::string index_fit_factory(const std::string& factory, std::int64_t n_train, std::string& note);

// UserError when `n_train` points cannot train the PQ codebooks `factory` names (FAISS only
// warns and builds a poor index): 8-bit PQ needs 39 * 256 points.
void index_check_trainable(const std::string& factory, std::int64_t n_train);

// The nlist an IVF factory string names, or 0.
std::int64_t index_factory_nlist(const std::string& factory);
// How many of n vectors train an index of this factory string (docs/index.md): min(n, max(256 nlist, 65,536)) for
// IVF (FAISS's k-means samples at most 256 points a centroid), all n otherwise.
std::int64_t index_training_count(const std::string& factory, std::int64_t n);
// Default nprobe for an IVF index of nlist lists: nlist/4 (at least 1): a quarter of the lists,
// recall@2 0.82-0.89 on the measured bow corpora at a quarter of exact search's FLOPs.
int index_default_nprobe(std::int64_t nlist);
// UserError naming --nprobe or --ef-search when it is negative (0 means the default, or the index's setting).
void index_check_search_options(int nprobe, int ef_search);

class FaissIndex;
// Sets --nprobe (fitted to the lists) and --ef-search (0: as saved) on a loaded index, with a warning naming
// `path` for an option the index has nothing to apply it to (no inverted lists, no HNSW graph).
void index_apply_search_options(FaissIndex& index, int nprobe, int ef_search, const std::string& path);
// nprobe for an IVF index of nlist lists: one above nlist searches every list anyway, so it is lowered to nlist
// with a one-line note; unchanged when nlist is 0 (not an IVF index: nprobe is ignored).
int index_fit_nprobe(int nprobe, std::int64_t nlist);

class FaissIndex {
public:
    FaissIndex(const std::string& factory, int dim);   // UserError on a bad factory string
    static FaissIndex load(const std::string& path);   // UserError naming a corrupt/missing file
    FaissIndex(FaissIndex&&) noexcept;
    FaissIndex& operator=(FaissIndex&&) noexcept;
    ~FaissIndex();

    bool needs_training() const;
    void train(std::int64_t n, const float* x);   // UserError with the fix when training fails
    void add(std::int64_t n, const float* x);
    // Approximate search, rows best first; ids -1 where nothing was found. With a filter, the
    // searcher drops a query's own document inside the search when filters_inside(); FAISS's own
    // search ignores it (the caller filters its candidates).
    void search(std::int64_t m, const float* q, int k, std::int64_t* ids, float* scores,
                const AnnFilter& filter = AnnFilter{}) const;
    bool filters_inside() const;
    // "ivf-flat (flat quantizer)", ..., or "faiss (<why ours does not cover it>)"
    std::string search_method() const;
    // The vectors of a Flat index that RetroKit searches (for the exact self-join), or null.
    const float* flat_vectors() const;
    // true: always FAISS's own search (benchmarks, and the test that compares the two)
    void use_faiss_search(bool yes) { faiss_only_ = yes; }
    // Options of RetroKit's searchers (ann_search.h); the searcher is made again at the next search.
    void set_ann_options(const AnnOptions& o) {
        ann_options_ = o;
        ann_made_ = false;
        ann_.reset();
    }
    bool set_nprobe(int nprobe);      // IVF only; false (nothing set) otherwise
    std::int64_t nlist() const;       // IVF: its lists; 0 otherwise
    bool set_ef_search(int ef);       // HNSW (index or IVF quantizer) only; false (nothing set) otherwise
    void save(const std::string& path) const;   // atomic
    int dim() const;
    std::int64_t size() const;
    const faiss::Index* raw() const { return index_.get(); }

private:
    FaissIndex() = default;
    const AnnSearcher* searcher() const;   // made at the first search (not thread-safe), null = FAISS
    std::unique_ptr<faiss::Index> index_;
    std::string where_;   // the file or factory string, for messages
    mutable std::unique_ptr<AnnSearcher> ann_;
    mutable std::string ann_why_;
    mutable bool ann_made_ = false;
    bool faiss_only_ = false;
    AnnOptions ann_options_;
};

}  // namespace retro
