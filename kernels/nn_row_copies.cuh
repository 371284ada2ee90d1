// Element-per-thread row copies of a decode step, as device functions: the kernels of kernels/nn_embedding_cuda.cu
// and kernels/nn_loss_cuda.cu call them, and so does a fused decode step (kernels/nn_decode_program_cuda.cu), so the
// two give the same bits. Grid-stride over the elements: any grid. Written against kernels/simt.cuh (the host emulator
// runs them too: tests/test_nn_decode_program_host.cpp).
// provides: embedding_rows, scatter_rows_elements, zero_elements, sum_elements
#pragma once

#include <cstdint>

#include "simt.cuh"

namespace retro::nn::detail::copies {

using ll = long long;

RETRO_SIMT_DEVICE ll first_element() { return simt::global_thread(); }
RETRO_SIMT_DEVICE ll element_stride() { return simt::grid_threads(); }

// out[n, c] = table[ids[n], c], plus pos_table[pos_index[n], c] where pos_index is given and pos_index[n] >= 0 (the
// sum gather_add_rows would make after it: the same float)
RETRO_SIMT_DEVICE void embedding_rows(float* __restrict__ out, const std::int32_t* __restrict__ ids,
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
RETRO_SIMT_DEVICE void scatter_rows_elements(float* __restrict__ dst, const float* __restrict__ src,
                                                      const std::int64_t* __restrict__ index, ll rows, ll C) {
    for (ll e = first_element(); e < rows * C; e += element_stride()) {
        const ll r = index[e / C];
        if (r >= 0) dst[r * C + e % C] = src[e];
    }
}

// out[i] = 0 (cudaMemsetAsync's bits) and out[i] = a[i] + b[i] (map_elements' SumOp, float4 or not: the same sums)
// for i < n: a fused decode step's zero and residual_sum
RETRO_SIMT_DEVICE void zero_elements(float* __restrict__ out, ll n) {
    for (ll i = first_element(); i < n; i += element_stride()) out[i] = 0.0f;
}
RETRO_SIMT_DEVICE void sum_elements(float* out, const float* a, const float* b, ll n) {
    for (ll i = first_element(); i < n; i += element_stride()) out[i] = a[i] + b[i];
}

}  // namespace retro::nn::detail::copies
