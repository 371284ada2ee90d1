// Where a process sits in a parallel launch, read from the launcher's environment (never from MPI, so it
// works in a build without MPI and before MPI starts): Slurm's srun (SLURM_PROCID / SLURM_STEP_NUM_TASKS,
// or SLURM_NTASKS inside a job step), Open MPI's mpirun (OMPI_COMM_WORLD_RANK / _SIZE / _LOCAL_SIZE), and
// the PMI variables of MPICH/Hydra (PMI_RANK / PMI_SIZE).
// Used by `--shard auto` (core/shard.h) and by the data-parallel trainer's start (core/distributed.h).
// Slurm note: SLURM_NTASKS is set in a batch script's own environment too, where one process runs; it counts
// only inside a job step (SLURM_STEP_ID set and not "batch"/"extern"), which srun starts, or where no job is
// set at all (SLURM_JOB_ID unset: a simulated environment).
// provides: LauncherEnv, launcher_env, launcher_env_from
#pragma once
#include <functional>
#include <string>

namespace retro {

struct LauncherEnv {
    int rank = 0, size = 1;
    int local_size = 1;      // ranks on this machine (0 when the launcher does not say)
    std::string source;      // the variables read, e.g. "SLURM_PROCID/SLURM_NTASKS"; "" = no launcher
    bool launched() const { return !source.empty(); }
};

// The environment of this process (getenv).
LauncherEnv launcher_env();
// The same rules over any lookup (tests pass a map); `get` returns nullptr for an unset variable.
// A set but malformed or out-of-range variable is a UserError naming it.
LauncherEnv launcher_env_from(const std::function<const char*(const char*)>& get);

}  // namespace retro
