// The approximate-search rows of retro-bench knn: IVF-Flat, IVF-PQ and HNSW indices built once on
// the bench's vectors (Debian's FAISS trains and fills them; HNSW with SIMD distances), then
// searched by RetroKit's searchers (ann_search.h) and, on the same index files, by the pip
// faiss-cpu package (tests/peers/faiss_knn.py), alternating for --rounds rounds (the order
// flipped each round): per row the median queries/s of each side and the median of the per-round
// ratios, with recall@k against exact search for each. Debian's FAISS search (scalar) is timed
// once on a subset of the queries, for reference.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace retro::bench {

struct AnnBenchOptions {
    std::int64_t ivf_nlist = 4096;        // 0 = no IVF rows
    bool ivf_nlist_given = false;         // --ivf-nlist given: taken as it is (the default is lowered for a small --n)
    std::vector<int> nprobe{8, 32, 128};
    int pq_m = 32;                        // IVF-PQ sub-quantizers (0 = no IVF-PQ rows)
    int hnsw_m = 0;                       // HNSW neighbours per node (0 = no HNSW rows)
    std::vector<int> ef_search{16, 64, 128};
    int rounds = 1;
    std::string index_cache;              // folder keeping built index files between runs ("" = none)
    std::int64_t debian_queries = 256;    // queries for the Debian FAISS reference rows (0 = none)
    std::string peer, python = "python3";
};

struct AnnBenchData {
    const float* base;
    std::int64_t n;
    const float* queries;
    std::int64_t q;
    int d, k;
    const std::vector<std::int64_t>* truth;   // exact ids [q, k]
    std::string data_key;                     // names the vectors in cache file names
    std::string work_dir;                     // scratch folder (index files when not cached, peer files)
};

// recall@k of `got` against `truth` (both [q, k] ids): the fraction of true neighbours found.
double recall_at_k(const std::vector<std::int64_t>& got, const std::vector<std::int64_t>& truth, std::int64_t q, int k);

// The warning when the faiss-cpu peer script (tests/peers/faiss_knn.py) exits `rc`: its likeliest cause and the command.
std::string knn_peer_failure(int rc, const std::string& cmd);

// Appends table rows {threads, method, params, q/s, peer q/s, ratio, recall, peer recall} and
// returns the JSON rows.
nlohmann::json run_ann_rows(const AnnBenchOptions& o, const AnnBenchData& data, const std::vector<int>& threads,
                            std::vector<std::vector<std::string>>& table);

}  // namespace retro::bench
