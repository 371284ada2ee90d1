// Implementation of shard.h.
#include "core/shard.h"

#include <charconv>
#include <cstdlib>
#include <string_view>
#include <system_error>

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
    // digits only, each an int: sscanf's %d took " 1/3" and wrapped 4294967297/4294967298 to shard 1/2
    const auto number = [](std::string_view digits, int& value) {
        if (digits.empty() || digits.find_first_not_of("0123456789") != std::string_view::npos) return false;
        const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
        return ec == std::errc() && end == digits.data() + digits.size();
    };
    const std::string_view t(text);
    const std::size_t slash = t.find('/');
    if (slash == std::string_view::npos || !number(t.substr(0, slash), s.index) || !number(t.substr(slash + 1), s.count) ||
        s.count < 1 || s.index < 0 || s.index >= s.count)
        user_error_in("--shard", "'" + text + "' is not i/n with 0 <= i < n", "e.g. --shard 0/4, or --shard auto under srun or mpirun");
    return s;
}

}  // namespace retro
