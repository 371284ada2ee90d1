// retro-bench train --ranks 1,2,...: data-parallel scaling of RETRO training steps (issue 20). For each rank
// count N the bench relaunches itself under the launcher (default `mpirun --oversubscribe -np {n}`; e.g.
// `srun -n {n}` under Slurm) as N workers; each worker runs the step retro-train runs on N ranks (forward and
// backward of its own micro-batch of --batch random sequences, the all-reduce of the gradient buffer, AdamW),
// and rank 0 reports the median step time, the median all-reduce time inside it, and an all-reduce sweep over
// message sizes. Weak scaling: every rank keeps --batch sequences and the same threads, so
//   efficiency(N) = tokens/s(N) / (N * tokens/s(1)),
// and the sweep fits the ring all-reduce model t(bytes) = alpha + 2 (N-1)/N * bytes / bw (docs/scaling.md).
#pragma once
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "bench/train_bench.h"

namespace retro::bench {

struct TrainScalingOptions {
    TrainBenchOptions step;             // config, batch (per rank), seq_len, steps, warmup, seed, no_retrieval, json
    std::vector<int> ranks;             // rank counts, e.g. 1,2
    int threads_per_rank = 0;           // 0 = hardware threads / the largest rank count (the same in every row)
    std::string launcher = "mpirun --oversubscribe -np {n}";   // {n} = the rank count
    std::string reduce = "fast";        // fast (MPI_Allreduce) or deterministic (core/distributed.h ordered_sum)
};

// The parent: one launch per rank count, the table and JSON (also written to opt.step.json).
nlohmann::json run_train_scaling(const TrainScalingOptions& opt, const std::string& command_line);

// The ring all-reduce model t(bytes) = alpha + 2 (N-1)/N * bytes / bandwidth fitted to a sweep (rows of "bytes" and
// "seconds", smallest first) at `ranks` ranks: alpha_seconds, bandwidth_bytes_per_s, bandwidth_is_lower_bound (the
// largest message took no longer than the smallest: bandwidth >= 2 (N-1)/N * bytes / t), formula; null below 2 ranks
// or 2 sizes.
nlohmann::json fit_ring_model(const nlohmann::json& sweep, int ranks);

// One worker under the launcher (retro-bench train --rank-worker FILE); rank 0 writes its JSON to `out`.
void run_train_rank_worker(const TrainScalingOptions& opt, const std::string& out);

}  // namespace retro::bench
