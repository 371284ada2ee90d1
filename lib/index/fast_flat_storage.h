// Fast distances for FAISS's own graph building. Debian's libfaiss computes every distance of an
// HNSW insertion with scalar code (fvec_inner_product_ref), which makes building HNSW32 over 1M
// vectors take hours on two cores. FastFlatIP is an IndexFlat (inner product) whose distance
// computer uses simd_dot.h; install_fast_flat_storage swaps it in as the storage of every
// IndexHNSWFlat inside an index (also an IVF's HNSW quantizer, behind a pre-transform) before any
// vector is added. FAISS's insertion algorithm is unchanged, and the file written is an ordinary
// IndexHNSWFlat (the storage is written as "IxFI"), readable by faiss.read_index.
#pragma once

namespace faiss {
struct Index;
}

namespace retro {

// Returns how many storages were replaced (only empty inner-product Flat storages are).
int install_fast_flat_storage(faiss::Index* index);

}  // namespace retro
