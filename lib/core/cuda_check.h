// The checks every CUDA call goes through: a failed CUDA or cuBLAS call becomes one InternalError naming the call,
// the file and the line; a kernel launch is checked under the kernel's name, and with RETRO_CUDA_SYNC_CHECK=1 its
// stream is synchronized after it so that a fault inside the kernel is reported under that name too. The kernels
// reach these through kernels/cuda_check.cuh's macros (RETRO_CUDA_CHECK, RETRO_CUBLAS_CHECK, RETRO_CUDA_LAUNCH_CHECK,
// ...), which fill in the call text, __FILE__ and __LINE__; they are declared here, without CUDA headers, so that
// tests can reach them. The status checks are defined by kernels/cuda_check.cu (CUDA builds only); the stream and
// environment checks by core/cuda_check.cpp (every build). docs/gpu.md: "Streams and error checking".
// provides: cuda_error_message, cublas_error_message, cuda_check, cublas_check, cuda_check_nothrow,
//           cublas_check_nothrow, cuda_launch_check, cuda_sync_point, cuda_stream_require, cuda_sync_check,
//           cuda_sync_check_parse, kCudaSyncCheckEnv
#pragma once
#include <string>

#include "core/cuda_device.h"

namespace retro {

inline constexpr const char* kCudaSyncCheckEnv = "RETRO_CUDA_SYNC_CHECK";

// "<file>:<line>: <call>: <error name>: <CUDA's message>" for a cudaError_t `status`; for a fault that a kernel
// left behind (an illegal address, a trap, ...) and RETRO_CUDA_SYNC_CHECK off, it adds where to look: the fault
// belongs to an earlier kernel on the stream, and RETRO_CUDA_SYNC_CHECK=1 names it.
std::string cuda_error_message(int status, const char* call, const char* file, int line);
// "<file>:<line>: <call>: <cuBLAS status name>: <cuBLAS's message>" for a cublasStatus_t `status`.
std::string cublas_error_message(int status, const char* call, const char* file, int line);

// InternalError(the message above) unless `status` is success.
void cuda_check(int status, const char* call, const char* file, int line);
void cublas_check(int status, const char* call, const char* file, int line);
// The same check where nothing may throw (destructors): the message goes to log_error.
void cuda_check_nothrow(int status, const char* call, const char* file, int line) noexcept;
void cublas_check_nothrow(int status, const char* call, const char* file, int line) noexcept;

// After a kernel launch on `stream`: cudaGetLastError under "kernel <kernel>: launch"; with RETRO_CUDA_SYNC_CHECK
// on, also cudaStreamSynchronize(stream) under "kernel <kernel>: run".
void cuda_launch_check(const char* kernel, CudaStream stream, const char* file, int line);
// After work a library enqueued on `stream` (a cuBLAS call): with RETRO_CUDA_SYNC_CHECK on,
// cudaStreamSynchronize(stream) under "<what>: run"; nothing otherwise.
void cuda_sync_point(const char* what, CudaStream stream, const char* file, int line);

// InternalError "<entry>: needs a stream of its own, not the legacy default stream ..." when `stream` is nullptr
// or cudaStreamLegacy: every entry point calls it first.
void cuda_stream_require(CudaStream stream, const char* entry);

// RETRO_CUDA_SYNC_CHECK, read once: on for any value but unset, "" and "0" (cuda_sync_check_parse).
bool cuda_sync_check();
bool cuda_sync_check_parse(const char* value);

}  // namespace retro
