// The few block-, warp- and grid-level primitives the kernels written against it use (kernels/nn_flash_mma.cuh, the
// retention walks, the few-row GEMV, a fused decode step's ops and its grid barriers), in two builds of one source:
//   - under nvcc: the hardware's (mma.sync.m16n8k16 bf16 -> fp32, __shfl_xor_sync, __syncthreads, ...);
//   - with RETRO_SIMT_HOST defined, in a host C++ compiler: tests/simt_host.h's emulator, which runs each thread of
//     a block as a fiber and meets a warp's lanes at every exchange, so the kernels' index arithmetic, fragment
//     layouts, masking and barriers are tested on a machine without a GPU (tests/test_flash_mma_host.cpp).
// bf16 values are kept as their 16 bits (uint16_t) in shared memory in both builds; the conversion rounds to nearest
// even, as __float2bfloat16_rn does.
// Fragment layouts of mma.m16n8k16 with bf16 A/B and fp32 C (PTX ISA, "Matrix Fragments for mma.m16n8k16"), with
// g = lane / 4 and t = lane % 4:
//   A (16 x 16, row-major), four 32-bit registers of two bf16 each (low half = lower column):
//     a0 = A[g][2t, 2t+1], a1 = A[g+8][2t, 2t+1], a2 = A[g][2t+8, 2t+9], a3 = A[g+8][2t+8, 2t+9]
//   B (16 x 8, k x n), two registers: b0 = B[2t, 2t+1][g], b1 = B[2t+8, 2t+9][g]
//   C, D (16 x 8): c0, c1 = C[g][2t, 2t+1], c2, c3 = C[g+8][2t, 2t+1]
#pragma once

#include <cstdint>

#define RETRO_SIMT_PRAGMA(x) _Pragma(#x)

#if defined(__CUDACC__) && !defined(RETRO_SIMT_HOST)
#include <cooperative_groups.h>
#include <cuda_bf16.h>
#define RETRO_SIMT_DEVICE __device__ __forceinline__
#define RETRO_SIMT_HOST_DEVICE __host__ __device__ __forceinline__
#define RETRO_SIMT_KERNEL(threads) __global__ void __launch_bounds__(threads)
// ... and asks ptxas for registers that let min_blocks blocks share an SM
#define RETRO_SIMT_KERNEL_MIN_BLOCKS(threads, min_blocks) __global__ void __launch_bounds__(threads, min_blocks)
#define RETRO_SIMT_UNROLL _Pragma("unroll")
#define RETRO_SIMT_UNROLL_BY(n) RETRO_SIMT_PRAGMA(unroll n)
// a block's static shared variable of type T (an array type too): __shared__ on the GPU, one per block in the emulator
#define RETRO_SIMT_STATIC_SHARED(T, name) __shared__ ::retro::simt::same_type<T> name
#else
#include <cmath>
#include <cstring>
#define RETRO_SIMT_DEVICE inline
#define RETRO_SIMT_HOST_DEVICE inline
#define RETRO_SIMT_KERNEL(threads) inline void
#define RETRO_SIMT_KERNEL_MIN_BLOCKS(threads, min_blocks) inline void
#define RETRO_SIMT_UNROLL
#define RETRO_SIMT_UNROLL_BY(n)
#define RETRO_SIMT_STATIC_SHARED(T, name) \
    ::retro::simt::same_type<T>& name = ::retro::simt::host::block_static<::retro::simt::same_type<T>>([] {})
#ifndef RETRO_SIMT_HOST_EMULATOR
#error "include tests/simt_host.h (the emulator) before kernels/simt.cuh in a host build"
#endif
#endif

namespace retro::simt {

template <typename T>
using same_type = T;   // (RETRO_SIMT_STATIC_SHARED: `__shared__ same_type<float[8]> a` declares an array)

#if defined(__CUDACC__) && !defined(RETRO_SIMT_HOST)

RETRO_SIMT_DEVICE int thread_x() { return static_cast<int>(threadIdx.x); }
RETRO_SIMT_DEVICE int block_threads() { return static_cast<int>(blockDim.x); }
RETRO_SIMT_DEVICE long long block_x() { return blockIdx.x; }
RETRO_SIMT_DEVICE long long block_y() { return blockIdx.y; }
RETRO_SIMT_DEVICE long long grid_x() { return gridDim.x; }
// the block's dynamic shared memory (every extern __shared__ array starts at its first byte)
RETRO_SIMT_DEVICE unsigned char* dynamic_smem() {
    extern __shared__ __align__(16) unsigned char retro_simt_smem[];
    return retro_simt_smem;
}
RETRO_SIMT_DEVICE void sync_block() { __syncthreads(); }
// Every thread of a cooperative launch (cudaLaunchCooperativeKernel) meets here; writes before it are visible to the
// whole grid after it.
RETRO_SIMT_DEVICE void grid_sync() { cooperative_groups::this_grid().sync(); }
// Orders this thread's writes before its later ones for every thread of the device (__threadfence).
RETRO_SIMT_DEVICE void thread_fence() { __threadfence(); }
// *p += v atomically for the whole device; returns the old value.
RETRO_SIMT_DEVICE std::uint32_t atomic_add_u32(std::uint32_t* p, std::uint32_t v) {
    return atomicAdd(reinterpret_cast<unsigned*>(p), static_cast<unsigned>(v));
}
// A load through L2 only (ld.global.cg: what another block wrote, never a stale L1 copy).
RETRO_SIMT_DEVICE float load_cg(const float* p) { return __ldcg(p); }
// A barrier among `threads` threads of the block (whole warps) that meet at named barrier id (1..15; 0 is
// sync_block's): bar.sync id, threads. Shared-memory writes before it are visible to the others after it.
RETRO_SIMT_DEVICE void sync_named(int id, int threads) { asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory"); }
// 64-bit integer add to shared (or global) memory, atomic among the block's threads (integer sums: the same total in
// any order, so a histogram of them is deterministic)
RETRO_SIMT_DEVICE void atomic_add(std::uint64_t* p, std::uint64_t v) {
    atomicAdd(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v));
}
RETRO_SIMT_DEVICE std::uint32_t float_bits(float x) { return __float_as_uint(x); }
// A warp's predicate bits (lane l's at bit l), lane src's 32 or 64 bits, the warp's sum of 64-bit integers (every lane
// gets it; a fixed butterfly, but integer sums are the same in any order), and the lowest set lane of a mask.
RETRO_SIMT_DEVICE std::uint32_t ballot(bool p) { return __ballot_sync(0xffffffffu, p); }
RETRO_SIMT_DEVICE std::uint32_t shfl_idx_u32(std::uint32_t v, int src_lane) { return __shfl_sync(0xffffffffu, v, src_lane); }
RETRO_SIMT_DEVICE std::uint64_t shfl_idx_u64(std::uint64_t v, int src_lane) {
    return __shfl_sync(0xffffffffu, static_cast<unsigned long long>(v), src_lane);
}
RETRO_SIMT_DEVICE std::uint64_t warp_sum_u64(std::uint64_t v) {
    unsigned long long x = v;
    for (int off = 16; off > 0; off >>= 1) x += __shfl_xor_sync(0xffffffffu, x, off);
    return x;
}
RETRO_SIMT_DEVICE int lowest_lane(std::uint32_t mask) { return __ffs(static_cast<int>(mask)) - 1; }
RETRO_SIMT_DEVICE void sync_warp() { __syncwarp(); }
RETRO_SIMT_DEVICE float shfl_xor(float v, int mask) { return __shfl_xor_sync(0xffffffffu, v, mask); }
RETRO_SIMT_DEVICE float shfl_idx(float v, int src_lane) { return __shfl_sync(0xffffffffu, v, src_lane); }
RETRO_SIMT_DEVICE std::uint16_t bf16_bits(float x) { return __bfloat16_as_ushort(__float2bfloat16_rn(x)); }
RETRO_SIMT_DEVICE float bf16_value(std::uint16_t b) { return __bfloat162float(__ushort_as_bfloat16(b)); }
// 2^x by the MUFU unit alone (ex2.approx.ftz: results below 2^-126 flush to zero). exp2f (ex2.approx without .ftz)
// wraps the same MUFU in a compare and two predicated multiplies to return subnormal results: three of every four
// instructions of an exp (nvdisasm sm_90, session 28), for values that every caller multiplies into a sum of
// normal-sized terms or rounds to bf16. The host emulator's std::exp2 keeps subnormals (the kernels' tests compare
// against double within bounds, never bit for bit against a device).
RETRO_SIMT_DEVICE float exp2_fast(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}
// 2^x with subnormal results (exp2f): where a kernel's register allocation came out better with it (ptxas)
RETRO_SIMT_DEVICE float exp2_subnormal(float x) { return exp2f(x); }
// 16 bytes from global to shared memory without passing through registers (cp.async.cg, sm_80+; both addresses
// 16-byte aligned), zeros where !valid (src is then not read but must still be a valid address); the copy is
// complete and visible to this thread after async_wait_all, to the block after a sync_block that follows it.
RETRO_SIMT_DEVICE void copy16_async(void* smem_dst, const void* gmem_src, bool valid) {
    const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem_dst));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem_src), "r"(valid ? 16 : 0)
                 : "memory");
}
RETRO_SIMT_DEVICE void async_wait_all() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }
// Four floats from a 16-byte aligned address in one load.
RETRO_SIMT_DEVICE void load_float4(float (&x)[4], const float* p) {
    const float4 f = *reinterpret_cast<const float4*>(p);
    x[0] = f.x, x[1] = f.y, x[2] = f.z, x[3] = f.w;
}
// The same through the read-only data path (ld.global.nc: memory no thread writes while the kernel runs, e.g. a
// layer's weights), which the compiler picks by itself only where it can prove that (a `const __restrict__`
// kernel parameter), not for a pointer read from a struct in memory (a fused decode step's ops); one float alike.
RETRO_SIMT_DEVICE void load_float4_ro(float (&x)[4], const float* p) {
    const float4 f = __ldg(reinterpret_cast<const float4*>(p));
    x[0] = f.x, x[1] = f.y, x[2] = f.z, x[3] = f.w;
}
RETRO_SIMT_DEVICE float load_ro(const float* p) { return __ldg(p); }
// Four 8 x 8 matrices of 16-bit elements from shared memory in one warp instruction (ldmatrix.sync.aligned.m8n8.x4,
// sm_75+): lane l gives the address of row l % 8 of matrix l / 8 (16 bytes, 16-byte aligned); with g = l / 4,
// t = l % 4, r[i] gets matrix i's elements [g][2t] (low half) and [g][2t+1], or with TRANS [2t][g] and [2t+1][g]:
// the A, B and C fragment layouts above, so a fragment comes straight from a tile stored either way round.
template <bool TRANS>
RETRO_SIMT_DEVICE void ldmatrix_x4(std::uint32_t (&r)[4], const void* row_addr) {
    const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(row_addr));
    if constexpr (TRANS)
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(a));
    else
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(a));
}
// Programmatic dependent launch (sm_90+; no-ops on older devices, in a grid not launched as a dependent, and on the
// host): grid_dependency_wait blocks until the grids this one depends on have completed and their writes are
// visible (griddepcontrol.wait: call it before reading what an earlier kernel wrote or writing what it reads);
// launch_dependents lets the next grid in the stream start launching (it waits in its own grid_dependency_wait).
RETRO_SIMT_DEVICE void grid_dependency_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}
RETRO_SIMT_DEVICE void launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}
// A hint: bring the 128-byte line holding p into L2 (a weight a kernel reads before grid_dependency_wait returns).
RETRO_SIMT_DEVICE void prefetch_l2(const void* p) { asm volatile("prefetch.L2 [%0];\n" ::"l"(p)); }
// x, but the compiler may not treat it as known across this point: keeps a loop from hoisting values derived from x
// (e.g. 32 decay factors a lane) into registers it needs for the loop's own work
RETRO_SIMT_DEVICE float opaque(float x) {
    asm volatile("" : "+f"(x));
    return x;
}
RETRO_SIMT_DEVICE int opaque(int x) {
    asm volatile("" : "+r"(x));
    return x;
}
// a b rounded once, never fused with a later add into an fma: the same float on the device and the host emulator
RETRO_SIMT_DEVICE float mul_rn(float a, float b) { return __fmul_rn(a, b); }
// d += a b on the tensor cores (one warp, every lane with its fragments)
RETRO_SIMT_DEVICE void mma_bf16_16816(float (&d)[4], const std::uint32_t (&a)[4], const std::uint32_t (&b)[2]) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

#else

inline int thread_x() { return host::current_thread(); }
inline int block_threads() { return host::block_threads(); }
inline long long block_x() { return host::current_block_x(); }
inline long long block_y() { return host::current_block_y(); }
inline long long grid_x() { return host::current_grid_x(); }
inline unsigned char* dynamic_smem() { return host::dynamic_smem(); }
inline void sync_block() { host::sync_block(); }
inline void grid_sync() { host::grid_sync(); }
inline void thread_fence() {}   // (one OS thread: every write is seen at once)
inline std::uint32_t atomic_add_u32(std::uint32_t* p, std::uint32_t v) {   // fibers switch only at exchanges
    const std::uint32_t old = *p;
    *p += v;
    return old;
}
inline float load_cg(const float* p) { return *p; }
inline void sync_named(int id, int threads) { host::sync_named(id, threads); }
inline void atomic_add(std::uint64_t* p, std::uint64_t v) { *p += v; }   // fibers switch only at exchanges
inline std::uint32_t ballot(bool p) { return host::ballot(p); }
inline std::uint32_t shfl_idx_u32(std::uint32_t v, int src_lane) { return host::shfl_idx_u32(v, src_lane); }
inline std::uint64_t shfl_idx_u64(std::uint64_t v, int src_lane) { return host::shfl_idx_u64(v, src_lane); }
inline std::uint64_t warp_sum_u64(std::uint64_t v) { return host::warp_sum_u64(v); }
inline int lowest_lane(std::uint32_t mask) { return __builtin_ctz(mask); }
inline std::uint32_t float_bits(float x) {
    std::uint32_t u;
    std::memcpy(&u, &x, 4);
    return u;
}
inline void sync_warp() { host::sync_warp(); }
inline float shfl_xor(float v, int mask) { return host::shfl_xor(v, mask); }
inline float shfl_idx(float v, int src_lane) { return host::shfl_idx(v, src_lane); }
inline void copy16_async(void* smem_dst, const void* gmem_src, bool valid) { host::copy16_async(smem_dst, gmem_src, valid); }
inline void async_wait_all() { host::async_wait_all(); }
inline void load_float4(float (&x)[4], const float* p) {   // (a misaligned float4 load faults on the GPU)
    if (reinterpret_cast<std::uintptr_t>(p) % 16) throw std::logic_error("simt host: float4 load not 16-byte aligned");
    std::memcpy(x, p, sizeof x);
}
inline void load_float4_ro(float (&x)[4], const float* p) { load_float4(x, p); }
inline float load_ro(const float* p) { return *p; }
template <bool TRANS>
inline void ldmatrix_x4(std::uint32_t (&r)[4], const void* row_addr) { host::ldmatrix_x4(r, row_addr, TRANS); }
inline void grid_dependency_wait() {}
inline void launch_dependents() {}
inline void prefetch_l2(const void*) {}
inline float opaque(float x) { return x; }
inline int opaque(int x) { return x; }
inline float mul_rn(float a, float b) {
    volatile float p = a * b;   // (a store: the host compiler cannot contract it into a later add either)
    return p;
}
inline std::uint16_t bf16_bits(float x) {
    std::uint32_t u;
    std::memcpy(&u, &x, 4);
    u += 0x7fffu + ((u >> 16) & 1u);   // round to nearest even (no NaN reaches it here)
    return static_cast<std::uint16_t>(u >> 16);
}
inline float bf16_value(std::uint16_t b) {
    const std::uint32_t u = static_cast<std::uint32_t>(b) << 16;
    float x;
    std::memcpy(&x, &u, 4);
    return x;
}
inline float exp2_fast(float x) { return std::exp2(x); }
inline float exp2_subnormal(float x) { return std::exp2(x); }
inline void mma_bf16_16816(float (&d)[4], const std::uint32_t (&a)[4], const std::uint32_t (&b)[2]) {
    host::mma_bf16_16816(d, a, b, &bf16_value);
}

#endif

// This thread's index in a 1-D grid and the grid's thread count, as 64-bit integers (from the unsigned block and
// thread counts, as blockIdx.x * (long long)blockDim.x + threadIdx.x computes them): the grid-stride loops' start and
// stride.
RETRO_SIMT_DEVICE long long global_thread() {
    return block_x() * static_cast<long long>(static_cast<unsigned>(block_threads())) + static_cast<unsigned>(thread_x());
}
RETRO_SIMT_DEVICE long long grid_threads() { return grid_x() * static_cast<unsigned>(block_threads()); }

// Two floats as one register of two bf16 (lo in the low half: the lower column or row of the pair), each rounded to
// nearest even (on the GPU one cvt.rn.bf16x2.f32).
#if defined(__CUDACC__) && !defined(RETRO_SIMT_HOST)
RETRO_SIMT_DEVICE std::uint32_t pack_bf16x2(float lo, float hi) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);   // .x = lo, the low half
    std::uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    return bits;
}
#else
inline std::uint32_t pack_bf16x2(float lo, float hi) {
    return static_cast<std::uint32_t>(bf16_bits(lo)) | (static_cast<std::uint32_t>(bf16_bits(hi)) << 16);
}
#endif

}  // namespace retro::simt
