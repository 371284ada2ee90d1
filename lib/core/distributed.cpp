// Implementation of distributed.h: the start rules, and the collectives over MPI (RETRO_HAVE_MPI) or, in a
// single process, their one-rank meaning.
#include "core/distributed.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstring>
#include <thread>
#include <type_traits>

#include "core/error.h"
#include "core/launcher_env.h"

#ifdef RETRO_HAVE_MPI
#define OMPI_SKIP_MPICXX 1   // the C API only (Open MPI's deprecated C++ bindings need their own library)
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace retro {

namespace {

bool g_mpi_started = false;
int g_mpi_rank = 0;   // this process's rank once MPI started

#ifdef RETRO_HAVE_MPI
void mpi_check(int rc, const char* what) {
    if (rc == MPI_SUCCESS) return;
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    throw InternalError(cat(what, ": ", std::string(msg, static_cast<std::size_t>(len))));
}
// MPI counts are ints: collectives over longer buffers go in windows of this many elements per rank.
constexpr std::int64_t kWindowPerRank = std::int64_t(1) << 22;   // 16 MiB of floats
#endif

// out = parts[0] + parts[1] + ... (in order) over [0, n); out may alias parts[0].
void fold_in_order(const std::vector<const float*>& parts, float* out, std::int64_t n) {
    if (parts.empty()) return;
    if (out != parts[0]) std::memcpy(out, parts[0], static_cast<std::size_t>(n) * sizeof(float));
    for (std::size_t j = 1; j < parts.size(); j++) {
        const float* p = parts[j];
        for (std::int64_t i = 0; i < n; i++) out[i] += p[i];
    }
}

}  // namespace

void distributed_check_launch(const LauncherEnv& env, bool mpi_built, const std::string& program) {
    if (env.size > 1 && !mpi_built)
        user_error_in("", program + " was launched as " + std::to_string(env.size) + " ranks (" + env.source +
                                   ") but built without MPI: each would train alone into the same folder",
                      "install libopenmpi-dev and rebuild (docs/scaling.md), or run one process");
}

Distributed& distributed(const std::string& program) {
    static Distributed d;
    static bool started = false;
    if (started) return d;
    const LauncherEnv env = launcher_env();
    if (env.size > 1) {
        distributed_check_launch(env, kMpiBuilt, program);
#ifdef RETRO_HAVE_MPI
        int provided = 0;
        mpi_check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
        g_mpi_started = true;
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        mpi_check(MPI_Comm_rank(MPI_COMM_WORLD, &d.rank_), "MPI_Comm_rank");
        g_mpi_rank = d.rank_;
        mpi_check(MPI_Comm_size(MPI_COMM_WORLD, &d.size_), "MPI_Comm_size");
        if (d.size_ != env.size)
            user_error_in("", "the launcher started " + std::to_string(env.size) + " tasks of " + program + " (" + env.source +
                                       ") but MPI sees " + std::to_string(d.size_),
                          "under Slurm launch with `srun --mpi=pmix` (or pmi2), or with mpirun inside the allocation");
        d.local_size_ = env.local_size > 0 ? env.local_size : 1;
        d.source_ = env.source;
        MPI_Comm node;   // the ranks sharing this machine's memory: this rank's index there picks its GPU
        mpi_check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, d.rank_, MPI_INFO_NULL, &node),
                  "MPI_Comm_split_type");
        mpi_check(MPI_Comm_rank(node, &d.local_rank_), "MPI_Comm_rank (node)");
        MPI_Comm_free(&node);
#endif
    }
    started = true;
    return d;
}

void distributed_before_failure_line() {
    if (g_mpi_started && g_mpi_rank > 0) std::this_thread::sleep_for(std::chrono::seconds(kRootFirstSeconds));
}

void distributed_finish(int exit_code) {
#ifdef RETRO_HAVE_MPI
    if (!g_mpi_started) return;
    g_mpi_started = false;
    if (exit_code != 0) MPI_Abort(MPI_COMM_WORLD, exit_code);   // the others may wait in a collective
    MPI_Finalize();
#else
    (void)exit_code;
#endif
}

void Distributed::barrier() {
#ifdef RETRO_HAVE_MPI
    if (active()) mpi_check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
#endif
}

void Distributed::ordered_sum(const std::vector<const float*>& local, float* out, std::int64_t n) {
    RETRO_CHECK(!local.empty(), "ordered_sum without parts");
    if (!active()) return fold_in_order(local, out, n);
#ifdef RETRO_HAVE_MPI
    const std::int64_t N = size_, m = static_cast<std::int64_t>(local.size());
    const std::int64_t window = kWindowPerRank * N;
    std::vector<float> send, recv, mine, gathered;
    for (std::int64_t off = 0; off < n; off += window) {
        const std::int64_t w = std::min(window, n - off), seg = (w + N - 1) / N;
        // send[d][j][0, seg) = part j's slice d (rank d owns elements [d*seg, (d+1)*seg) of the window)
        send.assign(static_cast<std::size_t>(N * m * seg), 0.0f);
        for (std::int64_t dst = 0; dst < N; dst++)
            for (std::int64_t j = 0; j < m; j++) {
                const std::int64_t b = dst * seg, e = std::min(w, b + seg);
                if (e > b) std::memcpy(&send[static_cast<std::size_t>((dst * m + j) * seg)], local[j] + off + b,
                                       static_cast<std::size_t>(e - b) * sizeof(float));
            }
        recv.resize(send.size());
        mpi_check(MPI_Alltoall(send.data(), static_cast<int>(m * seg), MPI_FLOAT, recv.data(), static_cast<int>(m * seg),
                               MPI_FLOAT, MPI_COMM_WORLD),
                  "MPI_Alltoall");
        // recv[s][j] is part a = j*N + s of my slice: fold them in order a
        std::vector<const float*> parts(static_cast<std::size_t>(N * m));
        for (std::int64_t a = 0; a < N * m; a++) parts[a] = &recv[static_cast<std::size_t>(((a % N) * m + a / N) * seg)];
        mine.resize(static_cast<std::size_t>(seg));
        fold_in_order(parts, mine.data(), seg);
        gathered.resize(static_cast<std::size_t>(N * seg));
        mpi_check(MPI_Allgather(mine.data(), static_cast<int>(seg), MPI_FLOAT, gathered.data(), static_cast<int>(seg),
                                MPI_FLOAT, MPI_COMM_WORLD),
                  "MPI_Allgather");
        std::memcpy(out + off, gathered.data(), static_cast<std::size_t>(w) * sizeof(float));
    }
#endif
}

void Distributed::allreduce_sum(float* data, std::int64_t n) {
    if (!active()) return;
#ifdef RETRO_HAVE_MPI
    for (std::int64_t off = 0; off < n; off += INT_MAX / 2) {
        const int c = static_cast<int>(std::min<std::int64_t>(INT_MAX / 2, n - off));
        mpi_check(MPI_Allreduce(MPI_IN_PLACE, data + off, c, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
    }
#else
    (void)data;
    (void)n;
#endif
}

namespace {
// Every rank's `local` (the same length everywhere), concatenated in rank order.
template <typename T>
std::vector<T> allgather_as(const Distributed& d, const std::vector<T>& local) {
    static_assert(std::is_same_v<T, double> || std::is_same_v<T, std::uint64_t>);
    if (!d.active()) return local;
    std::vector<T> all(local.size() * static_cast<std::size_t>(d.size()));
#ifdef RETRO_HAVE_MPI
    const MPI_Datatype type = std::is_same_v<T, double> ? MPI_DOUBLE : MPI_UINT64_T;
    const int count = static_cast<int>(local.size());
    mpi_check(MPI_Allgather(local.data(), count, type, all.data(), count, type, MPI_COMM_WORLD), "MPI_Allgather");
#endif
    return all;
}
}  // namespace

std::vector<double> Distributed::allgather(const std::vector<double>& local) { return allgather_as(*this, local); }

std::vector<std::uint64_t> Distributed::allgather(const std::vector<std::uint64_t>& local) {
    return allgather_as(*this, local);
}

}  // namespace retro
