// Element-per-thread row copies of a decode step, as device functions: the kernels of kernels/nn_embedding_cuda.cu
// and kernels/nn_loss_cuda.cu call them, and so does a fused decode step (kernels/nn_decode_program_cuda.cu), so the
// two give the same bits. Grid-stride over the elements: any grid.
// provides: embedding_rows, scatter_rows_elements
#pragma once

#include <cstdint>

namespace retro::nn::detail::copies {

using ll = long long;

__device__ __forceinline__ ll first_element() { return blockIdx.x * static_cast<ll>(blockDim.x) + threadIdx.x; }
__device__ __forceinline__ ll element_stride() { return static_cast<ll>(gridDim.x) * blockDim.x; }

// out[n, c] = table[ids[n], c], plus pos_table[pos_index[n], c] where pos_index is given and pos_index[n] >= 0 (the
// sum gather_add_rows would make after it: the same float)
__device__ __forceinline__ void embedding_rows(float* __restrict__ out, const std::int32_t* __restrict__ ids,
                                               const float* __restrict__ table, ll N, ll C,
                                               const std::int64_t* __restrict__ pos_index,
                                               const float* __restrict__ pos_table) {
    for (ll e = first_element(); e < N * C; e += element_stride()) {
        const ll n = e / C, c = e % C;
        const float t = table[static_cast<ll>(ids[n]) * C + c];
        const ll p = pos_index ? pos_index[n] : -1;
        out[e] = p >= 0 ? t + pos_table[p * C + c] : t;
    }
}

// dst[index[i], :] = src[i, :] where index[i] >= 0
__device__ __forceinline__ void scatter_rows_elements(float* __restrict__ dst, const float* __restrict__ src,
                                                      const std::int64_t* __restrict__ index, ll rows, ll C) {
    for (ll e = first_element(); e < rows * C; e += element_stride()) {
        const ll r = index[e / C];
        if (r >= 0) dst[r * C + e % C] = src[e];
    }
}

}  // namespace retro::nn::detail::copies
