// The one way kernels/*.cu check CUDA: every CUDA and cuBLAS call is wrapped in a macro that throws one
// InternalError naming the call, the file and the line (core/cuda_check.h has the functions and the message
// format), and every kernel launch is followed by RETRO_CUDA_LAUNCH_CHECK with the kernel's name (with
// RETRO_CUDA_SYNC_CHECK=1 it also synchronizes the stream, so a fault inside the kernel is reported under that
// name). The _NOTHROW forms are for destructors: they log instead.
// provides: RETRO_CUDA_CHECK, RETRO_CUBLAS_CHECK, RETRO_CUDA_CHECK_NOTHROW, RETRO_CUBLAS_CHECK_NOTHROW,
//           RETRO_CUDA_LAUNCH_CHECK, RETRO_CUDA_SYNC_POINT
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <type_traits>

#include "core/cuda_check.h"

static_assert(std::is_same_v<retro::CudaStream, cudaStream_t>, "retro::CudaStream must be cudaStream_t");

// `call` is a CUDA runtime call returning cudaError_t, e.g. RETRO_CUDA_CHECK(cudaMemcpyAsync(...)).
#define RETRO_CUDA_CHECK(call) ::retro::cuda_check(static_cast<int>(call), #call, __FILE__, __LINE__)
// `call` returns a cublasStatus_t.
#define RETRO_CUBLAS_CHECK(call) ::retro::cublas_check(static_cast<int>(call), #call, __FILE__, __LINE__)
#define RETRO_CUDA_CHECK_NOTHROW(call) ::retro::cuda_check_nothrow(static_cast<int>(call), #call, __FILE__, __LINE__)
#define RETRO_CUBLAS_CHECK_NOTHROW(call) ::retro::cublas_check_nothrow(static_cast<int>(call), #call, __FILE__, __LINE__)
// Right after `kernel<<<grid, block, smem, stream>>>(...)`: `name` is the kernel's name as the error should give it.
#define RETRO_CUDA_LAUNCH_CHECK(name, stream) ::retro::cuda_launch_check(name, stream, __FILE__, __LINE__)
// Right after a cuBLAS call on `stream`: with RETRO_CUDA_SYNC_CHECK on, its kernels' faults are reported as `what`.
#define RETRO_CUDA_SYNC_POINT(what, stream) ::retro::cuda_sync_point(what, stream, __FILE__, __LINE__)
