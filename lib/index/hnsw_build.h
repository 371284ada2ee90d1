// An HNSW graph built the same at any thread count. FAISS's own insertion (hnsw_add_vertices) adds the points of a
// level on all threads at once, each linking itself into the graph under locks as the others change it, so a graph
// built with more than one thread differed from run to run, and with it the neighbours retro-knn found (docs/index.md).
// hnsw_add_deterministic inserts in batches instead (the scheme of ParlayANN, arXiv:2305.04359, which FAISS releases
// after Debian's 1.7.3 also offer): each point of a batch finds its neighbours in the graph as it was before the batch
// (in parallel, reading only), then its own lists are written, then the links back to it are added to each neighbour's
// lists in one fixed order, one neighbour per thread. Batches grow with the graph (at most its size, at most 2 % of the
// points), so a point misses as link targets only the few points of its own batch. The steps of one insertion are
// FAISS's (the greedy descent, the efConstruction search, the neighbour-list pruning, HNSW::shrink_neighbor_list
// itself); the file written is an ordinary IndexHNSWFlat.
// provides: hnsw_add_deterministic, install_batched_hnsw, hnsw_is_batched
#pragma once
#include <cstdint>
#include <memory>
#include <string>

namespace faiss {
struct Index;
struct IndexHNSW;
}  // namespace faiss

namespace retro {

// What faiss::IndexHNSW::add does (the vectors appended to its storage, levels drawn by the graph's own generator),
// with the graph built as above: the same bytes for the same adds at any thread count. `x`: n rows of index.d floats.
// `batch_share`: the largest batch as a share of the points; 0: batches of one point, which is FAISS's insertion on
// one thread, byte for byte (the test that holds this code to FAISS's steps).
void hnsw_add_deterministic(faiss::IndexHNSW& index, std::int64_t n, const float* x, double batch_share = 0.02);

// Before anything is added to a new index (FaissIndex's constructor): its empty IndexHNSWFlat (the index itself, the
// one behind a pre-transform such as PCA or OPQ, or an IVF's HNSW quantizer, which FAISS's IVF training fills) is
// replaced by one whose add is hnsw_add_deterministic (the file written is the same IndexHNSWFlat). Returns how many
// were replaced: 0 with RETRO_HNSW_BUILD=faiss (FAISS's own insertion, to compare with it); another value of it is
// refused naming it.
int install_batched_hnsw(std::unique_ptr<faiss::Index>& index);
// Whether `index` is such a replacement (searched as the IndexHNSWFlat it is).
bool hnsw_is_batched(const faiss::Index& index);
// How the HNSW graph of a built index (itself, behind a pre-transform, or an IVF's quantizer) was built: "batches",
// "faiss" (RETRO_HNSW_BUILD=faiss, or a graph over compressed storage), or "" where it has none. The manifest records
// it: the two give other bytes.
std::string hnsw_builder_of(const faiss::Index& index);

}  // namespace retro
