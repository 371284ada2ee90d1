// Checks an index factory string's sizes against the data and the machine before FAISS allocates
// anything (issue 16 item 6: `--index IVF999999999,Flat` used to allocate ~48 GB of empty inverted
// lists and be killed). Validates the parts FAISS would reject late or never (PQ sub-quantizers must
// divide the dimension, codes of at most 16 bits, HNSW M >= 2), then estimates the memory of training,
// filling and holding the index over n vectors of dimension d and refuses, naming --index, what does
// not fit (core/memory_budget.h).
#pragma once
#include <cstdint>
#include <string>

namespace retro {

// Estimated bytes of the index (codes, lists, centroids, graph) plus its training sample (where it trains) and the
// block of vectors being added. embeddings.npy is mapped, not counted: its pages are the page cache's to drop.
// `add_copies`: the vectors are copied to fp32 a block at a time as they are added (f16 embeddings).
double index_memory_bytes(const std::string& factory, std::int64_t n, int d, std::int64_t n_train, bool add_copies = true);

// UserError naming --index when the factory's sizes are invalid for d or do not fit in memory; an uncompressed index
// (Flat, HNSW over Flat) that does not fit names `dim_option` where the user chose the dimension ("--dim": bow).
// `held_bytes`: what the caller holds besides while it builds (the image index's vectors, all in memory).
void index_check_sizes(const std::string& factory, std::int64_t n, int d, std::int64_t n_train,
                       const std::string& dim_option = "", double held_bytes = 0, bool add_copies = true);

}  // namespace retro
