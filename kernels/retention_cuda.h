// CUDA retention: parallel, recurrent and chunkwise forward/backward with the CPU signatures (retention/*.h),
// taking device pointers. Inputs q, k, v, dO and gradients dq, dk, dv are fp32 or bf16 (fp32 accumulation);
// states h0, ht, dht, dh0 are always fp32 [B,H,K,V], as in fla (RETENTION.md §4). K, V <= 256.
// provides: bf16, to_bf16, from_bf16, cuda::{parallel,recurrent,chunkwise}_{forward,backward},
//           cuda::{device_alloc, device_free, copy_to_device, copy_to_host, synchronize, device_used_bytes}
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "retention/decay.h"

namespace retro::retention {

// Storage bit-identical to __nv_bfloat16 (the .cu files static_assert it), so this header needs no CUDA headers.
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

namespace cuda {

template <typename T>
void parallel_forward(const Shape& s, const Options& opt, const T* q, const T* k, const T* v, const float* h0,
                      T* o, float* ht);
template <typename T>
void parallel_backward(const Shape& s, const Options& opt, const T* q, const T* k, const T* v, const float* h0,
                       const T* dO, const float* dht, T* dq, T* dk, T* dv, float* dh0);
template <typename T>
void recurrent_forward(const Shape& s, const Options& opt, const T* q, const T* k, const T* v, const float* h0,
                       T* o, float* ht);
template <typename T>
void recurrent_backward(const Shape& s, const Options& opt, const T* q, const T* k, const T* v, const float* h0,
                        const T* dO, const float* dht, T* dq, T* dk, T* dv, float* dh0);
template <typename T>
void chunkwise_forward(const Shape& s, const Options& opt, const T* q, const T* k, const T* v, const float* h0,
                       T* o, float* ht);
template <typename T>
void chunkwise_backward(const Shape& s, const Options& opt, const T* q, const T* k, const T* v, const float* h0,
                        const T* dO, const float* dht, T* dq, T* dk, T* dv, float* dh0);

// Small device-memory helpers for tests and retro-bench (UserError when built without CUDA).
void* device_alloc(std::size_t bytes);
void device_free(void* p);
void copy_to_device(void* dst, const void* src, std::size_t bytes);
void copy_to_host(void* dst, const void* src, std::size_t bytes);
void synchronize();
std::size_t device_used_bytes();   // total - free, from cudaMemGetInfo

}  // namespace cuda
}  // namespace retro::retention
