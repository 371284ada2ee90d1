// Matmul FLOPs of one RETRO training step, counted analytically from the config (norms, softmax, GELU and AdamW
// not counted): what retro-bench train divides by its step time and retro-train's MFU by the device's peak.
// With N = B*n decoder tokens, l = floor(n/cs) chunks, Q = B*l*cs CCA queries, M = B*l*k encoded
// neighbours of r = 2cs tokens, R = M*r encoder tokens, HD = heads*dim_head, D = dim_head, H = heads:
//   linear (2*rows*in*out each)
//     to_decoder_model_dim (enc_dim != dec_dim)   2 N Ce Cd
//     decoder layer                               2 N Cd HD * 4 (q, k, v, out)  +  2 N Cd 4Cd * 2 (ff)
//       + CCA layer (with retrieval)              2 Q Cd HD * 2 (q, out)  +  2 R Cd HD * 2 (k, v)
//     encoder layer (with retrieval)              2 R Ce HD * 4  +  2 R Ce 4Ce * 2
//       + cross-attention layer                   2 R Ce HD * 2 (q, out)  +  2 M cs Cd HD * 2 (k, v)
//     encoder project_out                         2 R Ce Cd
//     to_logits                                   2 N Cd V
//   attention core (q k^T and p v, 2*Nq*Nk*D each, per head; the causal square is counted whole, as both
//   implementations compute it):
//     decoder self   4 H D * B n n;   CCA   4 H D * B l cs (k r + 1)   (+1: the learned null key/value)
//     encoder self   4 H D * M r r;   encoder cross   4 H D * M r cs
//   forward = linear + attention;  step = 3 * forward  (backward: d input and d weight, each a forward's
//   worth; attention backward: dS, dq, dk, dv, two forwards' worth).
// provides: TrainFlops, train_step_flops
#pragma once
#include <cstdint>

#include "model/config.h"

namespace retro {

struct TrainFlops {
    double linear = 0;                 // forward FLOPs of the linear layers
    double attention = 0;              // forward FLOPs of q k^T and p v
    double forward() const { return linear + attention; }
    double step() const { return 3 * forward(); }
};

// FLOPs of one training step over `batch` sequences of `seq_len` tokens; retrieval as RetroModel decides it (a CCA
// layer in the config, neighbours given, at least one whole chunk).
TrainFlops train_step_flops(const RetroConfig& config, std::int64_t batch, std::int64_t seq_len, bool retrieval);

}  // namespace retro
