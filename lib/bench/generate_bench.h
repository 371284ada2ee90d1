// retro-bench generate: decoding speed of the KV-cached generator (generate/cached_decoder.h) against
// RETRO-pytorch's TrainingWrapper.generate loop (the whole model and the encoder re-run for every token,
// RETRO.md C.2) on the same weights, config, neighbours and threads, side by side in one run.
//   ours:  prompt of P random ids in one step, then O tokens one at a time (sampled at T = 1), neighbours of
//          every finished chunk added as the chunk completes (random ids: the search is not timed on either
//          side); reported: prefill ms, decode ms per token, tokens/s over prefill + decode.
//   peer:  tests/peers/rp_generate.py, the same weights exported as safetensors (RP state_dict names),
//          `peer_steps` tokens from length P; its ms per token grows with the length, so measuring it at
//          P..P+peer_steps while ours is averaged over P..P+O favours the peer.
// Default model: 6 x 512 decoder (CCA at 3 and 6), 2 x 256 encoder, 8 heads of 64, vocabulary 8000,
// chunk 64, max_seq_len = the longest prompt + O.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace retro::bench {

struct GenerateBenchOptions {
    std::string config;                          // model config JSON; empty = the default above
    std::vector<std::int64_t> prompts = {64, 512};
    std::int64_t output = 512;
    std::int64_t batch = 1;                      // sequences decoded together (each its own prompt of the same length)
    bool no_retrieval = false;
    std::int64_t peer_steps = 8;                 // tokens the peer makes per prompt length (0 = no peer)
    std::string peer;                            // tests/peers/rp_generate.py (default: in the source tree)
    std::string python = "python3";
    std::string json;
    std::uint64_t seed = 1;
    std::int64_t profile_tokens = 0;             // with --device: a profiled run of this many tokens (ProfilingNnBackend)
    std::string device = "cpu";                  // cpu (CachedDecoder), cuda (BackendDecoder on the GPU, the peer on
                                                 // the GPU too), host-backend (testing: BackendDecoder on the CPU)
    // with a backend device: each prompt also with graphs, side by side; unset = on with --device cuda (retro-generate's
    // default there since session 20), off with host-backend
    std::optional<bool> cuda_graphs;
    bool bf16 = false;                           // CPU: each prompt also with bf16 decode weights, side by side
};

void run_generate_bench(const GenerateBenchOptions& o, const std::string& command_line);

}  // namespace retro::bench
