// CUDA retention: parallel, recurrent and chunkwise forward/backward with the CPU signatures (retention/*.h),
// taking device pointers (defined by kernels/retention_*.cu; a CPU-only build names them only under
// `if constexpr (kCudaBuilt)`, core/cuda_device.h, whose cuda_alloc / cuda_copy_* move the data). Inputs q, k, v,
// dO and gradients dq, dk, dv are fp32 or bf16 (fp32 accumulation); states h0, ht, dht, dh0 are always fp32
// [B,H,K,V], as in fla (RETENTION.md §4). H <= 128, K, V <= 256. Each call enqueues its kernels on `stream` (never
// the legacy default stream: core/cuda_device.h's CudaStreamOwner) and returns without waiting for them.
// provides: cuda::{parallel,recurrent,chunkwise}_{forward,backward}
#pragma once
#include "core/cuda_device.h"
#include "retention/decay.h"

namespace retro::retention::cuda {

// T: float or bf16 (core/cuda_device.h), the two the .cu files instantiate.
template <typename T>
void parallel_forward(const Shape& s, const Options& opt, const T* q, const T* k, const T* v, const float* h0,
                      T* o, float* ht, CudaStream stream);
template <typename T>
void parallel_backward(const Shape& s, const Options& opt, const T* q, const T* k, const T* v, const float* h0,
                       const T* dO, const float* dht, T* dq, T* dk, T* dv, float* dh0, CudaStream stream);
template <typename T>
void recurrent_forward(const Shape& s, const Options& opt, const T* q, const T* k, const T* v, const float* h0,
                       T* o, float* ht, CudaStream stream);
template <typename T>
void recurrent_backward(const Shape& s, const Options& opt, const T* q, const T* k, const T* v, const float* h0,
                        const T* dO, const float* dht, T* dq, T* dk, T* dv, float* dh0, CudaStream stream);
template <typename T>
void chunkwise_forward(const Shape& s, const Options& opt, const T* q, const T* k, const T* v, const float* h0,
                       T* o, float* ht, CudaStream stream);
template <typename T>
void chunkwise_backward(const Shape& s, const Options& opt, const T* q, const T* k, const T* v, const float* h0,
                        const T* dO, const float* dht, T* dq, T* dk, T* dv, float* dh0, CudaStream stream);

}  // namespace retro::retention::cuda
