// retro-bench train: tokens/s and achieved GFLOP/s of RetroKit training steps (zero_grad + forward +
// backward + AdamW, fp32, CPU) at a fixed model config and batch, against the machine's sgemm rate
// measured in the same run at the same thread count, and, with --peer, of RETRO-pytorch 0.3.9 on torch
// CPU (tests/peers/rp_train.py) at the same config, batch, sequence length and threads, side by side.
// Tokens and neighbours are random (ids 1..V-1, no pad), of the shapes retro-train feeds.
//
// FLOPs of one step, counted analytically from the config (matmuls only; norms, softmax, GELU, AdamW not
// counted). With N = B*n decoder tokens, l = floor(n/cs) chunks, Q = B*l*cs CCA queries, M = B*l*k encoded
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
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/retro.h"

namespace retro::bench {

struct TrainBenchOptions {
    std::string config;                // model config JSON; empty = the built-in demo config
    std::int64_t batch = 8;            // sequences per step
    std::int64_t seq_len = 0;          // input tokens per sequence; 0 = the config's max_seq_len
    int steps = 5;                     // timed steps per row (median reported)
    int warmup = 1;                    // untimed steps before them
    std::vector<int> threads;          // thread counts; empty = retro-bench --threads, else 1 and all cores
    bool no_retrieval = false;         // decoder only (CCA and encoder skipped)
    bool peer = false;                 // also run RETRO-pytorch (skipped, with the reason, when not importable)
    std::string peer_script;           // empty = tests/peers/rp_train.py (from the working directory or the source tree)
    std::string python = "python3";
    std::uint64_t seed = 1;
    std::string json;                  // write the results here when not empty
};

struct TrainFlops {
    double linear = 0;                 // forward FLOPs of the linear layers
    double attention = 0;              // forward FLOPs of q k^T and p v
    double forward() const { return linear + attention; }
    double step() const { return 3 * forward(); }
};

// Matmul FLOPs of one training step (formula above); retrieval as RetroModel decides it (a CCA layer in
// the config, neighbours given, at least one whole chunk).
TrainFlops train_step_flops(const RetroConfig& config, std::int64_t batch, std::int64_t seq_len, bool retrieval);

// A batch of random ids in [1, V) (no pad: every label counts, no neighbour masked) of retro-train's shapes.
RetroBatch train_bench_random_batch(const RetroConfig& c, std::int64_t B, std::int64_t n, bool retrieval,
                                    std::uint64_t seed);

// The config of opt (empty = the built-in demo), validated, and the sequence length it trains at.
RetroConfig train_bench_config(const TrainBenchOptions& opt, std::int64_t& seq_len);

// examples/configs/demo.json, built in so that the bench runs from any folder.
RetroConfig train_bench_demo_config();

// Runs the benchmark: table on stdout, notes on stderr; returns the JSON results (also written to opt.json).
nlohmann::json run_train_bench(const TrainBenchOptions& opt, const std::string& command_line);

}  // namespace retro::bench
