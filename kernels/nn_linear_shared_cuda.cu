// CUDA NnBackend::linear_forward_shared / linear_backward_shared (nn/nn_backend.h): linear layers without bias that
// read one input — an attention's q, k, v projections of x (three), or k, v of the context (two). The separate
// layers (linear_forward, linear_backward) would round x to bf16 once per layer and direction, write each dx path to
// a temporary and add the temporaries with residual_add; here:
//   forward   x rounded once (bf16 mode); where the W[i] lie back to back and the y[i] at one stride (the model's
//             parameter layout and arena), one strided-batched GEMM y[i] = x W[i]^T, B's stride 0 (every product
//             reads the same x); otherwise one GEMM a layer, still on the one rounded x;
//   backward  dx = dy[0] W[0], then dx += dy[i] W[i] in i order (cuBLAS's beta = 1: the sum of the separate layers'
//             dx in the same order; the products' own rounding may differ from linear_backward's, cuBLAS picking its
//             kernel per call); dW[i] += dy[i]^T x as one strided-batched GEMM (x's stride 0) where the dy[i] lie at
//             one stride (in bf16: back to back, rounded in one pass) and the dW[i] back to back, else one GEMM a
//             layer; x rounded once.
// A few-row call in fp32 (a decode step) takes the separate layers' path (the few-row GEMV).
#include <climits>
#include <cstdint>

#include "core/cuda_check.h"
#include "core/error.h"
#include "cuda_check.cuh"
#include "nn/nn_backend_cuda.h"
#include "nn_backend_common.cuh"
#include "nn_gemv.cuh"

namespace retro::nn::detail {
namespace {

using ll = long long;

// The element stride between consecutive pointers p[0..count) when it is one stride of at least `span` elements
// (0 for a single pointer), else -1 (compared as addresses: the pointers may be different allocations).
template <typename T>
ll uniform_stride(T* const* p, int count, ll span) {
    if (count <= 1) return 0;
    auto at = [&](int i) { return static_cast<ll>(reinterpret_cast<std::uintptr_t>(p[i])); };
    const ll bytes = at(1) - at(0);
    if (bytes % static_cast<ll>(sizeof(T)) != 0 || bytes / static_cast<ll>(sizeof(T)) < span) return -1;
    for (int i = 2; i < count; i++)
        if (at(i) - at(i - 1) != bytes) return -1;
    return bytes / static_cast<ll>(sizeof(T));
}

}  // namespace

void CudaNnBackend::gemm_batched(bool bf16, bool ta, bool tb, int m, int n, int k, const void* A, int lda, long long sA,
                                 const void* B, int ldb, long long sB, float beta, float* C, int ldc, long long sC,
                                 int batch, const char* what) {
    const float one = 1.0f;
    const cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    if (!bf16) {   // the handle's pedantic math: fp32 products, no TF32
        RETRO_CUBLAS_CHECK(cublasSgemmStridedBatched(handle_, opa, opb, m, n, k, &one, static_cast<const float*>(A), lda,
                                                     sA, static_cast<const float*>(B), ldb, sB, &beta, C, ldc, sC,
                                                     batch));
        RETRO_CUDA_SYNC_POINT(what, stream_);
        return;
    }
    RETRO_CUBLAS_CHECK(cublasSetMathMode(handle_, CUBLAS_DEFAULT_MATH));   // bf16 products on the tensor cores
    const cublasStatus_t st = cublasGemmStridedBatchedEx(handle_, opa, opb, m, n, k, &one, A, CUDA_R_16BF, lda, sA, B,
                                                         CUDA_R_16BF, ldb, sB, &beta, C, CUDA_R_32F, ldc, sC, batch,
                                                         CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    RETRO_CUBLAS_CHECK(cublasSetMathMode(handle_, CUBLAS_PEDANTIC_MATH));   // back first, whatever the GEMM said
    ::retro::cublas_check(static_cast<int>(st), "cublasGemmStridedBatchedEx (bf16 inputs)", __FILE__, __LINE__);
    RETRO_CUDA_SYNC_POINT(what, stream_);
}

void CudaNnBackend::linear_forward_shared(const SharedLinears& l, const float* x, std::int64_t N, std::int64_t I,
                                          std::int64_t O) {
    linear_forward_shared_of(l, x, nullptr, N, I, O);
}

// x as the values of bf16 bits: in the bf16 mode the GEMMs read x16 itself (no rounding pass), else x widened
void CudaNnBackend::linear_forward_shared_bf16x(const SharedLinears& l, const std::uint16_t* x16, std::int64_t N,
                                                std::int64_t I, std::int64_t O) {
    if (gemm_inputs_ != GemmInputs::bf16) return linear_forward_shared(l, widened(x16, N * I), N, I, O);
    linear_forward_shared_of(l, nullptr, x16, N, I, O);
}

// x in fp32, or (bf16 mode) x16 its bf16 bits
void CudaNnBackend::linear_forward_shared_of(const SharedLinears& l, const float* x, const std::uint16_t* x16,
                                             std::int64_t N, std::int64_t I, std::int64_t O) {
    RETRO_CHECK(l.count >= 0 && l.count <= kMaxShared, "linear_forward_shared: ", l.count, " layers");
    if (l.count == 0 || N == 0 || O == 0) return;
    const bool bf = gemm_inputs_ == GemmInputs::bf16;
    if ((!bf && N <= gemv::kMaxRows) || I == 0 || unfused(FusedOp::linear_forward_shared))
        return x16 ? NnBackend::linear_forward_shared_bf16x(l, x16, N, I, O) : NnBackend::linear_forward_shared(l, x, N, I, O);
    const int n = as_int(N, "N"), i = as_int(I, "I"), o = as_int(O, "O");
    as_int(N * std::max<std::int64_t>(I, O), "N * max(I, O)");
    const ll sW = uniform_stride(l.W, l.count, O * I), sY = uniform_stride(l.y, l.count, N * O);
    const void* xin = !bf ? static_cast<const void*>(x) : x16 ? static_cast<const void*>(x16) : to_bf16(1, x, N * I);
    if (sW == (l.count > 1 ? O * I : 0) && sY >= 0) {   // the weights back to back, the outputs at one stride
        const void* w = bf ? to_bf16(0, l.W[0], l.count * O * I) : l.W[0];
        gemm_batched(bf, true, false, o, n, i, w, i, sW, xin, i, 0, 0.0f, l.y[0], o, sY, l.count,
                     "strided-batched GEMM (shared linear forward)");
        return;
    }
    const float zero = 0.0f, one = 1.0f;
    for (int k = 0; k < l.count; k++) {
        if (bf) {
            gemm_bf16(true, false, o, n, i, to_bf16(0, l.W[k], O * I), i, xin, i, 0.0f, l.y[k], o,
                      "cublasGemmEx bf16 (shared linear forward)");
        } else {
            RETRO_CUBLAS_CHECK(cublasSgemm(handle_, CUBLAS_OP_T, CUBLAS_OP_N, o, n, i, &one, l.W[k], i, x, i, &zero,
                                           l.y[k], o));
            RETRO_CUDA_SYNC_POINT("cublasSgemm (shared linear forward)", stream_);
        }
    }
}

void CudaNnBackend::linear_backward_shared(float* dx, float* tmp, const SharedLinears& l, const float* x,
                                           std::int64_t N, std::int64_t I, std::int64_t O) {
    linear_backward_shared_of(dx, tmp, l, x, nullptr, N, I, O);
}

void CudaNnBackend::linear_backward_shared_bf16x(float* dx, float* tmp, const SharedLinears& l, const std::uint16_t* x16,
                                                 std::int64_t N, std::int64_t I, std::int64_t O) {
    if (gemm_inputs_ != GemmInputs::bf16) return linear_backward_shared(dx, tmp, l, widened(x16, N * I), N, I, O);
    linear_backward_shared_of(dx, tmp, l, nullptr, x16, N, I, O);
}

void CudaNnBackend::linear_backward_shared_of(float* dx, float* tmp, const SharedLinears& l, const float* x,
                                              const std::uint16_t* x16, std::int64_t N, std::int64_t I,
                                              std::int64_t O) {
    RETRO_CHECK(l.count >= 0 && l.count <= kMaxShared, "linear_backward_shared: ", l.count, " layers");
    if (l.count == 0 || N == 0) return;
    if (I == 0 || O == 0 || unfused(FusedOp::linear_backward_shared))
        return x16 ? NnBackend::linear_backward_shared_bf16x(dx, tmp, l, x16, N, I, O)
                   : NnBackend::linear_backward_shared(dx, tmp, l, x, N, I, O);
    const bool bf = gemm_inputs_ == GemmInputs::bf16;
    const int n = as_int(N, "N"), i = as_int(I, "I"), o = as_int(O, "O");
    as_int(N * std::max<std::int64_t>(I, O), "N * max(I, O)");
    bool any_dW = false, all_dW = true;
    for (int k = 0; k < l.count; k++) {
        any_dW = any_dW || l.dW[k];
        all_dW = all_dW && l.dW[k];
    }
    const ll sD = uniform_stride(l.dy, l.count, N * O), sW = uniform_stride(l.W, l.count, O * I),
             sG = all_dW ? uniform_stride(l.dW, l.count, O * I) : -1;
    const ll back_to_back = l.count > 1 ? O * I : 0;
    // bf16 copies: every dy at once where they lie back to back (slot 0), the weights at once where back to back
    // (slot 1), x once (slot 2); else each dy or W in its turn
    const bool dy_packed = sD == (l.count > 1 ? N * O : 0);
    const void* dy_all = bf && dy_packed ? to_bf16(0, l.dy[0], (l.count - 1) * sD + N * O) : nullptr;
    const bool batched_dW = all_dW && sG == back_to_back && (bf ? dy_packed : sD >= 0);
    const void* w_all = bf && dx && sW == back_to_back ? to_bf16(1, l.W[0], l.count * O * I) : nullptr;
    const void* xb = !(bf && any_dW) ? nullptr : x16 ? static_cast<const void*>(x16) : to_bf16(2, x, N * I);
    auto dy_bf = [&](int k) {
        return dy_all ? static_cast<const void*>(static_cast<const std::uint16_t*>(dy_all) + k * sD)
                      : to_bf16(0, l.dy[k], N * O);
    };
    const float one = 1.0f;
    for (int k = 0; k < l.count; k++) {
        const float beta = k == 0 ? 0.0f : 1.0f;   // dx = dy0 W0, then += dy_k W_k in order
        const void* dyk = bf && (dx || (!batched_dW && l.dW[k])) ? dy_bf(k) : nullptr;
        if (dx && bf) {
            const void* wk = w_all ? static_cast<const void*>(static_cast<const std::uint16_t*>(w_all) + k * O * I)
                                   : to_bf16(1, l.W[k], O * I);
            gemm_bf16(false, false, i, n, o, wk, i, dyk, o, beta, dx, i, "cublasGemmEx bf16 (shared linear dx)");
        } else if (dx) {
            RETRO_CUBLAS_CHECK(cublasSgemm(handle_, CUBLAS_OP_N, CUBLAS_OP_N, i, n, o, &one, l.W[k], i, l.dy[k], o, &beta,
                                           dx, i));
            RETRO_CUDA_SYNC_POINT("cublasSgemm (shared linear dx)", stream_);
        }
        if (!batched_dW && l.dW[k]) {   // dW_k^T += x^T dy_k
            if (bf) {
                gemm_bf16(false, true, i, o, n, xb, i, dyk, o, 1.0f, l.dW[k], i,
                          "cublasGemmEx bf16 (shared linear dW)");
            } else {
                RETRO_CUBLAS_CHECK(cublasSgemm(handle_, CUBLAS_OP_N, CUBLAS_OP_T, i, o, n, &one, x, i, l.dy[k], o, &one,
                                               l.dW[k], i));
                RETRO_CUDA_SYNC_POINT("cublasSgemm (shared linear dW)", stream_);
            }
        }
    }
    if (batched_dW)
        gemm_batched(bf, false, true, i, o, n, bf ? xb : x, i, 0, bf ? dy_all : l.dy[0], o, sD, 1.0f, l.dW[0], i, sG,
                     l.count, "strided-batched GEMM (shared linear dW)");
    (void)tmp;   // the two-op form's scratch: the GEMMs accumulate dx themselves
}

}  // namespace retro::nn::detail
