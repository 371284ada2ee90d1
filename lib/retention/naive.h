// Naive retention, the reference (fla naive.py): materialises the T×T decay mask
// D[n,m] = 2^((n-m)·log2 gamma)·[n>=m] in F, then O = scale·(QK^T ⊙ D)V (+ initial-state term), RETENTION.md §1, §6.
// Like fla it exponentiates positive exponents above the diagonal, so long T overflows to inf·0 = NaN; it reports it.
#pragma once
#include <cstdint>

#include "retention/decay.h"

namespace retro::retention {

struct NaiveReport {
    std::int64_t nonfinite = 0;   // non-finite values written to the outputs (o/ht, or the gradients)
};

// o: [B,T,H,V]; h0 (nullable) and ht (nullable): [B,H,K,V].
template <typename F>
NaiveReport naive_forward(const Shape& s, const Options& opt, const F* q, const F* k, const F* v,
                          const F* h0, F* o, F* ht);

// dO: [B,T,H,V], dht (nullable). Writes (=) dq, dk, dv and dh0 (nullable).
template <typename F>
NaiveReport naive_backward(const Shape& s, const Options& opt, const F* q, const F* k, const F* v,
                           const F* h0, const F* dO, const F* dht, F* dq, F* dk, F* dv, F* dh0);

}  // namespace retro::retention
