// The GPU as the library sees it, in a CUDA build and in a CPU-only one: kCudaBuilt (the one compile-time
// switch), the device probe, cuda_require (the one "built without CUDA" / "no CUDA device found" error), the
// stream type every CUDA entry point takes, and the device helpers the ops share: memory, copies, bf16, the
// cuBLAS sgemm rate. The status checks are core/cuda_check.h's.
//
// Layering: each op's CUDA entry header sits beside its CPU op (index/exact_search_cuda.h, embed/bert_cuda.h,
// retention/retention_cuda.h); kernels/*.cu define those entry points and the helpers below, and nothing else
// does. So a CPU-only build names them only inside `if constexpr (kCudaBuilt)`: the call is type-checked in both
// builds and compiled away in the CPU-only one (a call outside such a branch fails that build's link). The user
// reaches the GPU through cuda_require() first, which refuses in one line when there is none.
// Streams: every entry point takes a CudaStream and none runs on the legacy default stream; a caller owns one
// CudaStreamOwner (a non-blocking stream) per searcher, embedder or run and passes it (docs/gpu.md).
// provides: kCudaBuilt, cuda_device_count, cuda_device_name, cuda_require, CudaStream, cuda_stream_create,
//           cuda_stream_destroy, cuda_stream_synchronize, cuda_stream_synchronize_nothrow, cuda_context_fault,
//           CudaStreamOwner, CudaBuffers, CudaWaitOnThrow, cuda_alloc, cuda_free,
//           cuda_copy_to_device, cuda_copy_to_host, cuda_used_bytes, cuda_free_bytes, cuda_dense_bf16_peak_flops, cuda_select_local_device, cuda_sgemm_gflops, cuda_copy_gbps, bf16, to_bf16, from_bf16
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <string>
#include <vector>

struct CUstream_st;   // CUDA's stream object: cudaStream_t is CUstream_st*

namespace retro {

#ifdef RETRO_HAVE_CUDA
inline constexpr bool kCudaBuilt = true;    // the library holds the kernels of kernels/*.cu
#else
inline constexpr bool kCudaBuilt = false;
#endif

// Any CUDA error (no driver, no device) counts as "0 devices" (TOOLCHAIN.md: without a driver
// cudaGetDeviceCount returns error 35, not 100). Both answer "none" in a CPU-only build.
int cuda_device_count();
std::string cuda_device_name();   // device 0's name, "" when there is none

// Returns when device 0 is usable; else throws the one-line UserError "<flag>: <program> was built without CUDA"
// or "<flag>: no CUDA device found", with `fix` as the hint.
void cuda_require(const std::string& flag, const std::string& program, const std::string& fix = "");

// A CUDA stream as lib/ passes it: the same type as cudaStream_t (the kernels use it as one), so lib/ headers
// need no CUDA header. Entry points refuse the legacy default stream (nullptr, cudaStreamLegacy):
// core/cuda_check.h's cuda_stream_require.
using CudaStream = CUstream_st*;

// A new non-blocking stream on device 0 (cudaStreamNonBlocking: no implicit sync with the legacy default
// stream); UserError without a device (cuda_require), InternalError on a CUDA error.
CudaStream cuda_stream_create();
void cuda_stream_destroy(CudaStream stream) noexcept;   // a failure is logged (destructors call it)
void cuda_stream_synchronize(CudaStream stream);        // waits for the stream's work; InternalError on a fault
// "" where device 0's context can still run work; else the fault a kernel left on it ("cudaErrorIllegalAddress: an
// illegal memory access was encountered"), which every later call would return: for a caller that caught an error
// and would go on (a bench column), to tell a refused launch from a dead context. Waits for all the device's work.
// "" in a CPU-only build or without a device.
std::string cuda_context_fault();

// Owns one non-blocking stream of device 0, made on construction and destroyed with it: what a caller creates
// (after cuda_require) and passes to the entry points. Not copyable; in a CPU-only build only constructed inside
// `if constexpr (kCudaBuilt)`, and its destructor (which a unique_ptr member names in any build) is empty there.
class CudaStreamOwner {
public:
    CudaStreamOwner() : stream_(cuda_stream_create()) {}
    ~CudaStreamOwner() {
        if constexpr (kCudaBuilt) cuda_stream_destroy(stream_);
    }
    CudaStreamOwner(const CudaStreamOwner&) = delete;
    CudaStreamOwner& operator=(const CudaStreamOwner&) = delete;
    CudaStream get() const { return stream_; }

private:
    CudaStream stream_;
};

// Device 0's memory (kernels/cuda_device.cu; InternalError on a CUDA error). The copies are ordered on `stream`
// and return when they are done (the host buffer may then be reused or read).
void* cuda_alloc(std::size_t bytes);
void cuda_free(void* p) noexcept;   // a failure is logged (destructors call it)
void cuda_copy_to_device(void* dst, const void* src, std::size_t bytes, CudaStream stream);
void cuda_copy_to_host(void* dst, const void* src, std::size_t bytes, CudaStream stream);
// Waits for `stream`'s work where nothing may throw (a destructor): a fault is logged.
void cuda_stream_synchronize_nothrow(CudaStream stream) noexcept;

// Device allocations made for work on one stream, freed together when the owner goes — after the stream has
// finished with them: a throw part way leaves queued kernels that may still read them, and a leak would leave the
// next test case or bench row short of memory. Not copyable; as CudaStreamOwner, only used inside
// `if constexpr (kCudaBuilt)` in a CPU-only build.
class CudaBuffers {
public:
    explicit CudaBuffers(CudaStream stream) : stream_(stream) {}
    ~CudaBuffers() {
        if constexpr (kCudaBuilt) {
            if (!owned_.empty()) cuda_stream_synchronize_nothrow(stream_);
            for (void* p : owned_) cuda_free(p);
        }
    }
    CudaBuffers(const CudaBuffers&) = delete;
    CudaBuffers& operator=(const CudaBuffers&) = delete;
    // cuda_alloc(bytes), freed with this object
    void* alloc(std::size_t bytes) {
        owned_.reserve(owned_.size() + 1);   // (so that push_back cannot throw and lose the allocation)
        void* p = cuda_alloc(bytes);
        owned_.push_back(p);
        return p;
    }
    CudaStream stream() const { return stream_; }

private:
    CudaStream stream_;
    std::vector<void*> owned_;
};
// Waits for `stream` when its scope is left by an exception, for device buffers that outlive a throw part way
// through their work (a member array, or a local one declared before this guard, which then runs first): the kernels
// already queued may still read them when they are freed or reused. Only inside `if constexpr (kCudaBuilt)` or CUDA
// code, as CudaBuffers.
class CudaWaitOnThrow {
public:
    explicit CudaWaitOnThrow(CudaStream stream) : stream_(stream), uncaught_(std::uncaught_exceptions()) {}
    ~CudaWaitOnThrow() {
        if constexpr (kCudaBuilt)
            if (std::uncaught_exceptions() > uncaught_) cuda_stream_synchronize_nothrow(stream_);
    }
    CudaWaitOnThrow(const CudaWaitOnThrow&) = delete;
    CudaWaitOnThrow& operator=(const CudaWaitOnThrow&) = delete;

private:
    CudaStream stream_;
    int uncaught_;
};
std::size_t cuda_used_bytes();   // total - free, from cudaMemGetInfo
std::size_t cuda_free_bytes();   // free, from cudaMemGetInfo
// Before any CUDA call of a rank that shares its machine with other ranks (data-parallel GPU training): sets
// CUDA_VISIBLE_DEVICES to this rank's GPU, the local_rank-th of the devices it lists (of 0, 1, ... when unset), so
// that "device 0" of every entry point is the rank's own GPU. Does nothing when local_size <= 1. UserError when the
// list names fewer devices than there are local ranks.
void cuda_select_local_device(int local_rank, int local_size);

// The dense bf16 peak FLOP/s of a device by its name, for MFU (issue 21's table: A100 312, H100 and H200 989
// TFLOP/s); 0 for a device not in the table (MFU "n/a").
double cuda_dense_bf16_peak_flops(const std::string& device_name);

// GFLOP/s of cuBLAS fp32 sgemm (pedantic math, no TF32) for S (m x n) = A (m x d) · B (n x d)^T on device 0,
// the shape of one exact-search score block; best of 5 after a warm-up, pseudo-random data, on `stream`.
double cuda_sgemm_gflops(std::int64_t m, std::int64_t n, int d, CudaStream stream);

// Device-memory copy bandwidth of device 0 in GB/s, counting the bytes read and the bytes written (a copy of n bytes
// moves 2n): cudaMemcpyAsync device to device of `bytes`, best of 5 after a warm-up, on `stream`. The reference for
// a memory-bound kernel's bound (retro-bench retention: q, k, v read and o written).
double cuda_copy_gbps(std::size_t bytes, CudaStream stream);

// Milliseconds the device spends on what `enqueue` puts on `stream`, as fla's peer times it (tests/peers/): CUDA
// events recorded before and after one enqueue, the median of `repeats` (>= 1) after one untimed warm-up. Unlike a
// host timer around enqueue + synchronize it leaves out the host's launch and wake-up latency (several µs), which
// would swamp a kernel of a few µs (a decode step). `enqueue` must only enqueue on `stream` (no synchronize).
double cuda_event_median_ms(const std::function<void()>& enqueue, CudaStream stream, int repeats);

// Storage bit-identical to __nv_bfloat16 (kernels/retention_common.cuh static_asserts it), so this header
// needs no CUDA headers.
struct bf16 {
    std::uint16_t bits;
};
inline bf16 to_bf16(float x) {   // round to nearest even, NaN kept
    std::uint32_t u;
    std::memcpy(&u, &x, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return bf16{static_cast<std::uint16_t>((u >> 16) | 0x40)};
    u += 0x7fffu + ((u >> 16) & 1u);
    return bf16{static_cast<std::uint16_t>(u >> 16)};
}
inline float from_bf16(bf16 x) {
    std::uint32_t u = static_cast<std::uint32_t>(x.bits) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

}  // namespace retro
