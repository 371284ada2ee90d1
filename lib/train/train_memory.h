// An upper estimate of retro-train's memory, checked before the model is built (issue 16 item 6):
// parameters, gradients and AdamW's two moments (4 floats per parameter), plus the activations a
// micro-batch keeps for the backward pass: per decoder layer the residual stream, norms, q/k/v,
// attention output and the 4x FFN, and the attention scores and probabilities (B·H·T²); per CCA
// layer its projections and scores against the k·r retrieved tokens of each chunk; per encoder
// layer the same over the B·M·k neighbour sequences of r tokens; and the logits with their
// gradient (B·T·vocab). Measured against peak RSS (demo config, 3 steps, 2026-11-25): 859 MiB
// estimated vs 895 MiB at batch 8 (the RSS also holds the mapped database and the libraries),
// 3.2 GiB vs 2.6 GiB at batch 32. It is there to refuse sizes that cannot fit, not to plan to the MiB.
#pragma once
#include <cstdint>

#include "model/config.h"

namespace retro {

double train_memory_bytes(const RetroConfig& c, std::int64_t batch, std::int64_t seq_len, bool retrieval);

}  // namespace retro
