// Under mpirun/srun every rank of retro-train must run the same job: rank 0 alone writes the run, so a rank given
// other options (one --batch-size, --val-every or --knn of mpirun's multi-program form, a typo in a job script) hung in
// a collective the others never entered, trained a model its manifest does not describe (exit 0), or stopped with an
// internal error about the all-reduce (a helper's pass, session 54). The options are compared once, first thing
// after MPI starts: any difference is refused on every rank alike (printed once, by rank 0), naming the option.
// provides: train_rank_job, ranks_run_same_job
#pragma once
#include <nlohmann/json.hpp>

namespace retro {

class Distributed;
struct TrainOptions;

// What must be the same on every rank, keyed by option ("--lr": 0.0003): every option that shapes the run or its
// collectives, and the inputs by their contents (--config's bytes, --db's, --knn's and --init-from's fingerprints)
// where their paths may differ between machines (node-local copies).
nlohmann::json train_rank_job(const TrainOptions& o);

// Gathers every rank's `job` (a 64-bit hash first; the whole JSON only where the hashes differ) and refuses the
// first rank whose job differs from rank 0's: "rank 1: --lr is 0.001, rank 0's 0.0003". Nothing where the run is
// one process.
void ranks_run_same_job(Distributed& d, const nlohmann::json& job);

}  // namespace retro
