// retro-bench knn: queries/s of RetroKit's exact search (each CPU kernel: fused AVX-512, and
// blocked sgemm + top-k) and of FAISS's IndexFlatIP (Debian's libfaiss, through the same binary)
// on the same vectors, at each thread count, with exact search's GFLOP/s against the sgemm rate
// measured in the same run; then the approximate rows (knn_ann_bench.h): IVF-Flat, IVF-PQ and
// HNSW, RetroKit's search beside the pip faiss-cpu package on the same index files.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "bench/knn_ann_bench.h"

namespace retro::bench {

struct KnnBenchOptions {
    std::int64_t n = 1'000'000;        // base vectors
    int dim = 256;
    std::int64_t queries = 4096;
    int k = 10;
    std::vector<int> threads;          // default: 1 and all cores
    AnnBenchOptions ann;               // IVF-Flat / IVF-PQ / HNSW rows
    std::string base_npy, queries_npy; // real vectors instead of the synthetic ones
    int clusters = 10000;              // synthetic data: unit vectors around this many centres
    std::string peer;                  // optional python script (tests/peers/faiss_knn.py)
    std::string python = "python3";
    std::string json;
    std::int64_t query_block = 0, base_block = 0;   // 0 = exact search's defaults (for tuning)
    bool cuda = false;                 // also time exact search on the GPU
    std::vector<std::string> kernels;  // exact search kernels to time: avx512, sgemm (default: those this CPU runs)
};

void run_knn_bench(const KnnBenchOptions& opt, const std::string& command_line);

}  // namespace retro::bench
