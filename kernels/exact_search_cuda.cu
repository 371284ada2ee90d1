// CUDA build of lib/index/exact_search_cuda.h. For each block of queries and of base rows:
//   1. cublasSgemm: S[i][j] = q_i · x_{b0+j}, row-major (qc x nb), fp32 (pedantic math, no TF32);
//   2. topk_rows, one thread block per query row: each thread scans the row with stride
//      kThreads, keeps its own sorted list of the candidates that beat the running k-th score
//      (and pass the document filter), then k rounds of a block-wide arg-best over the threads'
//      list heads write the row's new running k best (thread 0's list starts from the old ones).
// Order everywhere is (score desc, id asc), as on the CPU; -1 / -inf pad rows with < k candidates.
// All of it runs on the caller's stream; every call is checked (cuda_check.cuh).
#include <algorithm>
#include <climits>
#include <cmath>
#include <vector>

#include "core/cuda_device.h"
#include "core/error.h"
#include "cuda_check.cuh"
#include "index/exact_search_cuda.h"

namespace retro {
namespace {

constexpr int kThreads = 128;
constexpr std::int64_t kScoreFloats = std::int64_t{64} << 20;   // S block: 256 MiB
constexpr std::int64_t kMaxQueryBlock = 4096;

// Device memory of `count` T, freed on scope exit; a user error when it does not fit.
template <typename T>
struct DeviceBuf {
    T* p = nullptr;
    DeviceBuf() = default;
    DeviceBuf(std::int64_t count, const char* what) {
        if (cudaMalloc(&p, static_cast<std::size_t>(std::max<std::int64_t>(count, 1)) * sizeof(T)) == cudaSuccess) return;
        cudaGetLastError();
        p = nullptr;
        std::size_t free_b = 0, total_b = 0;
        RETRO_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
        user_error_in("--device cuda", cat("exact search: ", what, " (", count * sizeof(T) / (1 << 20),
                                           " MiB) does not fit on the GPU (", free_b / (1 << 20), " MiB free)"),
                      "search on the CPU, or split the index (--shard)");
    }
    ~DeviceBuf() { RETRO_CUDA_CHECK_NOTHROW(cudaFree(p)); }
    DeviceBuf(const DeviceBuf&) = delete;
    DeviceBuf& operator=(const DeviceBuf&) = delete;
    DeviceBuf& operator=(DeviceBuf&& o) noexcept {
        std::swap(p, o.p);
        return *this;
    }
};

__device__ __forceinline__ bool better(float sa, long long ia, float sb, long long ib) {
    return sa > sb || (sa == sb && ia < ib);
}

// Merges row `row` of S (nb scores of base ids b0..b0+nb) into that query's running list.
__global__ void topk_rows(const float* __restrict__ S, long long nb, long long b0, int k,
                          const long long* __restrict__ qdocs, const long long* __restrict__ bdocs,
                          float* __restrict__ run_s, long long* __restrict__ run_i) {
    const int row = blockIdx.x, tid = threadIdx.x;
    const float* s = S + static_cast<long long>(row) * nb;
    float* rs = run_s + static_cast<long long>(row) * k;
    long long* ri = run_i + static_cast<long long>(row) * k;
    const long long qdoc = qdocs ? qdocs[row] : 0;

    float ls[kCudaExactMaxK];
    long long li[kCudaExactMaxK];
    int len = 0;
    if (tid == 0)
        for (int r = 0; r < k && ri[r] >= 0; ++r) ls[len] = rs[r], li[len] = ri[r], ++len;
    // the running k-th best: every new id is larger, so a new score must beat it strictly
    const float run_kth = ri[k - 1] >= 0 ? rs[k - 1] : -INFINITY;
    float thr = run_kth;
    if (tid == 0 && len == k) thr = ls[k - 1];
    for (long long j = tid; j < nb; j += kThreads) {
        const float v = s[j];
        if (!(v > thr)) continue;
        const long long id = b0 + j;
        if (bdocs && bdocs[id] == qdoc) continue;
        int p = len < k ? len : k - 1;          // insertion position, from the end
        while (p > 0 && better(v, id, ls[p - 1], li[p - 1])) {
            if (p < k) ls[p] = ls[p - 1], li[p] = li[p - 1];
            --p;
        }
        ls[p] = v, li[p] = id;
        if (len < k) ++len;
        if (len == k) thr = fmaxf(run_kth, ls[k - 1]);
    }

    __shared__ float ws[kThreads / 32];
    __shared__ long long wi[kThreads / 32];
    __shared__ long long winner;
    int head = 0;
    for (int r = 0; r < k; ++r) {
        float hs = head < len ? ls[head] : -INFINITY;
        long long hi = head < len ? li[head] : LLONG_MAX;
        for (int off = 16; off > 0; off >>= 1) {
            float os = __shfl_down_sync(0xffffffffu, hs, off);
            long long oi = __shfl_down_sync(0xffffffffu, hi, off);
            if (better(os, oi, hs, hi)) hs = os, hi = oi;
        }
        if ((tid & 31) == 0) ws[tid >> 5] = hs, wi[tid >> 5] = hi;
        __syncthreads();
        if (tid == 0) {
            for (int w = 1; w < kThreads / 32; ++w)
                if (better(ws[w], wi[w], hs, hi)) hs = ws[w], hi = wi[w];
            winner = hi;
            rs[r] = hi == LLONG_MAX ? -INFINITY : hs;
            ri[r] = hi == LLONG_MAX ? -1 : hi;
        }
        __syncthreads();
        if (head < len && li[head] == winner) ++head;
    }
}

__global__ void fill_empty(float* run_s, long long* run_i, long long count) {
    long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
    if (i < count) run_s[i] = -INFINITY, run_i[i] = -1;
}

// The searcher: the base (and its document ids) stay on device 0 across calls.
class CudaExactSearchImpl final : public CudaExactSearch {
public:
    CudaExactSearchImpl(const float* base, std::int64_t n, int d, const std::int64_t* base_docs, CudaStream stream);
    ~CudaExactSearchImpl() override {
        if (handle_) RETRO_CUBLAS_CHECK_NOTHROW(cublasDestroy(handle_));
    }
    void search(const float* queries, std::int64_t m, const std::int64_t* query_docs, int k, std::int64_t* ids,
                float* scores, CudaStream stream, std::int64_t query_block, std::int64_t base_block) override;

private:
    cublasHandle_t handle_ = nullptr;
    DeviceBuf<float> base_;
    DeviceBuf<long long> base_docs_;
    std::int64_t n_ = 0;
    int d_ = 0;
};

CudaExactSearchImpl::CudaExactSearchImpl(const float* base, std::int64_t n, int d, const std::int64_t* base_docs,
                                         CudaStream stream) {
    cuda_require("--device cuda", "RetroKit", "search on the CPU (--device cpu)");
    cuda_stream_require(stream, "CudaExactSearch::upload");
    RETRO_CHECK(d > 0 && n >= 0, "d=", d, " n=", n);
    RETRO_CUDA_CHECK(cudaSetDevice(0));
    n_ = n;
    d_ = d;
    const CudaWaitOnThrow wait_on_throw(stream);   // a throw below leaves the base's copies queued
    base_ = DeviceBuf<float>(n * d, "the base vectors");
    RETRO_CUDA_CHECK(cudaMemcpyAsync(base_.p, base, static_cast<std::size_t>(n * d) * sizeof(float),
                                     cudaMemcpyHostToDevice, stream));
    if (base_docs) {
        base_docs_ = DeviceBuf<long long>(n, "the base document ids");
        RETRO_CUDA_CHECK(
            cudaMemcpyAsync(base_docs_.p, base_docs, static_cast<std::size_t>(n) * 8, cudaMemcpyHostToDevice, stream));
    }
    RETRO_CUBLAS_CHECK(cublasCreate(&handle_));
    RETRO_CUBLAS_CHECK(cublasSetMathMode(handle_, CUBLAS_PEDANTIC_MATH));   // fp32, no TF32
    RETRO_CUDA_CHECK(cudaStreamSynchronize(stream));   // searches may come on another stream
}

void CudaExactSearchImpl::search(const float* queries, std::int64_t m, const std::int64_t* query_docs, int k,
                                 std::int64_t* ids, float* scores, CudaStream stream, std::int64_t query_block,
                                 std::int64_t base_block) {
    static_assert(sizeof(long long) == sizeof(std::int64_t));
    cuda_stream_require(stream, "CudaExactSearch::search");
    if (k < 1 || k > kCudaExactMaxK)
        user_error_in("--neighbours", cat("exact search on CUDA takes 1 to ", kCudaExactMaxK, " neighbours, got ", k),
                      "search on the CPU (--device cpu)");
    if (m == 0) return;
    RETRO_CUBLAS_CHECK(cublasSetStream(handle_, stream));
    const std::int64_t n = n_;
    const int d = d_;
    const std::int64_t qb = std::min(m, query_block > 0 ? query_block : kMaxQueryBlock);
    const std::int64_t nb_max = std::max<std::int64_t>(1, std::min(n, base_block > 0 ? base_block : kScoreFloats / qb));
    DeviceBuf<float> dq(qb * d, "a query block"), S(qb * nb_max, "the score block"), rs(qb * k, "the running scores");
    DeviceBuf<long long> ri(qb * k, "the running ids"), dqd;
    const bool filter = base_docs_.p && query_docs;
    if (filter) dqd = DeviceBuf<long long>(qb, "the query document ids");
    const CudaWaitOnThrow wait_on_throw(stream);   // (after the buffers: a throw waits for their kernels, then frees them)
    const float one = 1.0f, zero = 0.0f;
    for (std::int64_t q0 = 0; q0 < m; q0 += qb) {
        const std::int64_t qc = std::min(qb, m - q0);
        RETRO_CUDA_CHECK(cudaMemcpyAsync(dq.p, queries + q0 * d, static_cast<std::size_t>(qc * d) * sizeof(float),
                                         cudaMemcpyHostToDevice, stream));
        if (filter)
            RETRO_CUDA_CHECK(
                cudaMemcpyAsync(dqd.p, query_docs + q0, static_cast<std::size_t>(qc) * 8, cudaMemcpyHostToDevice, stream));
        fill_empty<<<static_cast<unsigned>((qc * k + 255) / 256), 256, 0, stream>>>(rs.p, ri.p, qc * k);
        RETRO_CUDA_LAUNCH_CHECK("fill_empty", stream);
        for (std::int64_t b0 = 0; b0 < n; b0 += nb_max) {
            const std::int64_t nb = std::min(nb_max, n - b0);
            // column-major view: S^T (nb x qc) = X_blk (d x nb)^T * Q_blk^T (d x qc)
            RETRO_CUBLAS_CHECK(cublasSgemm(handle_, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(nb), static_cast<int>(qc), d,
                                           &one, base_.p + b0 * d, d, dq.p, d, &zero, S.p, static_cast<int>(nb)));
            RETRO_CUDA_SYNC_POINT("cublasSgemm (scores)", stream);
            topk_rows<<<static_cast<unsigned>(qc), kThreads, 0, stream>>>(S.p, nb, b0, k, filter ? dqd.p : nullptr,
                                                                          filter ? base_docs_.p : nullptr, rs.p, ri.p);
            RETRO_CUDA_LAUNCH_CHECK("topk_rows", stream);
        }
        RETRO_CUDA_CHECK(cudaMemcpyAsync(scores + q0 * k, rs.p, static_cast<std::size_t>(qc * k) * sizeof(float),
                                         cudaMemcpyDeviceToHost, stream));
        RETRO_CUDA_CHECK(
            cudaMemcpyAsync(ids + q0 * k, ri.p, static_cast<std::size_t>(qc * k) * 8, cudaMemcpyDeviceToHost, stream));
    }
    RETRO_CUDA_CHECK(cudaStreamSynchronize(stream));   // the results are in ids/scores; the buffers may go
}

}  // namespace

std::unique_ptr<CudaExactSearch> CudaExactSearch::upload(const float* base, std::int64_t n, int d,
                                                         const std::int64_t* base_docs, CudaStream stream) {
    return std::make_unique<CudaExactSearchImpl>(base, n, d, base_docs, stream);
}

void exact_search_ip_cuda(const float* queries, std::int64_t m, const float* base, std::int64_t n, int d,
                          const ExactSearchOptions& opts, std::int64_t* ids, float* scores, CudaStream stream) {
    RETRO_CHECK((opts.query_docs == nullptr) == (opts.base_docs == nullptr), "doc filter needs both arrays");
    CudaExactSearchImpl searcher(base, n, d, opts.base_docs, stream);
    searcher.search(queries, m, opts.query_docs, opts.k, ids, scores, stream, opts.query_block, opts.base_block);
}

}  // namespace retro
