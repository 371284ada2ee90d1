// Implementation of hnsw_build.h. The steps of one insertion follow FAISS 1.7.3's HNSW.cpp (add_with_locks,
// greedy_update_nearest, search_neighbors_to_add, shrink_neighbor_list, add_link), written here against its public
// graph arrays; what differs is what a point sees: the graph as it was before its batch.
#include "index/hnsw_build.h"

#include <faiss/IndexHNSW.h>
#include <faiss/IndexIVF.h>
#include <faiss/IndexPreTransform.h>
#include <faiss/impl/DistanceComputer.h>
#include <faiss/impl/FaissAssert.h>
#include <faiss/impl/HNSW.h>
#include <faiss/utils/random.h>

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <memory>
#include <queue>
#include <string>
#include <typeinfo>
#include <vector>

#include "core/error.h"
#include "core/threads.h"

namespace retro {
namespace {

using faiss::HNSW;
using Id = HNSW::storage_idx_t;
using Closer = HNSW::NodeDistCloser;     // a max-heap by distance: top is the farthest
using Farther = HNSW::NodeDistFarther;   // a min-heap by distance: top is the nearest

// The graph minimises distances: an inner-product storage's similarity is negated, as FAISS's own insertion does.
struct GraphDistance final : faiss::DistanceComputer {
    std::unique_ptr<faiss::DistanceComputer> base;
    float sign;
    GraphDistance(const faiss::Index& storage)
        : base(storage.get_distance_computer()), sign(storage.metric_type == faiss::METRIC_INNER_PRODUCT ? -1.0f : 1.0f) {}
    void set_query(const float* x) override { base->set_query(x); }
    float operator()(idx_t i) override { return sign * (*base)(i); }
    float symmetric_dis(idx_t i, idx_t j) override { return sign * base->symmetric_dis(i, j); }
};

// Which points a walk has seen: a mark per point, the walk's number (a new walk needs no clearing).
class Visited {
public:
    explicit Visited(std::size_t n) : mark_(n, 0) {}
    bool seen(Id i) {   // marks it
        if (mark_[static_cast<std::size_t>(i)] == walk_) return true;
        mark_[static_cast<std::size_t>(i)] = walk_;
        return false;
    }
    void next_walk() {
        if (++walk_ == 0) {
            std::fill(mark_.begin(), mark_.end(), 0);
            walk_ = 1;
        }
    }

private:
    std::vector<std::uint8_t> mark_;
    std::uint8_t walk_ = 1;
};

// On `level`, from `nearest`, to the nearest point by moving to a nearer neighbour while there is one.
void greedy_descent(const HNSW& g, faiss::DistanceComputer& dis, int level, Id& nearest, float& d_nearest) {
    for (;;) {
        const Id was = nearest;
        std::size_t begin, end;
        g.neighbor_range(nearest, level, &begin, &end);
        for (std::size_t i = begin; i < end; ++i) {
            const Id v = g.neighbors[i];
            if (v < 0) break;
            const float d = dis(v);
            if (d < d_nearest) {
                nearest = v;
                d_nearest = d;
            }
        }
        if (nearest == was) return;
    }
}

// The efConstruction nearest points on `level` found by a best-first walk from `entry` (a candidate is expanded while
// it is nearer than the farthest kept).
std::priority_queue<Closer> search_layer(const HNSW& g, faiss::DistanceComputer& dis, Id entry, float d_entry, int level,
                                         Visited& visited) {
    std::priority_queue<Closer> kept;
    std::priority_queue<Farther> candidates;
    candidates.emplace(d_entry, entry);
    kept.emplace(d_entry, entry);
    visited.seen(entry);
    const std::size_t ef = static_cast<std::size_t>(g.efConstruction);
    while (!candidates.empty()) {
        const Farther c = candidates.top();
        if (c.d > kept.top().d) break;
        candidates.pop();
        std::size_t begin, end;
        g.neighbor_range(c.id, level, &begin, &end);
        for (std::size_t i = begin; i < end; ++i) {
            const Id v = g.neighbors[i];
            if (v < 0) break;
            if (visited.seen(v)) continue;
            const float d = dis(v);
            if (kept.size() < ef || kept.top().d > d) {
                kept.emplace(d, v);
                candidates.emplace(d, v);
                if (kept.size() > ef) kept.pop();
            }
        }
    }
    visited.next_walk();
    return kept;
}

// At most `max_size` of `found` (FAISS's heuristic, HNSW::shrink_neighbor_list: nearest first, a point kept only where
// it is nearer to the query than to every point kept before it); all of them where fewer. In the order FAISS writes a
// list: farthest first.
std::vector<Id> prune(faiss::DistanceComputer& dis, std::priority_queue<Closer> found, std::size_t max_size) {
    std::vector<Id> out;
    if (found.size() < max_size) {
        out.reserve(found.size());
        while (!found.empty()) {
            out.push_back(found.top().id);
            found.pop();
        }
        return out;
    }
    std::priority_queue<Farther> by_nearest;
    while (!found.empty()) {
        by_nearest.emplace(found.top().d, found.top().id);
        found.pop();
    }
    std::vector<Farther> kept;
    HNSW::shrink_neighbor_list(dis, by_nearest, kept, static_cast<int>(max_size));
    std::priority_queue<Closer> back;
    for (const Farther& k : kept) back.emplace(k.d, k.id);
    out.reserve(back.size());
    while (!back.empty()) {
        out.push_back(back.top().id);
        back.pop();
    }
    return out;
}

// `dest` joins the list of `src` on `level`: in a free slot, or where the list is full, the list and `dest` pruned
// to its size (FAISS's add_link).
void add_link(HNSW& g, faiss::DistanceComputer& dis, Id src, Id dest, int level) {
    std::size_t begin, end;
    g.neighbor_range(src, level, &begin, &end);
    if (g.neighbors[end - 1] == -1) {
        std::size_t i = end;
        while (i > begin && g.neighbors[i - 1] == -1) --i;
        g.neighbors[i] = dest;
        return;
    }
    std::priority_queue<Closer> all;
    all.emplace(dis.symmetric_dis(src, dest), dest);
    for (std::size_t i = begin; i < end; ++i) all.emplace(dis.symmetric_dis(src, g.neighbors[i]), g.neighbors[i]);
    const std::vector<Id> list = prune(dis, std::move(all), end - begin);
    std::size_t i = begin;
    for (const Id v : list) g.neighbors[i++] = v;
    while (i < end) g.neighbors[i++] = -1;
}

// A link a batch's point made that its target must return: `dest` gains `src` on `level`. `order`: src's place in
// the batch, which fixes the order in which dest takes its new links.
struct BackLink {   // (16 bytes: a batch is at most 2 % of an index's points, far below 2^31)
    Id dest;
    int level;
    std::int32_t order;
    Id src;
};

// One thread's tools: a distance computer over the storage and a visited table.
struct Scratch {
    GraphDistance dis;
    Visited visited;
    Scratch(const faiss::Index& storage, std::size_t n) : dis(storage), visited(n) {}
};

// Inserts `points` (all of one level, none in the graph yet) into the graph as it stands.
void insert_batch(HNSW& g, const std::vector<Id>& points, const float* x, Id n0, int d, std::vector<std::unique_ptr<Scratch>>& scratch) {
    const std::int64_t m = static_cast<std::int64_t>(points.size());
    std::vector<std::vector<std::vector<Id>>> links(points.size());   // [point][level]: its own list
    const Id entry = g.entry_point;
    const int top = g.max_level;
    // 1. each point's links, found in the graph as it was before the batch (read only: any thread count, the same)
    parallel_ranges(m, [&](std::int64_t begin, std::int64_t end, int thread) {
        Scratch& s = *scratch[static_cast<std::size_t>(thread)];
        for (std::int64_t k = begin; k < end; ++k) {
            const Id p = points[static_cast<std::size_t>(k)];
            const int level = g.levels[static_cast<std::size_t>(p)] - 1;
            s.dis.set_query(x + static_cast<std::size_t>(p - n0) * static_cast<std::size_t>(d));
            Id nearest = entry;
            float d_nearest = s.dis(nearest);
            for (int l = top; l > level; --l) greedy_descent(g, s.dis, l, nearest, d_nearest);
            auto& own = links[static_cast<std::size_t>(k)];
            own.resize(static_cast<std::size_t>(std::min(level, top) + 1));
            // every level's walk starts at the descent's nearest (as FAISS 1.7.3's add_with_locks: not at the level
            // above's nearest, which would change the graph)
            for (int l = std::min(level, top); l >= 0; --l)
                own[static_cast<std::size_t>(l)] = prune(s.dis, search_layer(g, s.dis, nearest, d_nearest, l, s.visited),
                                                         static_cast<std::size_t>(g.nb_neighbors(l)));
        }
    });
    // 2. each point's own lists (slots only it has), and the links back, grouped by the point that takes them
    std::vector<BackLink> back;
    for (std::int64_t k = 0; k < m; ++k) {
        const Id p = points[static_cast<std::size_t>(k)];
        const auto& own = links[static_cast<std::size_t>(k)];
        for (int l = 0; l < static_cast<int>(own.size()); ++l) {
            std::size_t begin, end;
            g.neighbor_range(p, l, &begin, &end);
            std::size_t i = begin;
            for (const Id v : own[static_cast<std::size_t>(l)]) {
                g.neighbors[i++] = v;
                back.push_back({v, l, static_cast<std::int32_t>(k), p});
            }
        }
    }
    std::sort(back.begin(), back.end(), [](const BackLink& a, const BackLink& b) {
        return a.dest != b.dest ? a.dest < b.dest : a.level != b.level ? a.level < b.level : a.order < b.order;
    });
    std::vector<std::size_t> groups;   // where each dest's links start
    for (std::size_t i = 0; i < back.size(); ++i)
        if (i == 0 || back[i].dest != back[i - 1].dest) groups.push_back(i);
    groups.push_back(back.size());
    // 3. the links back, a target's all by one thread in a fixed order (its list is only its own to change)
    parallel_ranges(static_cast<std::int64_t>(groups.size()) - 1, [&](std::int64_t begin, std::int64_t end, int thread) {
        Scratch& s = *scratch[static_cast<std::size_t>(thread)];
        for (std::int64_t gi = begin; gi < end; ++gi)
            for (std::size_t i = groups[static_cast<std::size_t>(gi)]; i < groups[static_cast<std::size_t>(gi) + 1]; ++i)
                add_link(g, s.dis, back[i].dest, back[i].src, back[i].level);
    });
}

}  // namespace

void hnsw_add_deterministic(faiss::IndexHNSW& index, std::int64_t n, const float* x, double batch_share) {
    FAISS_THROW_IF_NOT_MSG(index.storage, "an IndexHNSW without storage");
    FAISS_THROW_IF_NOT(index.is_trained);
    // node ids are FAISS's int (storage_idx_t): index_check_sizes refuses such a graph before any work
    FAISS_THROW_IF_NOT_MSG(n >= 0 && index.ntotal + n <= std::numeric_limits<Id>::max(),
                           "an HNSW graph of more than 2^31 - 1 nodes");
    HNSW& g = index.hnsw;
    const Id n0 = static_cast<Id>(index.ntotal);
    index.storage->add(n, x);
    index.ntotal = index.storage->ntotal;
    if (n == 0) return;
    // the levels: drawn by the graph's own generator (or set beforehand), as FAISS's add draws them
    g.prepare_level_tab(static_cast<std::size_t>(n), g.levels.size() == static_cast<std::size_t>(index.ntotal));
    // FAISS's order: the points by level, highest first, each level's points shuffled by a generator of its own
    int levels = 0;
    for (Id i = n0; i < n0 + n; ++i) levels = std::max(levels, g.levels[static_cast<std::size_t>(i)]);
    std::vector<std::vector<Id>> by_level(static_cast<std::size_t>(levels));
    for (Id i = n0; i < n0 + n; ++i) by_level[static_cast<std::size_t>(g.levels[static_cast<std::size_t>(i)] - 1)].push_back(i);
    faiss::RandomGenerator shuffle(789);
    const int threads = thread_count();
    std::vector<std::unique_ptr<Scratch>> scratch;
    for (int t = 0; t < threads; ++t)
        scratch.push_back(std::make_unique<Scratch>(*index.storage, static_cast<std::size_t>(index.ntotal)));
    // a batch is at most the graph's size (early on: each point sees at least half the graph) and at most 2 % of the
    // points (later: it misses as link targets at most 2 % of the graph, its batch's)
    const std::int64_t cap = std::max<std::int64_t>(1, static_cast<std::int64_t>(static_cast<double>(index.ntotal) * batch_share));
    std::int64_t in_graph = n0;
    for (int level = levels - 1; level >= 0; --level) {
        std::vector<Id>& order = by_level[static_cast<std::size_t>(level)];
        for (std::size_t j = 0; j < order.size(); ++j)
            std::swap(order[j], order[j + static_cast<std::size_t>(shuffle.rand_int(static_cast<int>(order.size() - j)))]);
        std::size_t at = 0;
        while (at < order.size()) {
            if (g.entry_point < 0) {   // the graph's first point: its entry, with no one to link to
                g.entry_point = order[at++];
                g.max_level = level;
                ++in_graph;
                continue;
            }
            // a point above the graph's top level goes alone: the rest of its level then link to it up there
            const std::int64_t size = level > g.max_level
                                          ? 1
                                          : std::min<std::int64_t>({static_cast<std::int64_t>(order.size() - at), cap,
                                                                    batch_share > 0 ? std::max<std::int64_t>(1, in_graph) : 1});
            const std::vector<Id> batch(order.begin() + static_cast<std::ptrdiff_t>(at),
                                        order.begin() + static_cast<std::ptrdiff_t>(at) + size);
            insert_batch(g, batch, x, n0, static_cast<int>(index.d), scratch);
            if (level > g.max_level) {
                g.max_level = level;
                g.entry_point = batch.front();
            }
            at += static_cast<std::size_t>(size);
            in_graph += size;
        }
    }
}

namespace {

// An IndexHNSWFlat whose add builds the graph in batches; written by write_index as the IndexHNSWFlat it is.
struct BatchedHNSWFlat final : faiss::IndexHNSWFlat {
    explicit BatchedHNSWFlat(const faiss::IndexHNSWFlat& like)
        : faiss::IndexHNSWFlat(static_cast<int>(like.d), like.hnsw.nb_neighbors(1), like.metric_type) {
        hnsw = like.hnsw;   // its settings (efConstruction, efSearch, level probabilities, generator)
        verbose = like.verbose;
    }
    void add(idx_t n, const float* x) override { hnsw_add_deterministic(*this, n, x); }
};

// The batched form of `index` where it is an empty IndexHNSWFlat (nullptr otherwise).
faiss::Index* batched(faiss::Index* index) {
    if (!index || typeid(*index) != typeid(faiss::IndexHNSWFlat) || index->ntotal != 0) return nullptr;
    const auto* h = static_cast<faiss::IndexHNSWFlat*>(index);
    if (!h->storage || h->hnsw.levels.size() != 0) return nullptr;
    return new BatchedHNSWFlat(*h);
}

}  // namespace

int install_batched_hnsw(std::unique_ptr<faiss::Index>& index) {
    if (const char* env = std::getenv("RETRO_HNSW_BUILD"); env && *env) {
        const std::string v(env);
        if (v == "faiss") return 0;
        if (v != "batches") user_error_in("RETRO_HNSW_BUILD", "is '" + v + "'; expected batches or faiss", "unset it");
    }
    if (faiss::Index* b = batched(index.get())) {
        index.reset(b);
        return 1;
    }
    // the HNSW behind a pre-transform, or an IVF's HNSW quantizer (filled by FAISS's own IVF training, through add)
    faiss::Index** slot = nullptr;
    bool owned = false;
    if (auto* pt = dynamic_cast<faiss::IndexPreTransform*>(index.get())) {
        if (auto* ivf = dynamic_cast<faiss::IndexIVF*>(pt->index)) {
            slot = &ivf->quantizer;
            owned = ivf->own_fields;
        } else {
            slot = &pt->index;
            owned = pt->own_fields;
        }
    } else if (auto* ivf = dynamic_cast<faiss::IndexIVF*>(index.get())) {
        slot = &ivf->quantizer;
        owned = ivf->own_fields;
    }
    if (!slot || !owned) return 0;
    faiss::Index* b = batched(*slot);
    if (!b) return 0;
    delete *slot;
    *slot = b;
    return 1;
}

bool hnsw_is_batched(const faiss::Index& index) { return typeid(index) == typeid(BatchedHNSWFlat); }

std::string hnsw_builder_of(const faiss::Index& index) {
    const faiss::Index* at = &index;
    if (const auto* pt = dynamic_cast<const faiss::IndexPreTransform*>(at)) at = pt->index;
    if (const auto* ivf = dynamic_cast<const faiss::IndexIVF*>(at)) at = ivf->quantizer;
    if (!at || !dynamic_cast<const faiss::IndexHNSW*>(at)) return "";
    return hnsw_is_batched(*at) ? "batches" : "faiss";
}

}  // namespace retro
