// retro-bench retention: forward and forward+backward time, peak memory, NaN reporting, decode-step latency
// and the chunkwise/parallel crossover for each mode × T × shape × dtype on the CPU or a CUDA device, plus
// the machine's sgemm rate and chunkwise forward GFLOP/s against it (FLOP formula: docs/retention.md).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace retro::bench {

struct RetentionBenchOptions {
    std::string device = "cpu";                 // cpu | cuda
    std::vector<std::string> modes = {"naive", "parallel", "recurrent", "chunkwise"};
    std::vector<std::int64_t> T;                // empty = device default
    std::int64_t B = 0, H = 0, K = 0, V = 0;    // 0 = device default
    std::vector<std::string> dtypes;            // cpu: fp32, fp64; cuda: fp32, bf16; empty = fp32 / bf16
    std::int64_t chunk_size = 64;
    int repeats = 3;
    std::int64_t naive_max_T = 4096;            // naive is O(T^2) memory; rows above are skipped, and said so
    std::string json;                           // write results here when not empty
    std::string plot;                           // PNG of forward ms vs T when not empty
};

// Runs the benchmark; the table goes to stdout, notes to stderr. command_line is stamped into the JSON.
void run_retention_bench(const RetentionBenchOptions& opt, const std::string& command_line);

}  // namespace retro::bench
