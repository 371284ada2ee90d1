// Implementation of hnsw_search.h. Distances are negated inner products (smaller is better), as
// FAISS's NegativeDistanceComputer makes them, so the walk reads like FAISS's L2 walk.
#include "index/hnsw_search.h"

#include <faiss/IndexFlat.h>
#include <faiss/IndexHNSW.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "core/error.h"
#include "core/log.h"
#include "core/memory_budget.h"
#include "core/threads.h"
#include "index/simd_dot.h"

namespace retro {
namespace {

using storage_idx_t = faiss::HNSW::storage_idx_t;

// Marks of visited nodes, cleared in O(1) per query by moving to the next generation.
class VisitedTable {
public:
    explicit VisitedTable(std::size_t n) : mark_(n, 0) {}
    bool test_and_set(storage_idx_t v) {
        std::uint8_t& m = mark_[static_cast<std::size_t>(v)];
        if (m == gen_) return true;
        m = gen_;
        return false;
    }
    void next_query() {
        if (++gen_ == 0) {   // 255 queries later: wipe and start again at 1
            std::fill(mark_.begin(), mark_.end(), 0);
            gen_ = 1;
        }
    }

private:
    std::vector<std::uint8_t> mark_;
    std::uint8_t gen_ = 1;
};

// FAISS's HNSW::MinimaxHeap: at most n candidates in a max-heap on (distance, id); popping the
// minimum leaves the entry in place with id -1, so count_below also counts candidates already
// processed (the stop rule depends on that). The heap moves are FAISS's heap_push / heap_pop
// (1-based, ties by id), so equal distances are handled as FAISS handles them.
class MinimaxHeap {
public:
    explicit MinimaxHeap(int n) : n_(n), ids_(static_cast<std::size_t>(n) + 1), dis_(static_cast<std::size_t>(n) + 1) {}
    int valid() const { return nvalid_; }
    // false when the heap is full and v is not below its maximum (the candidate is not kept)
    bool push(storage_idx_t id, float v) {
        if (k_ == n_) {
            if (v >= dis_[1]) return false;
            if (ids_[1] != -1) --nvalid_;
            pop_max();
        }
        std::size_t i = static_cast<std::size_t>(++k_);
        while (i > 1) {
            const std::size_t parent = i >> 1;
            if (!above(v, dis_[parent], id, ids_[parent])) break;
            dis_[i] = dis_[parent];
            ids_[i] = ids_[parent];
            i = parent;
        }
        dis_[i] = v;
        ids_[i] = id;
        ++nvalid_;
        return true;
    }
    // The valid entry of smallest distance, scanning down from the last slot as FAISS does (a tie
    // keeps the later slot).
    storage_idx_t pop_min(float& vmin) {
        int i = k_;
        while (i >= 1 && ids_[static_cast<std::size_t>(i)] == -1) --i;
        if (i < 1) return -1;
        int imin = i;
        vmin = dis_[static_cast<std::size_t>(i)];
        for (--i; i >= 1; --i)
            if (ids_[static_cast<std::size_t>(i)] != -1 && dis_[static_cast<std::size_t>(i)] < vmin)
                vmin = dis_[static_cast<std::size_t>(i)], imin = i;
        const storage_idx_t id = ids_[static_cast<std::size_t>(imin)];
        ids_[static_cast<std::size_t>(imin)] = -1;
        --nvalid_;
        return id;
    }
    int count_below(float thresh) const {
        int c = 0;
        for (int i = 1; i <= k_; ++i) c += dis_[static_cast<std::size_t>(i)] < thresh;
        return c;
    }
    void clear() { k_ = nvalid_ = 0; }

private:
    // max-heap order with ties by id: a sits above b
    static bool above(float a, float b, storage_idx_t ia, storage_idx_t ib) { return a > b || (a == b && ia > ib); }
    // removes the top: the last slot's entry sifts down from the root (FAISS's heap_pop)
    void pop_max() {
        const std::size_t k = static_cast<std::size_t>(k_);
        const float v = dis_[k];
        const storage_idx_t id = ids_[k];
        std::size_t i = 1;
        for (;;) {
            const std::size_t c1 = i << 1, c2 = c1 + 1;
            if (c1 > k) break;
            const std::size_t c = (c2 == k + 1 || above(dis_[c1], dis_[c2], ids_[c1], ids_[c2])) ? c1 : c2;
            if (above(v, dis_[c], id, ids_[c])) break;
            dis_[i] = dis_[c];
            ids_[i] = ids_[c];
            i = c;
        }
        dis_[i] = dis_[k];
        ids_[i] = ids_[k];
        --k_;
    }
    int n_, k_ = 0, nvalid_ = 0;
    std::vector<storage_idx_t> ids_;   // slots 1..k_
    std::vector<float> dis_;
};

// The k nearest found so far: a max-heap on (distance, id), so the worst is on top.
class ResultHeap {
public:
    explicit ResultHeap(int k) : k_(k) { items_.reserve(static_cast<std::size_t>(k)); }
    void offer(float dis, storage_idx_t id) {
        if (static_cast<int>(items_.size()) < k_) {
            items_.push_back({dis, id});
            std::push_heap(items_.begin(), items_.end(), worse_first);
        } else if (worse_first({dis, id}, items_.front())) {   // strictly better than the worst kept
            std::pop_heap(items_.begin(), items_.end(), worse_first);
            items_.back() = {dis, id};
            std::push_heap(items_.begin(), items_.end(), worse_first);
        }
    }
    // Recomputes every kept distance with `exact` (the fp32 rows), then writes the k best.
    template <typename Exact>
    void rescore_write(int k, std::int64_t* ids, float* scores, Exact exact) {
        for (auto& it : items_) it.dis = exact(it.id);
        write(k, ids, scores);
    }
    // Best first (largest inner product, ties by smaller id), padded with -1 / -inf.
    void write(int k, std::int64_t* ids, float* scores) {
        std::sort(items_.begin(), items_.end(), worse_first);
        for (int i = 0; i < k; ++i) {
            const bool have = i < static_cast<int>(items_.size());
            ids[i] = have ? items_[static_cast<std::size_t>(i)].id : -1;
            scores[i] = have ? -items_[static_cast<std::size_t>(i)].dis : -std::numeric_limits<float>::infinity();
        }
        items_.clear();
    }

private:
    struct Item {
        float dis;
        storage_idx_t id;
    };
    // heap order: a before b when a is better (smaller distance, then smaller id)
    static bool worse_first(const Item& a, const Item& b) { return a.dis < b.dis || (a.dis == b.dis && a.id < b.id); }
    int k_;
    std::vector<Item> items_;
};

struct Walk {
    const faiss::HNSW& hnsw;
    const float* rows;
    int d;
    const std::uint16_t* half = nullptr;   // fp16 copy of the rows the walk reads, or null
    const float* q = nullptr;

    float dist(storage_idx_t v) const {
        return half ? -dot_f16(q, half + static_cast<std::int64_t>(v) * d, d) : -dot_f32(q, rows + static_cast<std::int64_t>(v) * d, d);
    }
    float exact(storage_idx_t v) const { return -dot_f32(q, rows + static_cast<std::int64_t>(v) * d, d); }
    const storage_idx_t* neighbours(storage_idx_t v, int level, const storage_idx_t*& end) const {
        const std::size_t o = hnsw.offsets[static_cast<std::size_t>(v)];
        end = hnsw.neighbors.data() + o + hnsw.cum_nneighbor_per_level[static_cast<std::size_t>(level) + 1];
        return hnsw.neighbors.data() + o + hnsw.cum_nneighbor_per_level[static_cast<std::size_t>(level)];
    }
    void prefetch_neighbours(storage_idx_t v) const {
        const storage_idx_t* end;
        const char* p = reinterpret_cast<const char*>(neighbours(v, 0, end));
        for (const char* e = reinterpret_cast<const char*>(end); p < e; p += 64) __builtin_prefetch(p, 0, 3);
    }
    // FAISS's greedy_update_nearest: move to the best neighbour until none is better.
    void greedy(int level, storage_idx_t& nearest, float& d_nearest) const {
        for (;;) {
            const storage_idx_t prev = nearest;
            const storage_idx_t* end;
            for (const storage_idx_t* p = neighbours(nearest, level, end); p < end && *p >= 0; ++p) {
                const float dv = dist(*p);
                if (dv < d_nearest) nearest = *p, d_nearest = dv;
            }
            if (nearest == prev) return;
        }
    }
};

}  // namespace

std::unique_ptr<HnswSearcher> HnswSearcher::create(const faiss::IndexHNSW& index, std::string& why, bool fp16_walk) {
    const auto* flat = dynamic_cast<const faiss::IndexFlat*>(index.storage);
    if (!flat) return why = "HNSW storage is not Flat", nullptr;
    if (index.metric_type != faiss::METRIC_INNER_PRODUCT || flat->metric_type != faiss::METRIC_INNER_PRODUCT)
        return why = "HNSW index is not inner product", nullptr;
    if (index.hnsw.upper_beam != 1) return why = "HNSW upper_beam != 1", nullptr;
    if (!index.hnsw.search_bounded_queue) return why = "HNSW unbounded queue", nullptr;
    return std::unique_ptr<HnswSearcher>(new HnswSearcher(index, fp16_walk));
}

void HnswSearcher::search(std::int64_t m, const float* queries, int k, const AnnFilter& filter, std::int64_t* ids,
                          float* scores) const {
    RETRO_CHECK(index_.storage->ntotal == index_.ntotal, "HNSW storage holds ", index_.storage->ntotal, " vectors, the graph ",
                index_.ntotal);
    const faiss::HNSW& hnsw = index_.hnsw;
    const int d = static_cast<int>(index_.d);
    const int ef_search = hnsw.efSearch;
    const int ef = std::max(ef_search, k);
    const bool dis_check = hnsw.check_relative_distance;
    const float* rows_ = static_cast<const faiss::IndexFlat*>(index_.storage)->get_xb();   // read now: add() may move it
    // the fp16 copy costs n * d * 2 bytes: walk in fp32 instead where it would take over half of what is free
    if (fp16_walk_ && half_.size() != static_cast<std::size_t>(index_.ntotal * d) &&
        static_cast<double>(index_.ntotal) * d * 2 > 0.5 * static_cast<double>(memory_available_bytes())) {
        log_debug("hnsw: too little free memory for the fp16 copy of the rows: walking in fp32");
        fp16_walk_ = false;
        half_.clear();
        half_.shrink_to_fit();
    }
    if (fp16_walk_ && half_.size() != static_cast<std::size_t>(index_.ntotal * d)) {   // first search, or the index grew
        half_.resize(static_cast<std::size_t>(index_.ntotal * d));
        parallel_ranges(index_.ntotal, [&](std::int64_t r0, std::int64_t r1, int) {
            to_f16(rows_ + r0 * d, (r1 - r0) * d, half_.data() + r0 * d);
        });
    }
    const std::uint16_t* half = fp16_walk_ ? half_.data() : nullptr;
    parallel_ranges(m, [&](std::int64_t q0, std::int64_t q1, int) {
        VisitedTable visited(static_cast<std::size_t>(index_.ntotal));
        MinimaxHeap cand(ef);
        ResultHeap results(half ? std::max(k, ef) : k);
        Walk walk{hnsw, rows_, d, half};
        std::vector<storage_idx_t> fresh;   // one step's unvisited neighbours
        std::vector<float> fresh_dis;
        for (std::int64_t i = q0; i < q1; ++i) {
            walk.q = queries + i * d;
            const std::int64_t qdoc = filter.query_docs ? filter.query_docs[i] : 0;
            auto keep = [&](storage_idx_t v) { return !filter.base_docs || filter.base_docs[v] != qdoc; };
            if (hnsw.entry_point < 0) {
                results.write(k, ids + i * k, scores + i * k);
                continue;
            }
            storage_idx_t nearest = hnsw.entry_point;
            float d_nearest = walk.dist(nearest);
            for (int level = hnsw.max_level; level >= 1; --level) walk.greedy(level, nearest, d_nearest);
            cand.clear();
            cand.push(nearest, d_nearest);
            if (keep(nearest)) results.offer(d_nearest, nearest);
            visited.test_and_set(nearest);
            int steps = 0;
            while (cand.valid() > 0) {
                float d0 = 0;
                const storage_idx_t v0 = cand.pop_min(d0);
                if (dis_check && cand.count_below(d0) >= ef_search) break;
                fresh.clear();
                const storage_idx_t* end;
                for (const storage_idx_t* p = walk.neighbours(v0, 0, end); p < end && *p >= 0; ++p)
                    if (!visited.test_and_set(*p)) {
                        fresh.push_back(*p);
                        __builtin_prefetch(hnsw.offsets.data() + *p);   // read below if it becomes a candidate
                    }
                const int nf = static_cast<int>(fresh.size());
                fresh_dis.resize(static_cast<std::size_t>(nf));
                int j = 0;
                if (half) {
                    auto hrow = [&](int u) { return half + static_cast<std::int64_t>(fresh[static_cast<std::size_t>(u)]) * d; };
                    for (int u = 0; u < std::min(nf, 4); ++u) prefetch_row(reinterpret_cast<const float*>(hrow(u)), d / 2);
                    for (; j + 4 <= nf; j += 4) {
                        for (int u = j + 4; u < std::min(nf, j + 8); ++u) prefetch_row(reinterpret_cast<const float*>(hrow(u)), d / 2);
                        dot4_f16(walk.q, hrow(j), hrow(j + 1), hrow(j + 2), hrow(j + 3), d, fresh_dis.data() + j);
                    }
                    for (; j < nf; ++j) fresh_dis[static_cast<std::size_t>(j)] = dot_f16(walk.q, hrow(j), d);
                } else {
                auto row = [&](int u) { return rows_ + static_cast<std::int64_t>(fresh[static_cast<std::size_t>(u)]) * d; };
                for (int u = 0; u < std::min(nf, 4); ++u) prefetch_row(row(u), d);
                for (; j + 4 <= nf; j += 4) {
                    for (int u = j + 4; u < std::min(nf, j + 8); ++u) prefetch_row(row(u), d);
                    dot4_f32(walk.q, row(j), row(j + 1), row(j + 2), row(j + 3), d, fresh_dis.data() + j);
                }
                for (; j < nf; ++j) fresh_dis[static_cast<std::size_t>(j)] = dot_f32(walk.q, row(j), d);
                }
                for (int u = 0; u < nf; ++u) {
                    const storage_idx_t v = fresh[static_cast<std::size_t>(u)];
                    const float dv = -fresh_dis[static_cast<std::size_t>(u)];
                    if (keep(v)) results.offer(dv, v);
                    // the walk is bound by memory latency: start loading a new candidate's neighbour
                    // list now, several steps before it may be expanded
                    if (cand.push(v, dv)) walk.prefetch_neighbours(v);
                }
                if (!dis_check && ++steps > ef_search) break;
            }
            if (half)
                results.rescore_write(k, ids + i * k, scores + i * k, [&](storage_idx_t v) { return walk.exact(v); });
            else
                results.write(k, ids + i * k, scores + i * k);
            visited.next_query();
        }
    });
}

}  // namespace retro
