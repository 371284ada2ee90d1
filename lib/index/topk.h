// The k best (score, id) pairs of one query, for exact search (exact_search.h). Order: higher score
// first, equal scores by smaller id (the oracle's tie rule). A min-heap keyed on that order, so
// heap[0] is the worst kept pair and threshold() is the score a candidate must beat.
// Candidates of one query arrive in increasing id order, so "beats" can be a strict score compare:
// an equal score has a larger id than everything kept and loses the tie.
#pragma once
#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

namespace retro {

struct TopK {
    struct Item {
        float score;
        std::int64_t id;
    };
    // true when a ranks before b: higher score, or equal score and smaller id
    static bool better(const Item& a, const Item& b) { return a.score > b.score || (a.score == b.score && a.id < b.id); }

    explicit TopK(int k_) : k(k_) { heap.reserve(static_cast<std::size_t>(k_)); }

    // -inf until k are kept, then the k-th best score
    float threshold() const { return thr; }

    // Keeps (s, id) when s beats the threshold. ids must increase from call to call.
    void push(float s, std::int64_t id) {
        if (!(s > thr)) return;
        if (static_cast<int>(heap.size()) < k) {
            heap.push_back({s, id});
            std::push_heap(heap.begin(), heap.end(), better);
            if (static_cast<int>(heap.size()) == k) thr = heap.front().score;
            return;
        }
        std::pop_heap(heap.begin(), heap.end(), better);
        heap.back() = {s, id};
        std::push_heap(heap.begin(), heap.end(), better);
        thr = heap.front().score;
    }

    // Adds a pair in any id order (merging the lists of disjoint base ranges, or scanning IVF lists,
    // whose ids are not sorted): an equal score with a smaller id than the worst kept pair wins.
    void push_any(float s, std::int64_t id) { merge({s, id}); }
    void merge(const Item& it) {
        if (static_cast<int>(heap.size()) < k) {
            heap.push_back(it);
            std::push_heap(heap.begin(), heap.end(), better);
        } else if (better(it, heap.front())) {
            std::pop_heap(heap.begin(), heap.end(), better);
            heap.back() = it;
            std::push_heap(heap.begin(), heap.end(), better);
        }
        if (static_cast<int>(heap.size()) == k) thr = heap.front().score;
    }

    // Writes the k pairs best first, padded with id -1 / score -inf, and empties the list.
    void write(std::int64_t* ids, float* scores) {
        std::sort(heap.begin(), heap.end(), better);
        for (int i = 0; i < k; ++i) {
            bool have = i < static_cast<int>(heap.size());
            ids[i] = have ? heap[static_cast<std::size_t>(i)].id : -1;
            scores[i] = have ? heap[static_cast<std::size_t>(i)].score : -std::numeric_limits<float>::infinity();
        }
        clear();
    }
    void clear() {
        heap.clear();
        thr = -std::numeric_limits<float>::infinity();
    }

    std::vector<Item> heap;
    int k;
    float thr = -std::numeric_limits<float>::infinity();
};

}  // namespace retro
