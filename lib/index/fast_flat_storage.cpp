// Implementation of fast_flat_storage.h.
#include "index/fast_flat_storage.h"

#include <faiss/IndexFlat.h>
#include <faiss/IndexHNSW.h>
#include <faiss/IndexIVF.h>
#include <faiss/IndexPreTransform.h>
#include <faiss/impl/DistanceComputer.h>

#include "index/simd_dot.h"

namespace retro {
namespace {

// FAISS's HNSW wraps an inner-product computer in NegativeDistanceComputer itself: return +q.x.
struct FastIPDistance final : faiss::FlatCodesDistanceComputer {
    const float* rows;
    int d;
    const float* q = nullptr;
    FastIPDistance(const float* rows_, int d_)
        : faiss::FlatCodesDistanceComputer(reinterpret_cast<const std::uint8_t*>(rows_), sizeof(float) * d_),
          rows(rows_), d(d_) {}
    void set_query(const float* x) override { q = x; }
    float distance_to_code(const std::uint8_t* code) override { return dot_f32(q, reinterpret_cast<const float*>(code), d); }
    float symmetric_dis(idx_t i, idx_t j) override { return dot_f32(rows + i * d, rows + j * d, d); }
};

struct FastFlatIP final : faiss::IndexFlat {
    explicit FastFlatIP(idx_t dim) : faiss::IndexFlat(dim, faiss::METRIC_INNER_PRODUCT) {}
    faiss::FlatCodesDistanceComputer* get_FlatCodesDistanceComputer() const override {
        return new FastIPDistance(get_xb(), static_cast<int>(d));
    }
};

int swap_hnsw_storage(faiss::IndexHNSW* h) {
    auto* flat = dynamic_cast<faiss::IndexFlat*>(h->storage);
    if (!flat || dynamic_cast<FastFlatIP*>(flat) || flat->metric_type != faiss::METRIC_INNER_PRODUCT || flat->ntotal != 0)
        return 0;
    auto* fast = new FastFlatIP(flat->d);
    if (h->own_fields) delete flat;
    h->storage = fast;
    h->own_fields = true;
    return 1;
}

}  // namespace

int install_fast_flat_storage(faiss::Index* index) {
    if (!index) return 0;
    if (auto* pt = dynamic_cast<faiss::IndexPreTransform*>(index)) return install_fast_flat_storage(pt->index);
    if (auto* ivf = dynamic_cast<faiss::IndexIVF*>(index)) return install_fast_flat_storage(ivf->quantizer);
    if (auto* h = dynamic_cast<faiss::IndexHNSW*>(index)) return swap_hnsw_storage(h);
    return 0;
}

}  // namespace retro
