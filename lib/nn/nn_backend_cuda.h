// The CUDA NnBackend (nn/nn_backend.h) for GPU training (issue 21): fp32 kernels with the CPU ops' contracts,
// GEMMs through cuBLAS (pedantic fp32 math, no TF32, so results track the CPU to rounding), every sum in a fixed
// order (no atomics), every call checked (core/cuda_check.h). Defined by kernels/nn_backend_cuda.cu; a CPU-only
// build names it only under `if constexpr (kCudaBuilt)` after cuda_require (core/cuda_device.h).
// provides: cuda_nn_backend
#pragma once
#include <memory>

#include "core/cuda_device.h"
#include "nn/nn_backend.h"

namespace retro::nn {

// A backend on device 0 whose work runs on `stream` (which must outlive it); it owns its cuBLAS handle.
std::unique_ptr<NnBackend> cuda_nn_backend(CudaStream stream);

}  // namespace retro::nn
