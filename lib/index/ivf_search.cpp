// Implementation of ivf_search.h.
#include "index/ivf_search.h"

#include <cblas.h>
#include <faiss/IndexFlat.h>
#include <faiss/IndexIVFFlat.h>
#include <faiss/IndexIVFPQ.h>
#include <faiss/invlists/InvertedLists.h>

#include <algorithm>
#include <cstring>
#include <typeinfo>
#include <utility>

#include "core/blas_threads.h"
#include "core/threads.h"
#include "index/exact_scan.h"
#include "index/topk.h"

namespace retro {

static_assert(sizeof(faiss::Index::idx_t) == sizeof(std::int64_t));

// The (query, list) pairs of one batch, bucketed by list; within a bucket queries are in order.
struct IvfSearcher::Buckets {
    std::vector<std::int64_t> start;   // nlist + 1: list l's pairs are [start[l], start[l+1])
    std::vector<std::int64_t> query;   // pair -> query row
    std::vector<float> coarse;         // pair -> q . c_l
};

IvfSearcher::IvfSearcher(const faiss::IndexIVF& index, const faiss::ArrayInvertedLists& lists,
                         const faiss::IndexIVFPQ* pq, std::unique_ptr<AnnSearcher> quantizer, ExactKernel kernel)
    : ivf_(index), lists_(lists), pq_(pq), quantizer_(std::move(quantizer)), d_(static_cast<int>(index.d)),
      kernel_(exact_kernel_resolve(kernel)) {}

IvfSearcher::~IvfSearcher() = default;

std::string IvfSearcher::name() const { return std::string(pq_ ? "ivf-pq" : "ivf-flat") + " (" + quantizer_->name() + " quantizer)"; }

std::unique_ptr<IvfSearcher> IvfSearcher::create(const faiss::IndexIVF& index, std::string& why, ExactKernel kernel) {
    const bool flat = typeid(index) == typeid(faiss::IndexIVFFlat);
    const bool pq = typeid(index) == typeid(faiss::IndexIVFPQ);
    if (!flat && !pq) return why = "IVF variant " + faiss_type_name(index) + " is searched by FAISS", nullptr;
    if (index.metric_type != faiss::METRIC_INNER_PRODUCT) return why = "IVF index is not inner product", nullptr;
    const auto* lists = dynamic_cast<const faiss::ArrayInvertedLists*>(index.invlists);
    if (!lists) return why = "IVF lists are not in memory (ArrayInvertedLists)", nullptr;
    if (index.max_codes != 0) return why = "IVF max_codes is set", nullptr;
    const faiss::IndexIVFPQ* ivfpq = nullptr;
    if (pq) {
        ivfpq = static_cast<const faiss::IndexIVFPQ*>(&index);
        if (ivfpq->pq.nbits != 8) return why = "IVF-PQ codes are not 8-bit", nullptr;
        if (ivfpq->polysemous_ht != 0) return why = "IVF-PQ polysemous filtering is on", nullptr;
        if (ivfpq->code_size != ivfpq->pq.M) return why = "IVF-PQ code size is not M bytes", nullptr;
    } else if (index.code_size != static_cast<std::size_t>(index.d) * sizeof(float)) {
        return why = "IVF-Flat code size is not d floats", nullptr;
    }
    if (!index.quantizer || index.quantizer->d != index.d) return why = "IVF has no usable quantizer", nullptr;
    std::string qwhy;
    AnnOptions qo;
    qo.kernel = kernel;
    qo.hnsw_fp16_walk = false;   // the probes FAISS would pick (an HNSW quantizer walks in fp32)
    auto quantizer = ann_searcher_for(*index.quantizer, qwhy, qo);
    if (!quantizer) return why = "IVF quantizer: " + qwhy, nullptr;
    return std::unique_ptr<IvfSearcher>(new IvfSearcher(index, *lists, ivfpq, std::move(quantizer), kernel));
}

namespace {

// Cost of packing one float into a tile, in FMA-instruction units: a row already in cache (a
// decoded PQ block, the queries) ~0.4 with the 16 x 16 transposes; a stored IVF-Flat row, read from
// memory for the packing pass instead of streaming under the FMAs, measured ~5x that (1M x 256,
// nprobe 8: packing the lists lost 7 % to packing the queries).
constexpr double kPackDecodedRow = 0.4, kPackStoredRow = 2.0;

// Which orientation of the fused kernel costs less per dimension for nq queries against n list
// rows: FMAs over padded tiles (12 rows x 32 lanes per step) plus packing one side.
bool base_tiles_cheaper(std::int64_t nq, std::int64_t n, double row_pack_cost) {
    auto up = [](std::int64_t v, std::int64_t m) { return (v + m - 1) / m * m; };
    const double queries_packed = double(up(n, 12)) * double(up(nq, 32)) / 16 + kPackDecodedRow * double(nq);
    const double rows_packed = double(nq) * double(up(n, 32)) / 16 + row_pack_cost * double(n);
    return rows_packed < queries_packed;
}

// out row i = concat_m C_m[code_im]; DSUB known at compile time turns each piece into a fixed copy.
template <int DSUB>
void decode_rows(const std::uint8_t* codes, std::int64_t n, std::size_t M, std::size_t ksub, std::size_t dsub_rt,
                 const float* cent, int d, float* out) {
    const std::size_t dsub = DSUB ? static_cast<std::size_t>(DSUB) : dsub_rt;
    for (std::int64_t i = 0; i < n; ++i) {
        const std::uint8_t* c = codes + static_cast<std::size_t>(i) * M;
        float* o = out + i * d;
        for (std::size_t m = 0; m < M; ++m) {
            const float* src = cent + (m * ksub + c[m]) * dsub;
            for (std::size_t t = 0; t < dsub; ++t) o[m * dsub + t] = src[t];
        }
    }
}

}  // namespace

void IvfSearcher::decode_pq(std::int64_t list, std::int64_t n, float* out) const {
    const faiss::ProductQuantizer& pq = pq_->pq;
    const std::uint8_t* codes = lists_.get_codes(static_cast<std::size_t>(list));
    const float* cent = pq.centroids.data();   // [M][ksub][dsub]
    switch (pq.dsub) {
        case 2: return decode_rows<2>(codes, n, pq.M, pq.ksub, pq.dsub, cent, d_, out);
        case 4: return decode_rows<4>(codes, n, pq.M, pq.ksub, pq.dsub, cent, d_, out);
        case 8: return decode_rows<8>(codes, n, pq.M, pq.ksub, pq.dsub, cent, d_, out);
        case 12: return decode_rows<12>(codes, n, pq.M, pq.ksub, pq.dsub, cent, d_, out);
        case 16: return decode_rows<16>(codes, n, pq.M, pq.ksub, pq.dsub, cent, d_, out);
        case 24: return decode_rows<24>(codes, n, pq.M, pq.ksub, pq.dsub, cent, d_, out);
        case 32: return decode_rows<32>(codes, n, pq.M, pq.ksub, pq.dsub, cent, d_, out);
        default: return decode_rows<0>(codes, n, pq.M, pq.ksub, pq.dsub, cent, d_, out);
    }
}

void IvfSearcher::scan_lists(const Buckets& b, std::int64_t l0, std::int64_t l1, const float* queries,
                             const AnnFilter& filter, std::vector<TopK>& tops) const {
    const int d = d_;
    std::vector<float> qbuf, offs, decoded;
    std::vector<std::int64_t> qdocs;
    std::vector<TopK> btops;
    const bool avx512 = kernel_ == ExactKernel::AVX512;
    for (std::int64_t l = l0; l < l1; ++l) {
        const std::int64_t p0 = b.start[static_cast<std::size_t>(l)], p1 = b.start[static_cast<std::size_t>(l) + 1];
        const auto n = static_cast<std::int64_t>(lists_.list_size(static_cast<std::size_t>(l)));
        if (p0 == p1 || n == 0) continue;
        const std::int64_t nq = p1 - p0;
        const float* rows;
        if (pq_) {
            decoded.resize(static_cast<std::size_t>(n * d));
            decode_pq(l, n, decoded.data());
            rows = decoded.data();
        } else {
            rows = reinterpret_cast<const float*>(lists_.get_codes(static_cast<std::size_t>(l)));
        }
        // the avx512 kernels read the bucket's queries in place; the sgemm kernel wants them contiguous
        if (!avx512) qbuf.resize(static_cast<std::size_t>(nq * d));
        offs.resize(static_cast<std::size_t>(nq));
        qdocs.resize(static_cast<std::size_t>(nq));
        btops.clear();
        for (std::int64_t p = p0; p < p1; ++p) {
            const std::int64_t qi = b.query[static_cast<std::size_t>(p)];
            if (!avx512)
                std::memcpy(qbuf.data() + (p - p0) * d, queries + qi * d, static_cast<std::size_t>(d) * sizeof(float));
            offs[static_cast<std::size_t>(p - p0)] = b.coarse[static_cast<std::size_t>(p)];
            if (filter.query_docs) qdocs[static_cast<std::size_t>(p - p0)] = filter.query_docs[qi];
            btops.push_back(std::move(tops[static_cast<std::size_t>(qi)]));
        }
        ScanJob job;
        job.queries = avx512 ? queries : qbuf.data();
        job.query_rows = avx512 ? b.query.data() + p0 : nullptr;
        job.qn = nq;
        job.query_docs = filter.query_docs ? qdocs.data() : nullptr;
        job.base = rows;
        job.b0 = 0;
        job.b1 = n;
        job.base_docs = filter.base_docs;
        job.d = d;
        job.tops = btops.data();
        job.base_ids = reinterpret_cast<const std::int64_t*>(lists_.get_ids(static_cast<std::size_t>(l)));
        job.query_offsets = pq_ && pq_->by_residual ? offs.data() : nullptr;
        if (avx512 && base_tiles_cheaper(nq, n, pq_ ? kPackDecodedRow : kPackStoredRow))
            scan_avx512_base_tiles(job);
        else if (avx512)
            scan_avx512(job, 0);
        else
            scan_sgemm(job, 1024, 2048);
        for (std::int64_t p = p0; p < p1; ++p)
            tops[static_cast<std::size_t>(b.query[static_cast<std::size_t>(p)])] = std::move(btops[static_cast<std::size_t>(p - p0)]);
    }
}

// Many probes of a Flat quantizer: every centroid score by sgemm, then a selection per query (a
// top-k heap of nprobe entries would cost more than the scores themselves).
void IvfSearcher::coarse_by_selection(const float* centroids, std::int64_t m, const float* queries, int nprobe,
                                      std::int64_t* ids, float* scores) const {
    const auto nlist = static_cast<std::int64_t>(ivf_.nlist);
    // at most 16 MiB of scores per block, and a block for every thread
    const std::int64_t block = std::max<std::int64_t>(
        1, std::min<std::int64_t>((std::int64_t{4} << 20) / nlist, (m + thread_count() - 1) / thread_count()));
    BlasSingleThread single_blas;
    parallel_ranges((m + block - 1) / block, [&](std::int64_t b0, std::int64_t b1, int) {
        std::vector<float> s(static_cast<std::size_t>(block * nlist));
        std::vector<std::int32_t> order(static_cast<std::size_t>(nlist));
        for (std::int64_t b = b0; b < b1; ++b) {
            const std::int64_t q0 = b * block, qc = std::min(block, m - q0);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(qc), static_cast<int>(nlist), d_, 1.0f,
                        queries + q0 * d_, d_, centroids, d_, 0.0f, s.data(), static_cast<int>(nlist));
            for (std::int64_t i = 0; i < qc; ++i) {
                const float* row = s.data() + i * nlist;
                for (std::int32_t l = 0; l < static_cast<std::int32_t>(nlist); ++l) order[static_cast<std::size_t>(l)] = l;
                auto better = [row](std::int32_t a, std::int32_t c) { return row[a] > row[c] || (row[a] == row[c] && a < c); };
                // the probes' order does not matter to the scan (a query's top-k is a set ranked at the end)
                std::nth_element(order.begin(), order.begin() + (nprobe - 1), order.end(), better);
                for (int j = 0; j < nprobe; ++j) {
                    ids[(q0 + i) * nprobe + j] = order[static_cast<std::size_t>(j)];
                    scores[(q0 + i) * nprobe + j] = row[order[static_cast<std::size_t>(j)]];
                }
            }
        }
    });
}

void IvfSearcher::search(std::int64_t m, const float* queries, int k, const AnnFilter& filter, std::int64_t* ids,
                         float* scores) const {
    const auto nlist = static_cast<std::int64_t>(ivf_.nlist);
    const int nprobe = static_cast<int>(std::clamp<std::int64_t>(static_cast<std::int64_t>(ivf_.nprobe), 1, nlist));
    std::vector<std::int64_t> cids(static_cast<std::size_t>(m * nprobe));
    std::vector<float> cdis(cids.size());
    const auto* flat = dynamic_cast<const faiss::IndexFlat*>(ivf_.quantizer);
    if (flat && nprobe > kHeapProbeLimit)
        coarse_by_selection(flat->get_xb(), m, queries, nprobe, cids.data(), cdis.data());
    else
        quantizer_->search(m, queries, nprobe, AnnFilter{}, cids.data(), cdis.data());

    Buckets b;   // counting sort of the pairs by list
    b.start.assign(static_cast<std::size_t>(nlist) + 1, 0);
    for (std::int64_t c : cids)
        if (c >= 0) ++b.start[static_cast<std::size_t>(c) + 1];
    for (std::int64_t l = 0; l < nlist; ++l) b.start[static_cast<std::size_t>(l) + 1] += b.start[static_cast<std::size_t>(l)];
    b.query.resize(static_cast<std::size_t>(b.start.back()));
    b.coarse.resize(b.query.size());
    {
        std::vector<std::int64_t> fill(b.start.begin(), b.start.end() - 1);
        for (std::int64_t i = 0; i < m; ++i)
            for (int j = 0; j < nprobe; ++j) {
                const std::int64_t c = cids[static_cast<std::size_t>(i * nprobe + j)];
                if (c < 0) continue;
                const auto at = static_cast<std::size_t>(fill[static_cast<std::size_t>(c)]++);
                b.query[at] = i;
                b.coarse[at] = cdis[static_cast<std::size_t>(i * nprobe + j)];
            }
    }
    // contiguous list ranges of about equal work (rows x probing queries), one per thread
    std::vector<double> work_before(static_cast<std::size_t>(nlist) + 1, 0.0);
    std::int64_t busy = 0;
    for (std::int64_t l = 0; l < nlist; ++l) {
        const double w = double(b.start[static_cast<std::size_t>(l) + 1] - b.start[static_cast<std::size_t>(l)]) *
                         double(lists_.list_size(static_cast<std::size_t>(l)));
        busy += w > 0;
        work_before[static_cast<std::size_t>(l) + 1] = work_before[static_cast<std::size_t>(l)] + w;
    }
    const int parts = static_cast<int>(std::max<std::int64_t>(1, std::min<std::int64_t>(thread_count(), busy)));
    std::vector<std::int64_t> cut(static_cast<std::size_t>(parts) + 1, nlist);
    cut[0] = 0;
    for (int t = 1; t < parts; ++t) {
        const double target = work_before.back() * t / parts;
        cut[static_cast<std::size_t>(t)] =
            std::lower_bound(work_before.begin(), work_before.end(), target) - work_before.begin();
    }
    std::vector<std::vector<TopK>> part(static_cast<std::size_t>(parts));
    BlasSingleThread single_blas;   // the sgemm kernel runs inside our threads
    parallel_for(parts, [&](std::int64_t t) {
        auto& tops = part[static_cast<std::size_t>(t)];
        tops.assign(static_cast<std::size_t>(m), TopK(k));
        scan_lists(b, cut[static_cast<std::size_t>(t)], cut[static_cast<std::size_t>(t) + 1], queries, filter, tops);
    });
    parallel_ranges(m, [&](std::int64_t i0, std::int64_t i1, int) {
        TopK all(k);
        for (std::int64_t i = i0; i < i1; ++i) {
            if (parts == 1) {
                part[0][static_cast<std::size_t>(i)].write(ids + i * k, scores + i * k);
                continue;
            }
            for (const auto& tops : part)
                for (const auto& it : tops[static_cast<std::size_t>(i)].heap) all.merge(it);
            all.write(ids + i * k, scores + i * k);
        }
    });
}

}  // namespace retro
