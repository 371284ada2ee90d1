// Implementation of shard.h.
#include "core/shard.h"

#include <cstdio>
#include <cstdlib>

#include "core/error.h"
#include "core/launcher_env.h"

namespace retro {

Shard shard_parse(const std::string& text) {
    Shard s;
    if (text == "auto") {
        const LauncherEnv env = launcher_env();
        if (!env.launched()) {
            // a batch script's own shell has SLURM_NTASKS (and the job's ids) but is one process, not a step's task
            const char* job = std::getenv("SLURM_JOB_ID");
            if (job && *job && std::getenv("SLURM_NTASKS"))
                user_error_in("--shard", cat("auto: this is Slurm job ", job, "'s batch shell (or salloc's), one process ",
                                             "outside any job step (its SLURM_NTASKS counts the job's tasks, not ",
                                             "processes started here)"),
                              "start the shards as a step: srun --ntasks=N retro-... --shard auto (docs/scaling.md)");
            user_error_in("--shard", "auto: no launcher environment (srun's SLURM_PROCID/SLURM_NTASKS, mpirun's "
                                     "OMPI_COMM_WORLD_RANK/SIZE or PMI_RANK/SIZE)",
                          "run under srun or mpirun, or give --shard i/n (docs/scaling.md)");
        }
        s.index = env.rank;
        s.count = env.size;
        return s;
    }
    char slash = 0;
    int consumed = 0;
    if (std::sscanf(text.c_str(), "%d%c%d%n", &s.index, &slash, &s.count, &consumed) != 3 || slash != '/' ||
        consumed != static_cast<int>(text.size()) || s.count < 1 || s.index < 0 || s.index >= s.count)
        user_error_in("--shard", "'" + text + "' is not i/n with 0 <= i < n", "e.g. --shard 0/4, or --shard auto under srun or mpirun");
    return s;
}

}  // namespace retro
