// Implementation of index_memory.h. The estimate follows FAISS's data structures: an inverted list
// costs two std::vector headers, a code its bytes plus an 8-byte id; PQ keeps 2^nbits centroids per
// sub-quantizer; an HNSW node keeps 2M links on level 0 and M on each upper level (1/ln M of the nodes
// reach level 1, and so on: ~5 % more), plus its level and offset.
#include "index/index_memory.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <regex>

#include "core/error.h"
#include "core/memory_budget.h"
#include "core/threads.h"

namespace retro {
namespace {

struct FactoryParts {
    std::int64_t opq_out = 0;          // OPQm_d: output dimension (0 = none)
    std::int64_t nlist = 0;            // IVFn
    std::int64_t ivf_hnsw_m = 0;       // IVFn_HNSWm: the quantizer's M
    std::int64_t pq_m = 0, pq_bits = 8;
    std::int64_t hnsw_m = 0;           // top-level HNSWm
};

std::int64_t to_int(const std::string& s) {
    // digits only (the regexes say so); saturate instead of overflowing std::stoll
    return s.size() > 15 ? std::int64_t{1} << 50 : std::stoll(s);
}

FactoryParts parse(const std::string& f) {
    FactoryParts p;
    std::smatch m;
    if (std::regex_search(f, m, std::regex("OPQ([0-9]+)(_([0-9]+))?"))) p.opq_out = m[3].matched ? to_int(m[3].str()) : -1;
    if (std::regex_search(f, m, std::regex("IVF([0-9]+)(_HNSW([0-9]+))?"))) {
        p.nlist = to_int(m[1].str());
        if (m[3].matched) p.ivf_hnsw_m = to_int(m[3].str());
    }
    if (std::regex_search(f, m, std::regex("(^|,)PQ([0-9]+)(x([0-9]+))?"))) {
        p.pq_m = to_int(m[2].str());
        if (m[4].matched) p.pq_bits = to_int(m[4].str());
    }
    if (std::regex_search(f, m, std::regex("(^|,)HNSW([0-9]+)"))) p.hnsw_m = to_int(m[2].str());
    return p;
}

// Whether FAISS trains the index before adding vectors: anything with a quantizer, a transform or codes to learn
// (IVF, PQ, SQ, OPQ, PCA, ...); plain Flat and HNSW over Flat storage do not.
bool factory_trains(const std::string& f) {
    return !std::regex_match(f, std::regex("(HNSW[0-9]+(_[0-9]+)?,)?Flat|HNSW[0-9]+(_[0-9]+)?(,Flat)?"));
}

// Whether the codes are the vectors themselves (4 bytes a dimension): then the dimension is what to lower.
bool factory_uncompressed(const std::string& f) { return !factory_trains(f); }

double hnsw_graph_bytes(double nodes, double m, double d) {
    return nodes * ((2 * m + 0.05 * m) * 4 + 16) + nodes * d * 4;   // links, level/offset, Flat storage
}

}  // namespace

double index_memory_bytes(const std::string& factory, std::int64_t n, int d, std::int64_t n_train, bool add_copies) {
    const FactoryParts p = parse(factory);
    const double dd = p.opq_out > 0 ? static_cast<double>(p.opq_out) : d, N = static_cast<double>(n);
    // the vectors added a block of 65,536 at a time, where they are copied to fp32 first (index_build.cpp's finalize:
    // f16 embeddings; f32 ones are added from the mapping), and the training sample where the index trains (a Flat or
    // HNSW-Flat index does not: it was counted, the add block not, and --dim 50000 took 4.9 GB against 3.1 GiB)
    double bytes = add_copies ? static_cast<double>(std::min<std::int64_t>(n, 65536)) * d * 4 : 0.0;
    if (factory_trains(factory)) bytes += static_cast<double>(n_train) * d * 4;
    // flat storage (Flat, HNSW's) is one vector FAISS resizes at each add: the last add holds the codes so far beside
    // their grown copy (a review measured 260 MiB against an estimate of 161 at 263,574 x 128 without this term)
    if (factory_uncompressed(factory)) bytes += std::max(0.0, N - 65536) * dd * 4;
    if (p.opq_out != 0) bytes += double(d) * dd * 4;
    double code = dd * 4;                                   // Flat codes
    if (p.pq_m > 0) {
        code = std::ceil(double(p.pq_m) * double(p.pq_bits) / 8);
        bytes += std::ldexp(dd * 4, static_cast<int>(std::min<std::int64_t>(p.pq_bits, 60)));   // 2^bits centroids x dd
    }
    if (p.nlist > 0) {
        const double L = static_cast<double>(p.nlist);
        bytes += L * (56 + dd * 4) + N * (code + 8);
        if (p.ivf_hnsw_m > 0) bytes += hnsw_graph_bytes(L, double(p.ivf_hnsw_m), 0);
    } else if (p.hnsw_m > 0) {
        bytes += hnsw_graph_bytes(N, double(p.hnsw_m), dd);
        // the batched build's own (hnsw_build.cpp): a batch of at most 2 % of the points holds each point's lists
        // (2M ids on level 0), the links back (16 bytes each) and their groups (8), and every thread a visited mark a
        // node (session 58's note: this was outside the estimate)
        const double M = static_cast<double>(p.hnsw_m);
        bytes += 0.02 * N * (2 * M * (4 + 16 + 8) + 72) + static_cast<double>(thread_count()) * N;
    } else {
        bytes += N * code;
    }
    return bytes;
}

void index_check_sizes(const std::string& factory, std::int64_t n, int d, std::int64_t n_train,
                       const std::string& dim_option, double held_bytes, bool add_copies) {
    const FactoryParts p = parse(factory);
    const std::string q = "'" + factory + "'";
    const std::int64_t dd = p.opq_out > 0 ? p.opq_out : d;
    if (p.opq_out > 65536) user_error_in("--index", q + ": an OPQ output dimension above 65,536 is not supported");
    {   // a PCA keeps at most the input's dimensions (FAISS fails when training it, after every chunk was embedded)
        std::smatch m;
        if (std::regex_search(factory, m, std::regex("(^|,)PCAW?R?([0-9]+)")) && to_int(m[2].str()) > d)
            user_error_in("--index", q + ": a PCA to " + m[2].str() + " dimensions, but the vectors have " + std::to_string(d),
                          "give the PCA at most " + std::to_string(d) + " dimensions");
    }
    if (p.pq_m > 0) {
        if (p.pq_bits < 1 || p.pq_bits > 16)
            user_error_in("--index", q + ": PQ codes of " + std::to_string(p.pq_bits) + " bits are not supported (1 to 16)",
                          "use 8-bit codes, e.g. PQ32");
        if (dd % p.pq_m != 0)
            user_error_in("--index", q + ": PQ" + std::to_string(p.pq_m) + " needs a dimension divisible by " +
                                         std::to_string(p.pq_m) + ", the vectors have " + std::to_string(dd),
                          "pick a number of sub-quantizers that divides " + std::to_string(dd));
    }
    for (std::int64_t m : {p.hnsw_m, p.ivf_hnsw_m})
        if (m == 1 || m > 4096)
            user_error_in("--index", q + ": HNSW M must be between 2 and 4,096 (got " + std::to_string(m) + ")",
                          "16 to 64 is usual");
    // FAISS numbers an HNSW graph's nodes with int (storage_idx_t), as hnsw_build.cpp does: past 2^31 - 1 vectors
    // they would overflow (an IVF index's HNSW quantizer holds only the nlist centroids)
    if (p.hnsw_m > 0 && n > std::numeric_limits<std::int32_t>::max())
        user_error_in("--index", cat(q, ": an HNSW graph numbers its nodes with 32-bit ints, at most ",
                                     std::numeric_limits<std::int32_t>::max(), "; there are ", n, " vectors"),
                      "an IVF index (the default beyond 20M chunks, IVFn_HNSWm, keeps its graph over the list centroids)");
    // an uncompressed index holds n x d floats: a --dim of 10,000,000 is what to change (it blamed --index)
    const double need = index_memory_bytes(factory, n, d, n_train, add_copies) + held_bytes,
                 vectors = static_cast<double>(n) * d * 4;   // the stored vectors
    const bool blame_dim = factory_uncompressed(factory) && !dim_option.empty() && vectors >= need / 2;
    memory_require(blame_dim ? dim_option : "--index", need,
                   q + " over " + std::to_string(n) + " vectors of dimension " + std::to_string(d),
                   factory_uncompressed(factory) && !blame_dim && parse(factory).hnsw_m > 0
                       ? std::string("a smaller HNSW M, or a machine with more memory")   // the graph is what grew
                   : factory_uncompressed(factory)
                       ? (blame_dim ? "a smaller " + dim_option + ", " : std::string()) +
                             "an index of compressed codes (IVF and PQ: docs/index.md), or a machine with more memory"
                       : "a smaller nlist, HNSW M or PQ code, or a machine with more memory");
}

}  // namespace retro
