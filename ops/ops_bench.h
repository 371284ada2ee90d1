// The op registry's perf mode, `retro-bench ops`: each registered op's perf case (ops/op_registry.h)
// on one backend, every dtype it supports there, timed after a warm-up (median of repeats), as
// GFLOP/s and GB/s of the case's flops() and bytes() per run; a table and optionally JSON. A run
// covers forward and backward where the op has a backward. CUDA cases include their host transfers
// (the case uploads inputs and downloads outputs each run): `retro-bench retention --device cuda`
// and `retro-bench knn --cuda` time the kernels alone.
#pragma once
#include <string>
#include <vector>

namespace retro::ops {

struct OpsBenchOptions {
    std::vector<std::string> ops;   // names or name prefixes ("nn.", "retention.chunkwise"); empty = all
    std::string device = "cpu";     // cpu or cuda
    int repeats = 5;
    std::string json;
};

void run_ops_bench(const OpsBenchOptions& o, const std::string& command_line);

}  // namespace retro::ops
