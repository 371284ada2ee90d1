// Data-parallel ranks over MPI (issue 20): who this process is in a launch (mpirun, srun), and the
// collectives the trainer needs. A build without MPI (kMpiBuilt false) runs one process and refuses, in
// one line, to run as one of several ranks (N processes would otherwise each train alone into one folder).
// MPI starts only where the launcher's environment says this process is one of several ranks
// (core/launcher_env.h), so a plain run of an MPI build never touches MPI.
//
// Reductions over a gradient buffer, summed over "parts" (micro-batches): part a = j * size + rank is this
// rank's j-th. ordered_sum gives, on every rank, out = ((part_0 + part_1) + part_2) + ... in order a, the
// same float additions one process makes folding the parts in order, so N ranks reproduce a 1-process
// --grad-accum run byte for byte (RETRO-pytorch has no such mode; torch DDP's bucketed all-reduce does not
// promise it). It moves each element as an all-to-all (every rank owns a slice and sums its slice's parts
// in order), then an all-gather of the sums: the bytes of a ring all-reduce, in windows of bounded memory.
// allreduce_sum is the MPI library's own all-reduce (its fastest algorithm; order unspecified).
// provides: kMpiBuilt, Distributed, distributed, distributed_check_launch, distributed_before_failure_line,
//           distributed_finish
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace retro {

struct LauncherEnv;   // core/launcher_env.h

#ifdef RETRO_HAVE_MPI
inline constexpr bool kMpiBuilt = true;
#else
inline constexpr bool kMpiBuilt = false;
#endif

class Distributed {
public:
    int rank() const { return rank_; }
    int size() const { return size_; }
    bool root() const { return rank_ == 0; }
    bool active() const { return size_ > 1; }
    int local_size() const { return local_size_; }   // ranks on this machine (1 when unknown)
    int local_rank() const { return local_rank_; }   // this rank's index among them (MPI_COMM_TYPE_SHARED), 0 alone
    const std::string& source() const { return source_; }

    void barrier();
    // out[0, n) = sum of all parts in order a (see above); `local` holds this rank's parts (the same count on
    // every rank). `out` may be local[0] (not another part).
    void ordered_sum(const std::vector<const float*>& local, float* out, std::int64_t n);
    // data[0, n) = its sum over ranks (the MPI library's all-reduce).
    void allreduce_sum(float* data, std::int64_t n);
    // Every rank's `local` (the same length on every rank), concatenated in rank order.
    std::vector<double> allgather(const std::vector<double>& local);
    std::vector<std::uint64_t> allgather(const std::vector<std::uint64_t>& local);

private:
    friend Distributed& distributed(const std::string& program);
    int rank_ = 0, size_ = 1, local_size_ = 1, local_rank_ = 0;
    std::string source_;
};

// This process's ranks, started at the first call (MPI_Init where launched as several ranks in an MPI
// build). UserError when launched as several ranks in a build without MPI, or when MPI's world differs
// from the launcher's (srun without an MPI plugin starts N singletons).
Distributed& distributed(const std::string& program);

// The refusals distributed() applies before starting MPI, on their own for tests: UserError when `env` says
// several ranks and `mpi_built` is false.
void distributed_check_launch(const LauncherEnv& env, bool mpi_built, const std::string& program);

// To call before a failing process prints its one line. On a rank other than 0 of a started MPI job it first waits
// kRootFirstSeconds for rank 0 to end the job: a refusal every rank meets once MPI has started (--grad-accum that does
// not split over the ranks, an --out that holds a run) is then printed once, by rank 0 (whose MPI_Abort stops the
// waiting ranks), where every rank printed the same line; a failure of this rank alone still prints, that much later
// (rank 0 waits in its next collective meanwhile). Refusals before MPI starts (usage errors, --threads) still print on
// every rank. The price: where rank 0 fails too within the wait, for another reason, this rank's line is not printed.
// Internal errors wait too (session 45 tried printing them at once: a check every rank makes alike, such as
// trainer.cpp's check_ranks_agree, then printed its line once per rank; a rank's own still prints, 3 s later).
// Returns at once anywhere else (rank 0, one process, MPI not started: the tools that run as independent shards
// under a launcher print at once).
inline constexpr int kRootFirstSeconds = 3;
void distributed_before_failure_line();

// To call once before the process exits with `exit_code`: ends MPI (MPI_Finalize) after a success; after a
// failure on one rank aborts the job (MPI_Abort), so the other ranks do not wait forever in a collective.
// Does nothing where MPI was not started.
void distributed_finish(int exit_code);

}  // namespace retro
