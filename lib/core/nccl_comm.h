// NCCL for data-parallel GPU training (issue 20): one communicator over the launch's ranks, one GPU per rank, and
// the gradient all-reduce on the training stream. libnccl.so.2 is loaded at run time (dlopen), not linked: a build
// made with NCCL's header runs where the library is absent, and says so in one line only when NCCL is asked for.
// Defined by kernels/nccl_comm.cu (CUDA builds); a CPU-only build names it only under `if constexpr (kCudaBuilt)`.
// The ranks exchange NCCL's unique id through MPI (core/distributed.h); with one rank (`--reduce nccl` without a
// launcher: the code path on one GPU) no MPI is needed.
// provides: NcclComm, nccl_comm_create
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "core/cuda_device.h"

namespace retro {

class Distributed;

class NcclComm {
public:
    virtual ~NcclComm() = default;
    virtual int rank() const = 0;
    virtual int size() const = 0;
    virtual std::string version() const = 0;   // "2.27.3"
    // data[0, n) = its sum over the ranks, enqueued on `stream` (ordered before later work there).
    virtual void allreduce_sum(float* data, std::int64_t n, CudaStream stream) = 0;
};

// UserError naming `flag` when libnccl.so.2 cannot be loaded (with where to get it) or the build has no NCCL header;
// InternalError when NCCL fails.
std::unique_ptr<NcclComm> nccl_comm_create(Distributed& dist, const std::string& flag);

}  // namespace retro
