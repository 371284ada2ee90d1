// CUDA build of lib/core/nccl_comm.h: libnccl.so.2 opened with dlopen (the build needs only nccl.h, found by CMake
// in the CUDA toolkit or beside the nvidia-nccl wheel: RETRO_HAVE_NCCL_HEADER), the unique id passed from rank 0 to
// every rank through MPI's all-gather, one ncclComm per process, in-place ncclAllReduce(sum) on the caller's stream,
// waited for while NCCL's asynchronous errors are polled (core/collective_wait.h: a peer that died, or no completion
// within RETRO_NCCL_TIMEOUT_S, fails the step, not a wait for ever).
#include <dlfcn.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "core/collective_wait.h"
#include "core/distributed.h"
#include "core/error.h"
#include "core/log.h"
#include "core/nccl_comm.h"
#include "cuda_check.cuh"

#ifdef RETRO_HAVE_NCCL_HEADER
#include <nccl.h>
#endif

namespace retro {

#ifdef RETRO_HAVE_NCCL_HEADER
namespace {

constexpr const char* kNcclFix =
    "install NCCL for this CUDA (pip install nvidia-nccl-cu13, or libnccl2 from NVIDIA's CUDA repository) and put the "
    "folder holding libnccl.so.2 on LD_LIBRARY_PATH";

// The NCCL entry points the trainer uses, resolved from libnccl.so.2 once.
struct NcclApi {
    decltype(&ncclGetUniqueId) get_unique_id = nullptr;
    decltype(&ncclCommInitRank) comm_init_rank = nullptr;
    decltype(&ncclAllReduce) all_reduce = nullptr;
    decltype(&ncclCommDestroy) comm_destroy = nullptr;
    decltype(&ncclCommAbort) comm_abort = nullptr;
    decltype(&ncclCommGetAsyncError) get_async_error = nullptr;
    decltype(&ncclGetErrorString) error_string = nullptr;
    decltype(&ncclGetVersion) get_version = nullptr;
};

const NcclApi& nccl_api(const std::string& flag) {
    static NcclApi api;
    static std::string failure;
    static std::once_flag once;
    std::call_once(once, [] {
        void* lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
        if (!lib) lib = dlopen("libnccl.so", RTLD_NOW | RTLD_LOCAL);
        if (!lib) {
            const char* e = dlerror();
            failure = std::string("cannot load libnccl.so.2 (") + (e ? e : "not found") + ")";
            return;
        }
        auto get = [&](auto& fn, const char* name) {
            fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
            if (!fn && failure.empty()) failure = std::string("libnccl.so.2 has no ") + name;
        };
        get(api.get_unique_id, "ncclGetUniqueId");
        get(api.comm_init_rank, "ncclCommInitRank");
        get(api.all_reduce, "ncclAllReduce");
        get(api.comm_destroy, "ncclCommDestroy");
        get(api.comm_abort, "ncclCommAbort");
        get(api.get_async_error, "ncclCommGetAsyncError");
        get(api.error_string, "ncclGetErrorString");
        get(api.get_version, "ncclGetVersion");
    });
    if (!failure.empty()) user_error_in(flag, failure, kNcclFix);
    return api;
}

void nccl_check(const NcclApi& api, ncclResult_t r, const char* call) {
    if (r != ncclSuccess) throw InternalError(cat(call, ": ", api.error_string ? api.error_string(r) : "NCCL error"));
}

class Comm final : public NcclComm {
public:
    Comm(const NcclApi& api, Distributed& dist)
        : api_(api), rank_(dist.rank()), size_(dist.size()),
          timeout_s_(collective_timeout_from_env(std::getenv("RETRO_NCCL_TIMEOUT_S"))) {
        ncclUniqueId id{};
        static_assert(sizeof(ncclUniqueId) % sizeof(std::uint64_t) == 0, "unique id size");
        if (rank_ == 0) nccl_check(api_, api_.get_unique_id(&id), "ncclGetUniqueId");
        if (dist.active()) {   // rank 0's id to every rank: its part of an all-gather
            std::vector<std::uint64_t> mine(sizeof(id) / sizeof(std::uint64_t));
            std::memcpy(mine.data(), &id, sizeof(id));
            const auto all = dist.allgather(mine);
            std::memcpy(&id, all.data(), sizeof(id));
        }
        int v = 0;   // (before the communicator: nothing after its making may throw and leak it)
        nccl_check(api_, api_.get_version(&v), "ncclGetVersion");
        version_ = cat(v / 10000, ".", (v / 100) % 100, ".", v % 100);
        RETRO_CUDA_CHECK(cudaSetDevice(0));   // this rank's GPU (CUDA_VISIBLE_DEVICES: cuda_select_local_device)
        nccl_check(api_, api_.comm_init_rank(&comm_, size_, id, rank_), "ncclCommInitRank");
    }
    ~Comm() override {
        if (!comm_) return;
        if (const ncclResult_t r = api_.comm_destroy(comm_); r != ncclSuccess) {
            try {
                log_error(cat("ncclCommDestroy: ", api_.error_string ? api_.error_string(r) : "NCCL error"));
            } catch (...) {
            }
        }
    }
    int rank() const override { return rank_; }
    int size() const override { return size_; }
    std::string version() const override { return version_; }
    void allreduce_sum(float* data, std::int64_t n, CudaStream stream) override {
        cuda_stream_require(stream, "NcclComm::allreduce_sum");
        if (n <= 0) return;
        if (!comm_) throw InternalError("ncclAllReduce: the communicator was aborted after an earlier error");
        nccl_check(api_, api_.all_reduce(data, data, static_cast<std::size_t>(n), ncclFloat, ncclSum, comm_, stream),
                   "ncclAllReduce");
        wait_polling_errors(stream);
    }

private:
    // Waits for the stream's work (the all-reduce last) while asking NCCL for an asynchronous error, as NCCL's
    // "communicator abort" example does: a rank whose peer died would otherwise block in its next synchronisation for
    // ever. Any failure aborts the communicator and fails the step (core/collective_wait.h). The caller reads the
    // gradients' norm right after the all-reduce anyway, so waiting here costs no overlap.
    void wait_polling_errors(CudaStream stream) {
        CollectiveWaitHooks hooks;
        hooks.stream_done = [&] {
            const cudaError_t q = cudaStreamQuery(stream);
            if (q == cudaSuccess) return true;
            if (q != cudaErrorNotReady) cuda_check(static_cast<int>(q), "cudaStreamQuery (after ncclAllReduce)", __FILE__, __LINE__);
            // "not ready" is an answer, not an error: never leave it as the thread's last error, where the next
            // launch's check would read it as its own failure
            if (cudaPeekAtLastError() == cudaErrorNotReady) (void)cudaGetLastError();
            return false;
        };
        hooks.async_error = [&]() -> std::string {
            ncclResult_t async = ncclSuccess;
            nccl_check(api_, api_.get_async_error(comm_, &async), "ncclCommGetAsyncError");
            if (async == ncclSuccess || async == ncclInProgress) return "";
            return api_.error_string ? api_.error_string(async) : "NCCL error";
        };
        hooks.abort = [&] {
            api_.comm_abort(comm_);   // (its own result is not what the step failed of)
            comm_ = nullptr;
        };
        collective_wait(hooks, "ncclAllReduce", std::chrono::duration<double>(timeout_s_), "RETRO_NCCL_TIMEOUT_S");
    }

    const NcclApi& api_;
    ncclComm_t comm_ = nullptr;
    int rank_ = 0, size_ = 1;
    double timeout_s_ = kCollectiveTimeoutDefaultS;   // RETRO_NCCL_TIMEOUT_S, 0: none
    std::string version_;
};

}  // namespace

std::unique_ptr<NcclComm> nccl_comm_create(Distributed& dist, const std::string& flag) {
    return std::make_unique<Comm>(nccl_api(flag), dist);
}

#else   // a CUDA build whose configure found no nccl.h

std::unique_ptr<NcclComm> nccl_comm_create(Distributed&, const std::string& flag) {
    user_error_in(flag, "this build of RetroKit has no NCCL (configure found no nccl.h)",
                  "install NCCL's header (pip install nvidia-nccl-cu13, or libnccl-dev) and rebuild");
}

#endif

}  // namespace retro
