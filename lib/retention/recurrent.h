// Recurrent retention (decoding; constant memory per token): S_n = gamma S_{n-1} + k_n^T v_n,
// o_n = scale q_n S_n, S_{-1} = h0, ht = S_{T-1} (RETENTION.md §1). Backward as fla's fused_recurrent:
// dq_n = scale S_n do_n; G_n = gamma G_{n+1} + scale q_n do_n^T from dht; dk_n = G_n v_n, dv_n = G_n^T k_n, dh0 = gamma G_0 (§6).
#pragma once
#include "retention/decay.h"

namespace retro::retention {

// o: [B,T,H,V]; h0, ht nullable [B,H,K,V]. With T = 1 and h0 = ht = the cache this is one decode step.
template <typename F>
void recurrent_forward(const Shape& s, const Options& opt, const F* q, const F* k, const F* v, const F* h0,
                       F* o, F* ht);

// Writes (=) dq, dk, dv and dh0 (nullable); dht nullable.
template <typename F>
void recurrent_backward(const Shape& s, const Options& opt, const F* q, const F* k, const F* v, const F* h0,
                        const F* dO, const F* dht, F* dq, F* dk, F* dv, F* dh0);

}  // namespace retro::retention
