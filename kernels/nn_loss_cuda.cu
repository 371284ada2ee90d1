// CUDA NnBackend ops (nn/nn_backend.h) around the loss and the update:
//   cross_entropy_forward  one block per row: max, then the sum of exp(l - max) (block_reduce's fixed tree),
//                          lse = max + log(sum), the row's loss lse - l[target] (0 on ignored rows) into a
//                          scratch; the row losses and the targets are downloaded and summed on the host in row
//                          order in double, as nn/cross_entropy.cpp does (the targets are checked there too);
//   cross_entropy_backward one thread per logit: exp(l - lse) scale, minus scale at the target, 0 on ignored rows;
//   residual_sum / residual_add: map_elements (float4s where aligned); gather_rows / gather_add_rows /
//                          scatter_rows: one thread per element;
//   sum_squares            each block's threads accumulate x^2 in double (grid-stride, a fixed block count), a
//                          fixed tree per block, and the per-block partials are downloaded and added on the host
//                          in block order;
//   adamw_update           one thread per element, train/adamw.cpp's arithmetic in float.
#include <algorithm>
#include <climits>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "cuda_check.cuh"
#include "nn/nn_backend_cuda.h"
#include "nn_backend_common.cuh"
#include "nn_row_copies.cuh"

namespace retro::nn::detail {
namespace {

using ll = long long;
constexpr int kSumBlocks = 256;   // sum_squares: a fixed block count, so the summation order depends on n only

__global__ void cross_entropy_rows(float* __restrict__ lse, float* __restrict__ row_loss,
                                   const float* __restrict__ logits, const std::int32_t* __restrict__ targets, ll N,
                                   ll V, std::int32_t ignore_index) {
    __shared__ float sh[kThreads];
    for (ll n = blockIdx.x; n < N; n += gridDim.x) {
        const float* l = logits + n * V;
        float mx = -INFINITY;
        for (ll j = threadIdx.x; j < V; j += kThreads) mx = fmaxf(mx, l[j]);
        mx = block_reduce(mx, sh, MaxOp{});
        float sum = 0;
        for (ll j = threadIdx.x; j < V; j += kThreads) sum += expf(l[j] - mx);
        sum = block_reduce(sum, sh, SumOp{});
        if (threadIdx.x == 0) {
            const float r = mx + logf(sum);
            lse[n] = r;
            const std::int32_t t = targets[n];
            // an out-of-range target is reported by the host (it reads the targets); never read outside the row
            row_loss[n] = t == ignore_index ? 0.0f : (t >= 0 && t < V) ? r - l[t] : NAN;
        }
    }
}

__global__ void cross_entropy_backward_k(float* __restrict__ dlogits, const float* __restrict__ logits,
                                         const float* __restrict__ lse, const std::int32_t* __restrict__ targets,
                                         ll N, ll V, std::int32_t ignore_index, float scale, bool none_valid) {
    for (ll e = blockIdx.x * static_cast<ll>(blockDim.x) + threadIdx.x; e < N * V; e += static_cast<ll>(gridDim.x) * blockDim.x)
        dlogits[e] = cross_entropy_grad(logits, lse, targets, e / V, e % V, V, ignore_index, scale, none_valid);
}

struct CrossEntropyGradTerm {   // cross_entropy_linear_backward's dy[n, j]: db's summed term and its bf16 copy
    const float *logits, *lse;
    const std::int32_t* targets;
    ll V;
    std::int32_t ignore_index;
    float scale;
    bool none_valid;
    __device__ float operator()(ll n, ll j) const {
        return cross_entropy_grad(logits, lse, targets, n, j, V, ignore_index, scale, none_valid);
    }
};

template <bool ADD>
__global__ void gather_rows_k(float* __restrict__ dst, const float* __restrict__ src, const std::int64_t* __restrict__ index,
                              ll rows, ll C) {
    for (ll e = blockIdx.x * static_cast<ll>(blockDim.x) + threadIdx.x; e < rows * C; e += static_cast<ll>(gridDim.x) * blockDim.x) {
        const ll r = index[e / C];
        if (ADD) {
            if (r >= 0) dst[e] += src[r * C + e % C];
        } else {
            dst[e] = r >= 0 ? src[r * C + e % C] : 0.0f;
        }
    }
}

__global__ void scatter_rows_k(float* __restrict__ dst, const float* __restrict__ src,
                               const std::int64_t* __restrict__ index, ll rows, ll C) {
    copies::scatter_rows_elements(dst, src, index, rows, C);   // (kernels/nn_row_copies.cuh: also a fused op)
}

__global__ void sum_squares_blocks(double* __restrict__ partials, const float* __restrict__ x, ll n) {
    __shared__ double sh[kThreads];
    double acc = 0;
    for (ll i = blockIdx.x * static_cast<ll>(blockDim.x) + threadIdx.x; i < n; i += static_cast<ll>(gridDim.x) * blockDim.x)
        acc += static_cast<double>(x[i]) * x[i];
    acc = block_reduce(acc, sh, SumOp{});
    if (threadIdx.x == 0) partials[blockIdx.x] = acc;
}

__global__ void adamw_k(float* __restrict__ p, const float* __restrict__ g, float* __restrict__ m, float* __restrict__ v,
                        const std::uint8_t* __restrict__ decay, ll n, NnBackend::AdamWScalars a) {
    for (ll i = blockIdx.x * static_cast<ll>(blockDim.x) + threadIdx.x; i < n; i += static_cast<ll>(gridDim.x) * blockDim.x) {
        const float gi = g[i];
        float pi = p[i];
        if (decay[i]) pi *= a.decay;
        const float mi = m[i] + a.w1 * (gi - m[i]);
        const float vi = v[i] * a.b2 + a.w2 * (gi * gi);
        const float denom = sqrtf(vi) / a.bc2_sqrt + a.eps;
        m[i] = mi;
        v[i] = vi;
        p[i] = pi + (-a.step_size) * (mi / denom);
    }
}

}  // namespace

float CudaNnBackend::cross_entropy_forward(float* lse, std::int64_t* valid, const float* logits,
                                           const std::int32_t* targets, std::int64_t N, std::int64_t V,
                                           std::int32_t ignore_index) {
    refuse_while_capturing("cross_entropy_forward");
    *valid = 0;
    if (N == 0) return 0.0f;
    RETRO_CHECK(V > 0, "cross-entropy over an empty vocabulary");
    float* row_loss = static_cast<float*>(scratch(rows_, static_cast<std::size_t>(N) * sizeof(float)));
    cross_entropy_rows<<<grid_for(N, 1), kThreads, 0, stream_>>>(lse, row_loss, logits, targets, N, V, ignore_index);
    RETRO_CUDA_LAUNCH_CHECK("cross_entropy_rows", stream_);
    std::vector<float> loss(static_cast<std::size_t>(N));
    std::vector<std::int32_t> t(static_cast<std::size_t>(N));
    download(loss.data(), row_loss, loss.size() * sizeof(float));
    download(t.data(), targets, t.size() * sizeof(std::int32_t));
    std::int64_t m = 0;
    double total = 0;   // (in double, in row order, as nn/cross_entropy.cpp)
    for (std::int64_t n = 0; n < N; n++)
        if (t[n] != ignore_index) {
            RETRO_CHECK(t[n] >= 0 && t[n] < V, "target ", t[n], " outside [0, ", V, ")");
            m++;
            total += static_cast<double>(loss[n]);
        }
    *valid = m;
    return m ? static_cast<float>(total / static_cast<double>(m)) : 0.0f;
}

void CudaNnBackend::cross_entropy_backward(float* dlogits, float dloss, const float* logits, const float* lse,
                                           const std::int32_t* targets, std::int64_t N, std::int64_t V,
                                           std::int32_t ignore_index, std::int64_t valid) {
    if (N * V == 0) return;
    const float scale = valid ? dloss / static_cast<float>(valid) : 0.0f;
    cross_entropy_backward_k<<<grid_for(N * V), kThreads, 0, stream_>>>(dlogits, logits, lse, targets, N, V,
                                                                        ignore_index, scale, valid == 0);
    RETRO_CUDA_LAUNCH_CHECK("cross_entropy_backward", stream_);
}

// bf16 mode with dW and db: the logits' gradient computed in db's first column-sum pass and written only as its bf16
// copy (slot 0, what linear_backward would have rounded), then linear_backward's GEMMs on it; otherwise the two ops.
// dlogits is then never touched (cross_entropy_linear_backward_uses_dlogits: the model's arena leaves it out).
bool CudaNnBackend::cross_entropy_linear_backward_uses_dlogits(bool with_dW, bool with_db) const {
    return !fused_cross_entropy_linear_backward(with_dW, with_db);
}

void CudaNnBackend::cross_entropy_linear_backward(float* dx, float* dW, float* db, float* dlogits, float dloss,
                                                  const float* logits, const float* lse, const std::int32_t* targets,
                                                  std::int32_t ignore_index, std::int64_t valid, const float* x,
                                                  const float* W, std::int64_t N, std::int64_t I, std::int64_t V) {
    if (!fused_cross_entropy_linear_backward(dW != nullptr, db != nullptr) || N <= 0 || I <= 0 || V <= 0)
        return NnBackend::cross_entropy_linear_backward(dx, dW, db, dlogits, dloss, logits, lse, targets, ignore_index,
                                                        valid, x, W, N, I, V);
    const float scale = valid ? dloss / static_cast<float>(valid) : 0.0f;   // as cross_entropy_backward
    bf16_linear_backward_of(dx, dW, db, CrossEntropyGradTerm{logits, lse, targets, V, ignore_index, scale, valid == 0},
                            to_bf16(2, x, N * I), W, N, I, V, "cross_entropy_linear_backward");
}

void CudaNnBackend::residual_sum(float* dst, const float* a, const float* b, std::int64_t n) {
    if (n == 0) return;
    map_elements(stream_, dst, a, b, n, SumOp{});
    RETRO_CUDA_LAUNCH_CHECK("residual_sum", stream_);
}
void CudaNnBackend::residual_add(float* dst, const float* src, std::int64_t n) {
    if (n == 0) return;
    map_elements(stream_, dst, dst, src, n, SumOp{});   // dst + src: the bits of dst += src
    RETRO_CUDA_LAUNCH_CHECK("residual_add", stream_);
}
void CudaNnBackend::gather_rows(float* dst, const float* src, const std::int64_t* index, std::int64_t rows,
                                std::int64_t C) {
    if (rows * C == 0) return;
    gather_rows_k<false><<<grid_for(rows * C), kThreads, 0, stream_>>>(dst, src, index, rows, C);
    RETRO_CUDA_LAUNCH_CHECK("gather_rows", stream_);
}
void CudaNnBackend::gather_add_rows(float* dst, const float* src, const std::int64_t* index, std::int64_t rows,
                                    std::int64_t C) {
    if (rows * C == 0) return;
    gather_rows_k<true><<<grid_for(rows * C), kThreads, 0, stream_>>>(dst, src, index, rows, C);
    RETRO_CUDA_LAUNCH_CHECK("gather_add_rows", stream_);
}

void CudaNnBackend::scatter_rows(float* dst, const float* src, const std::int64_t* index, std::int64_t rows,
                                 std::int64_t C) {
    if (rows * C == 0) return;
    scatter_rows_k<<<grid_for(rows * C), kThreads, 0, stream_>>>(dst, src, index, rows, C);
    RETRO_CUDA_LAUNCH_CHECK("scatter_rows", stream_);
}

double CudaNnBackend::sum_squares(const float* x, std::int64_t n) {
    refuse_while_capturing("sum_squares");
    if (n == 0) return 0.0;
    double* partials = static_cast<double*>(scratch(partials_, kSumBlocks * sizeof(double)));
    sum_squares_blocks<<<kSumBlocks, kThreads, 0, stream_>>>(partials, x, n);
    RETRO_CUDA_LAUNCH_CHECK("sum_squares_blocks", stream_);
    std::vector<double> host(kSumBlocks);
    download(host.data(), partials, host.size() * sizeof(double));
    double sq = 0;
    for (double p : host) sq += p;
    return sq;
}

void CudaNnBackend::adamw_update(float* p, const float* g, float* m, float* v, const std::uint8_t* decay,
                                 std::int64_t n, const AdamWScalars& a) {
    if (n == 0) return;
    adamw_k<<<grid_for(n), kThreads, 0, stream_>>>(p, g, m, v, decay, n, a);
    RETRO_CUDA_LAUNCH_CHECK("adamw_update", stream_);
}

}  // namespace retro::nn::detail
