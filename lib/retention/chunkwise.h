// Chunkwise retention (chunk C, any size; the last chunk may be shorter, L = its length, j = position in it):
// O_c = scale[(Q_c K_c^T ⊙ D_c)V_c + (Q_c S_prev) ⊙ xi], xi_j = gamma^(j+1); S = gamma^L S_prev + K_c^T(V_c ⊙ zeta),
// zeta_j = gamma^(L-1-j) (RETENTION.md §1). Backward is chunkwise too: intra-chunk terms per chunk, then state sweeps (§6).
#pragma once
#include "retention/decay.h"

namespace retro::retention {

// o: [B,T,H,V]; h0, ht nullable [B,H,K,V]; chunk size from opt.chunk_size.
template <typename F>
void chunkwise_forward(const Shape& s, const Options& opt, const F* q, const F* k, const F* v, const F* h0,
                       F* o, F* ht);

// Writes (=) dq, dk, dv and dh0 (nullable); dht nullable. Gradients wrt the states S_c are swept backwards:
// G_{c-1} = gamma^L G_c + scale (Q_c ⊙ xi)^T dO_c from G = dht; dK_c += (V_c ⊙ zeta) G_c^T, dV_c += (K_c ⊙ zeta) G_c.
template <typename F>
void chunkwise_backward(const Shape& s, const Options& opt, const F* q, const F* k, const F* v, const F* h0,
                        const F* dO, const F* dht, F* dq, F* dk, F* dv, F* dh0);

}  // namespace retro::retention
