// The bf16 GEMM with the bias in its epilogue (CudaNnBackend::gemm_bf16_bias, kernels/nn_backend_common.cuh): cuBLASLt
// with CUBLASLT_EPILOGUE_BIAS, D = op(A) op(B) + bias broadcast over D's columns (bf16 A and B, fp32 accumulation, an
// fp32 bias and D), so that a linear layer's forward writes its output once — where cublasGemmEx wanted the bias
// rows written first and read back (beta 1): at the 172M config's logits layer 2 GB a step of the ~3 GB its output
// costs. A plan per shape and operand alignment (the matmul descriptor, the three layouts and the heuristic's first
// algorithm) is made once and kept; a shape without an algorithm, or RETRO_UNFUSE=gemm_bias_epilogue, returns false
// and the caller keeps the bias-rows form. Session 25, written without a GPU: the op harness's bf16 cases of
// nn.linear (and every op that ends in a biased linear) check it on the next one.
#include <cublasLt.h>

#include <cstdint>
#include <map>
#include <tuple>

#include "core/cuda_check.h"
#include "core/error.h"
#include "cuda_check.cuh"
#include "nn_backend_common.cuh"

namespace retro::nn::detail {

namespace {

constexpr std::size_t kLtWorkspaceBytes = std::size_t{32} << 20;   // cuBLAS's own default on Hopper

// The largest power of two up to 16 that divides every address (cuBLASLt picks kernels by operand alignment).
int alignment_of(const void* a, const void* b, const void* c, const void* bias) {
    const auto bits = reinterpret_cast<std::uintptr_t>(a) | reinterpret_cast<std::uintptr_t>(b) |
                      reinterpret_cast<std::uintptr_t>(c) | reinterpret_cast<std::uintptr_t>(bias);
    for (int align = 16; align > 1; align /= 2)
        if (bits % static_cast<std::uintptr_t>(align) == 0) return align;
    return 1;
}

}  // namespace

struct CudaNnBackend::LtPlans {
    struct Plan {
        cublasLtMatmulDesc_t desc = nullptr;
        cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
        cublasLtMatmulAlgo_t algo{};
        bool ok = false;   // the heuristic offered an algorithm
    };
    // (ta, tb, m, n, k, lda, ldb, ldc, alignment)
    using Key = std::tuple<bool, bool, int, int, int, int, int, int, int>;
    cublasLtHandle_t handle = nullptr;
    void* workspace = nullptr;
    std::map<Key, Plan> plans;

    ~LtPlans() {
        for (auto& [key, p] : plans) {
            if (p.a) RETRO_CUBLAS_CHECK_NOTHROW(cublasLtMatrixLayoutDestroy(p.a));
            if (p.b) RETRO_CUBLAS_CHECK_NOTHROW(cublasLtMatrixLayoutDestroy(p.b));
            if (p.c) RETRO_CUBLAS_CHECK_NOTHROW(cublasLtMatrixLayoutDestroy(p.c));
            if (p.desc) RETRO_CUBLAS_CHECK_NOTHROW(cublasLtMatmulDescDestroy(p.desc));
        }
        if (workspace) RETRO_CUDA_CHECK_NOTHROW(cudaFree(workspace));
        if (handle) RETRO_CUBLAS_CHECK_NOTHROW(cublasLtDestroy(handle));
    }
};

void CudaNnBackend::LtPlansDelete::operator()(LtPlans* p) const noexcept {
    delete p;
}

bool CudaNnBackend::gemm_bf16_bias(bool ta, bool tb, int m, int n, int k, const void* A, int lda, const void* B,
                                   int ldb, const float* bias, float* C, int ldc, const char* what) {
    if (unfused(FusedOp::gemm_bias_epilogue) || !bias || m <= 0 || n <= 0 || k <= 0) return false;
    if (!lt_) {
        lt_.reset(new LtPlans);
        RETRO_CUBLAS_CHECK(cublasLtCreate(&lt_->handle));
        RETRO_CUDA_CHECK(cudaMalloc(&lt_->workspace, kLtWorkspaceBytes));
    }
    const LtPlans::Key key{ta, tb, m, n, k, lda, ldb, ldc, alignment_of(A, B, C, bias)};
    auto found = lt_->plans.find(key);
    if (found == lt_->plans.end()) {
        LtPlans::Plan p;
        const cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
        const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
        RETRO_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
        RETRO_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof(opa)));
        RETRO_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof(opb)));
        RETRO_CUBLAS_CHECK(
            cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)));
        RETRO_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
        // stored shapes: A is m x k (k x m transposed), B k x n (n x k), column-major with the given leading dimensions
        RETRO_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.a, CUDA_R_16BF, ta ? k : m, ta ? m : k, lda));
        RETRO_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.b, CUDA_R_16BF, tb ? n : k, tb ? k : n, ldb));
        RETRO_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.c, CUDA_R_32F, m, n, ldc));
        cublasLtMatmulPreference_t pref = nullptr;
        RETRO_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
        const std::uint64_t ws = kLtWorkspaceBytes;
        cublasLtMatmulHeuristicResult_t result{};
        int count = 0;
        const cublasStatus_t st = [&] {
            const cublasStatus_t set = cublasLtMatmulPreferenceSetAttribute(
                pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
            if (set != CUBLAS_STATUS_SUCCESS) return set;
            return cublasLtMatmulAlgoGetHeuristic(lt_->handle, p.desc, p.a, p.b, p.c, p.c, pref, 1, &result, &count);
        }();
        RETRO_CUBLAS_CHECK_NOTHROW(cublasLtMatmulPreferenceDestroy(pref));
        // no algorithm for this shape (CUBLAS_STATUS_NOT_SUPPORTED, or none returned): the caller's bias-rows form
        p.ok = st == CUBLAS_STATUS_SUCCESS && count > 0;
        if (st != CUBLAS_STATUS_SUCCESS && st != CUBLAS_STATUS_NOT_SUPPORTED)
            ::retro::cublas_check(static_cast<int>(st), "cublasLtMatmulAlgoGetHeuristic", __FILE__, __LINE__);
        if (p.ok) p.algo = result.algo;
        found = lt_->plans.emplace(key, p).first;
    }
    LtPlans::Plan& p = found->second;
    if (!p.ok) return false;
    RETRO_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
    const float one = 1.0f, zero = 0.0f;
    RETRO_CUBLAS_CHECK(cublasLtMatmul(lt_->handle, p.desc, &one, A, p.a, B, p.b, &zero, C, p.c, C, p.c, &p.algo,
                                      lt_->workspace, kLtWorkspaceBytes, stream_));
    RETRO_CUDA_SYNC_POINT(what, stream_);
    return true;
}

}  // namespace retro::nn::detail
