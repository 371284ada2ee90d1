// Implementation of ann_search.h: picks the searcher for an index, and the two small ones (Flat,
// and a pre-transform in front of another searcher).
#include "index/hnsw_build.h"
#include "index/ann_search.h"

#include <faiss/IndexFlat.h>
#include <faiss/IndexHNSW.h>
#include <faiss/IndexIVF.h>
#include <faiss/IndexPreTransform.h>

#include <cxxabi.h>

#include <cstdlib>
#include <memory>
#include <typeinfo>

#include "index/exact_search.h"
#include "index/hnsw_search.h"
#include "index/ivf_search.h"

namespace retro {
namespace {

class FlatSearcher final : public AnnSearcher {
public:
    FlatSearcher(const faiss::IndexFlat& index, ExactKernel kernel) : index_(index), kernel_(kernel) {}
    void search(std::int64_t m, const float* queries, int k, const AnnFilter& filter, std::int64_t* ids,
                float* scores) const override {
        ExactSearchOptions o;
        o.k = k;
        o.kernel = kernel_;
        o.query_docs = filter.query_docs;
        o.base_docs = filter.base_docs;
        exact_search_ip(queries, m, index_.get_xb(), index_.ntotal, static_cast<int>(index_.d), o, ids, scores);
    }
    std::string name() const override { return "flat"; }

private:
    const faiss::IndexFlat& index_;
    ExactKernel kernel_;
};

// FAISS applies the chain (OPQ rotation, PCA: a GEMM), our searcher searches the transformed queries.
class PreTransformSearcher final : public AnnSearcher {
public:
    PreTransformSearcher(const faiss::IndexPreTransform& index, std::unique_ptr<AnnSearcher> inner)
        : index_(index), inner_(std::move(inner)) {}
    void search(std::int64_t m, const float* queries, int k, const AnnFilter& filter, std::int64_t* ids,
                float* scores) const override {
        const float* xt = index_.apply_chain(m, queries);
        std::unique_ptr<const float[]> owned(xt == queries ? nullptr : xt);
        inner_->search(m, xt, k, filter, ids, scores);
    }
    std::string name() const override { return inner_->name() + " after a pre-transform"; }

private:
    const faiss::IndexPreTransform& index_;
    std::unique_ptr<AnnSearcher> inner_;
};

}  // namespace

std::unique_ptr<AnnSearcher> ann_searcher_for(const faiss::Index& index, std::string& why, const AnnOptions& opts) {
    const ExactKernel kernel = exact_kernel_resolve(opts.kernel);
    why.clear();
    if (index.metric_type != faiss::METRIC_INNER_PRODUCT) return why = "metric is not inner product", nullptr;
    if (typeid(index) == typeid(faiss::IndexFlat) || typeid(index) == typeid(faiss::IndexFlatIP))
        return std::make_unique<FlatSearcher>(static_cast<const faiss::IndexFlat&>(index), kernel);
    if (const auto* ivf = dynamic_cast<const faiss::IndexIVF*>(&index)) return IvfSearcher::create(*ivf, why, kernel);   // its HNSW quantizer walks in fp32
    if (const auto* hnsw = dynamic_cast<const faiss::IndexHNSW*>(&index)) {
        if (typeid(index) != typeid(faiss::IndexHNSWFlat) && !hnsw_is_batched(index))
            return why = "HNSW variant is searched by FAISS", nullptr;
        return HnswSearcher::create(*hnsw, why, opts.hnsw_fp16_walk);
    }
    if (const auto* pt = dynamic_cast<const faiss::IndexPreTransform*>(&index)) {
        if (typeid(index) != typeid(faiss::IndexPreTransform) || !pt->index) return why = "pre-transform variant", nullptr;
        auto inner = ann_searcher_for(*pt->index, why, opts);
        if (!inner) return nullptr;
        return std::make_unique<PreTransformSearcher>(*pt, std::move(inner));
    }
    why = "index type " + faiss_type_name(index) + " is searched by FAISS";
    return nullptr;
}

std::string faiss_type_name(const faiss::Index& index) {
    const char* mangled = typeid(index).name();
    int status = 0;
    char* plain = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
    std::string name = status == 0 && plain ? plain : mangled;
    std::free(plain);
    if (name.rfind("faiss::", 0) == 0) name.erase(0, 7);
    return name;
}

}  // namespace retro
