// `--shard i/n`, the one spec every preprocessing stage shares (retro-chunk: input blocks;
// retro-index, retro-knn: row blocks): a job's work is cut into blocks and shard i of n does the
// blocks b with b % n == i; `merge` joins the shards. `--shard auto` takes i and n from srun or mpirun.
#pragma once
#include <string>

namespace retro {

struct Shard {
    int index = 0, count = 1;
    bool active() const { return count > 1; }
};

// Parses "i/n" with 0 <= i < n, or "auto": this task's rank and the task count from the launcher's
// environment (srun's SLURM_PROCID/SLURM_NTASKS, mpirun's OMPI_COMM_WORLD_RANK/SIZE, PMI_RANK/SIZE;
// core/launcher_env.h). UserError naming --shard otherwise, and for "auto" outside a launcher.
Shard shard_parse(const std::string& text);

}  // namespace retro
