// retro-bench train: tokens/s and achieved GFLOP/s of RetroKit training steps (zero_grad + forward +
// backward + AdamW, fp32, CPU) at a fixed model config and batch, against the machine's sgemm rate
// measured in the same run at the same thread count, and, with --peer, of RETRO-pytorch 0.3.9 on torch
// CPU (tests/peers/rp_train.py) at the same config, batch, sequence length and threads, side by side.
// Tokens and neighbours are random (ids 1..V-1, no pad), of the shapes retro-train feeds.
//
// FLOPs of one step: model/model_flops.h.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/model_flops.h"
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
    std::vector<std::string> dtypes{"fp32"};   // with --device: fp32, bf16 (GemmInputs::bf16 + NnBackend::
                                               // set_fused_attention, retro-train's bf16), bf16-unfused (without
                                               // the fused attention), one row each
    int profile_steps = 0;             // with --device: this many more steps per dtype through nn::ProfilingNnBackend
    std::string device = "cpu";        // cpu; cuda: the GPU path (model/backend_model.h) beside RP on the GPU
                                       // (fp32 eager and bf16 autocast); host-backend: that path on the CPU (tests)
};

using retro::TrainFlops;
using retro::train_step_flops;

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
