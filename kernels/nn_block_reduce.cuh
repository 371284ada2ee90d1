// The block size and the block-wide reduction of the CUDA NnBackend's kernels (kernels/nn_backend_common.cuh includes
// this), written against kernels/simt.cuh so that the host emulator (tests/simt_host.h) runs the device code that
// uses them too: attention_decode's (kernels/nn_attention_decode.cuh) in a fused decode step
// (tests/test_nn_decode_program_host.cpp).
// provides: kThreads, SumOp, MaxOp, block_reduce
#pragma once

#include <cmath>

#include "simt.cuh"

namespace retro::nn::detail {

constexpr int kThreads = 256;   // threads per block, every kernel (a power of two)

struct SumOp {
    template <typename T>
    RETRO_SIMT_HOST_DEVICE T operator()(T a, T b) const { return a + b; }
};
struct MaxOp {
    RETRO_SIMT_HOST_DEVICE float operator()(float a, float b) const { return fmaxf(a, b); }
};

// Reduces one value per thread over the block in a fixed tree (halving strides); every thread gets the result.
// `sh` is kThreads entries of shared memory; every thread of the block must call it.
template <typename T, typename Op>
RETRO_SIMT_DEVICE T block_reduce(T v, T* sh, Op op) {
    const unsigned t = static_cast<unsigned>(simt::thread_x());   // (unsigned, as threadIdx.x: the same PTX)
    sh[t] = v;
    simt::sync_block();
    for (int s = kThreads / 2; s > 0; s >>= 1) {
        if (static_cast<int>(t) < s) sh[t] = op(sh[t], sh[t + s]);
        simt::sync_block();
    }
    const T r = sh[0];
    simt::sync_block();   // sh may be reused at once
    return r;
}

}  // namespace retro::nn::detail
