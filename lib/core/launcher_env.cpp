// Implementation of launcher_env.h.
#include "core/launcher_env.h"

#include <cstdlib>
#include <cstring>

#include "core/error.h"

namespace retro {

namespace {

// The variable's value as a non-negative int; -1 when unset; UserError when set but not a number.
int env_int(const std::function<const char*(const char*)>& get, const char* name) {
    const char* v = get(name);
    if (!v) return -1;
    char* end = nullptr;
    const long x = std::strtol(v, &end, 10);
    if (end == v || *end != '\0' || x < 0 || x > 1'000'000)
        user_error_in(name, std::string("'") + v + "' is not a rank or task count");
    return static_cast<int>(x);
}

LauncherEnv make(int rank, int size, int local, const std::string& source) {
    if (size < 1 || rank >= size)
        user_error_in(source, "rank " + std::to_string(rank) + " of " + std::to_string(size) + " tasks is out of range");
    LauncherEnv e;
    e.rank = rank;
    e.size = size;
    e.local_size = local < 0 ? 0 : local;
    e.source = source;
    return e;
}

}  // namespace

LauncherEnv launcher_env_from(const std::function<const char*(const char*)>& get) {
    // Open MPI's mpirun (also under Slurm, where it starts the ranks itself)
    const int orank = env_int(get, "OMPI_COMM_WORLD_RANK"), osize = env_int(get, "OMPI_COMM_WORLD_SIZE");
    if (orank >= 0 && osize >= 0)
        return make(orank, osize, env_int(get, "OMPI_COMM_WORLD_LOCAL_SIZE"), "OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE");
    // srun: a job step's tasks
    const int sproc = env_int(get, "SLURM_PROCID");
    const char* step = get("SLURM_STEP_ID");
    const bool in_step = step && std::strcmp(step, "batch") != 0 && std::strcmp(step, "extern") != 0;
    int ssize = env_int(get, "SLURM_STEP_NUM_TASKS");
    std::string ssource = "SLURM_PROCID/SLURM_STEP_NUM_TASKS";
    if (ssize < 0 && (in_step || !get("SLURM_JOB_ID"))) {
        // no step count: SLURM_NTASKS, trusted inside a step and outside any job (an environment that sets
        // only these two, as a test does); in a batch script it counts tasks that are not running
        ssize = env_int(get, "SLURM_NTASKS");
        ssource = "SLURM_PROCID/SLURM_NTASKS";
    }
    if (sproc >= 0 && ssize >= 0) {
        int local = -1;
        if (const char* t = get("SLURM_STEP_TASKS_PER_NODE")) local = std::atoi(t);   // "4" or "4(x2)": leading count
        return make(sproc, ssize, local, ssource);
    }
    // MPICH / Hydra, Intel MPI
    const int prank = env_int(get, "PMI_RANK"), psize = env_int(get, "PMI_SIZE");
    if (prank >= 0 && psize >= 0) return make(prank, psize, env_int(get, "MPI_LOCALNRANKS"), "PMI_RANK/PMI_SIZE");
    return LauncherEnv{};
}

LauncherEnv launcher_env() {
    return launcher_env_from([](const char* name) -> const char* { return std::getenv(name); });
}

}  // namespace retro
