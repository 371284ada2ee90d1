// Parallel retention (quadratic; training): O = scale·(QK^T ⊙ D)V + scale·(Q ⊙ xi)S0, D[n,m] = gamma^(n-m)·[n>=m],
// xi_n = gamma^(n+1), ht = gamma^T S0 + K^T(V ⊙ zeta), zeta_m = gamma^(T-1-m) (RETENTION.md §1). Backward (§6):
// dV = A^T dO, dP = scale(dO V^T ⊙ D), dQ = dP K, dK = dP^T Q, plus the h0/dht terms. Tiled in 64-token blocks.
#pragma once
#include "retention/decay.h"

namespace retro::retention {

// o: [B,T,H,V]; h0, ht nullable [B,H,K,V].
template <typename F>
void parallel_forward(const Shape& s, const Options& opt, const F* q, const F* k, const F* v, const F* h0,
                      F* o, F* ht);

// Writes (=) dq, dk, dv and dh0 (nullable); dht nullable.
template <typename F>
void parallel_backward(const Shape& s, const Options& opt, const F* q, const F* k, const F* v, const F* h0,
                       const F* dO, const F* dht, F* dq, F* dk, F* dv, F* dh0);

// Decoding without a state: the output of the last position only, attending over the whole prefix
// (k, v: [B,T,H,*], q_last: [B,1,H,K], o_last: [B,1,H,V]); equals row T-1 of parallel_forward.
template <typename F>
void parallel_last_row(const Shape& s, const Options& opt, const F* q_last, const F* k, const F* v,
                       const F* h0, F* o_last);

}  // namespace retro::retention
