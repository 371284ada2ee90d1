// CUDA NnBackend ops (nn/nn_backend.h) of the token and position embeddings:
//   embedding_forward      one thread per element, out[n, c] = table[ids[n], c] (embedding_position_forward: plus
//                          a position row, the decoder's step in one launch);
//   embedding_backward     all on the device, no wait for the stream: the ids sorted with their row numbers
//                          (CUB's radix sort, which is stable: each id's rows stay in ascending order), then one
//                          thread per (sorted position, channel) where a run of equal ids starts adds that id's rows
//                          in ascending n into dtable — the CPU's order (nn/embedding.cpp adds row by row in n), so
//                          the same float bits as the CPU, and repeated ids never race;
//   position_add_forward   one thread per element, out[b, t, c] += pos[t, c];
//   position_add_backward  one thread per (t, c), adding b in order.
#include <climits>
#include <cstddef>

#include <cub/device/device_radix_sort.cuh>

#include "core/error.h"
#include "cuda_check.cuh"
#include "nn/nn_backend_cuda.h"
#include "nn_backend_common.cuh"
#include "nn_row_copies.cuh"

namespace retro::nn::detail {
namespace {

using ll = long long;

// (kernels/nn_row_copies.cuh's embedding_rows: also a fused decode step's op)
__global__ void embedding_forward_k(float* __restrict__ out, const std::int32_t* __restrict__ ids,
                                    const float* __restrict__ table, ll N, ll C,
                                    const std::int64_t* __restrict__ pos_index = nullptr,
                                    const float* __restrict__ pos_table = nullptr) {
    copies::embedding_rows(out, ids, table, N, C, pos_index, pos_table);
}

__global__ void row_numbers_k(std::int32_t* __restrict__ rows, ll N) {
    for (ll i = blockIdx.x * static_cast<ll>(blockDim.x) + threadIdx.x; i < N; i += static_cast<ll>(gridDim.x) * blockDim.x)
        rows[i] = static_cast<std::int32_t>(i);
}

// sorted_ids / rows: the ids in ascending order and the row each came from (ascending within an id). Thread
// (k, c) works only where a run of equal ids starts at k: it adds the run's rows of dout, in order, to
// dtable[id, c]. Threads of a warp share k and take consecutive c, so the loads are coalesced.
__global__ void embedding_backward_k(float* __restrict__ dtable, const float* __restrict__ dout,
                                     const std::int32_t* __restrict__ sorted_ids,
                                     const std::int32_t* __restrict__ rows, ll N, ll C) {
    for (ll e = blockIdx.x * static_cast<ll>(blockDim.x) + threadIdx.x; e < N * C; e += static_cast<ll>(gridDim.x) * blockDim.x) {
        const ll k = e / C, c = e % C;
        const std::int32_t id = sorted_ids[k];
        if (k > 0 && sorted_ids[k - 1] == id) continue;   // not the start of its id's run
        float* d = dtable + static_cast<ll>(id) * C + c;
        float acc = *d;
        for (ll j = k; j < N && sorted_ids[j] == id; j++) acc += dout[static_cast<ll>(rows[j]) * C + c];
        *d = acc;
    }
}

__global__ void position_add_forward_k(float* __restrict__ out, const float* __restrict__ pos, ll B, ll Tn, ll C) {
    for (ll e = blockIdx.x * static_cast<ll>(blockDim.x) + threadIdx.x; e < B * Tn * C; e += static_cast<ll>(gridDim.x) * blockDim.x)
        out[e] += pos[((e / C) % Tn) * C + e % C];
}

__global__ void position_add_backward_k(float* __restrict__ dpos, const float* __restrict__ dout, ll B, ll Tn, ll C) {
    for (ll e = blockIdx.x * static_cast<ll>(blockDim.x) + threadIdx.x; e < Tn * C; e += static_cast<ll>(gridDim.x) * blockDim.x) {
        const ll t = e / C, c = e % C;
        float acc = dpos[e];
        for (ll b = 0; b < B; b++) acc += dout[(b * Tn + t) * C + c];
        dpos[e] = acc;
    }
}

constexpr std::size_t kAlign = 256;
std::size_t aligned(std::size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

}  // namespace

void CudaNnBackend::embedding_forward(float* out, const std::int32_t* ids, const float* table, std::int64_t N,
                                      std::int64_t, std::int64_t C) {
    if (N * C == 0) return;   // ids are valid: the caller checks them on the host (nn/nn_backend.h)
    embedding_forward_k<<<grid_for(N * C), kThreads, 0, stream_>>>(out, ids, table, N, C);
    RETRO_CUDA_LAUNCH_CHECK("embedding_forward", stream_);
}

void CudaNnBackend::embedding_position_forward(float* out, const std::int32_t* ids, const float* table,
                                               const std::int64_t* pos_index, const float* pos_table, std::int64_t N,
                                               std::int64_t V, std::int64_t C) {
    if (N * C == 0) return;
    if (unfused(FusedOp::embedding_position_forward))
        return NnBackend::embedding_position_forward(out, ids, table, pos_index, pos_table, N, V, C);
    embedding_forward_k<<<grid_for(N * C), kThreads, 0, stream_>>>(out, ids, table, N, C, pos_index, pos_table);
    RETRO_CUDA_LAUNCH_CHECK("embedding_position_forward", stream_);
}

void CudaNnBackend::embedding_backward(float* dtable, const float* dout, const std::int32_t* ids, std::int64_t N,
                                       std::int64_t C) {
    if (N * C == 0) return;
    RETRO_CHECK(N <= INT_MAX, "nn backend (cuda): embedding_backward of ", N, " ids: row numbers are int32");
    const int n = static_cast<int>(N);
    // one scratch: [sorted ids (N)][row numbers (N)][sorted row numbers (N)][CUB's temporary storage]
    std::size_t temp_bytes = 0;
    RETRO_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, ids, static_cast<std::int32_t*>(nullptr),
                                                     static_cast<const std::int32_t*>(nullptr),
                                                     static_cast<std::int32_t*>(nullptr), n, 0, 32, stream_));
    const std::size_t part = aligned(static_cast<std::size_t>(n) * sizeof(std::int32_t));
    auto* base = static_cast<char*>(scratch(emb_, 3 * part + temp_bytes));
    auto* sorted_ids = reinterpret_cast<std::int32_t*>(base);
    auto* rows = reinterpret_cast<std::int32_t*>(base + part);
    auto* sorted_rows = reinterpret_cast<std::int32_t*>(base + 2 * part);
    row_numbers_k<<<grid_for(N), kThreads, 0, stream_>>>(rows, N);
    RETRO_CUDA_LAUNCH_CHECK("embedding_backward (row numbers)", stream_);
    RETRO_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(base + 3 * part, temp_bytes, ids, sorted_ids, rows, sorted_rows,
                                                     n, 0, 32, stream_));
    RETRO_CUDA_LAUNCH_CHECK("embedding_backward (cub radix sort)", stream_);
    embedding_backward_k<<<grid_for(N * C), kThreads, 0, stream_>>>(dtable, dout, sorted_ids, sorted_rows, N, C);
    RETRO_CUDA_LAUNCH_CHECK("embedding_backward", stream_);
}

void CudaNnBackend::position_add_forward(float* out, const float* pos, std::int64_t B, std::int64_t Tn,
                                         std::int64_t C) {
    if (B * Tn * C == 0) return;
    position_add_forward_k<<<grid_for(B * Tn * C), kThreads, 0, stream_>>>(out, pos, B, Tn, C);
    RETRO_CUDA_LAUNCH_CHECK("position_add_forward", stream_);
}

void CudaNnBackend::position_add_backward(float* dpos, const float* dout, std::int64_t B, std::int64_t Tn,
                                          std::int64_t C) {
    if (Tn * C == 0) return;
    position_add_backward_k<<<grid_for(Tn * C), kThreads, 0, stream_>>>(dpos, dout, B, Tn, C);
    RETRO_CUDA_LAUNCH_CHECK("position_add_backward", stream_);
}

}  // namespace retro::nn::detail
