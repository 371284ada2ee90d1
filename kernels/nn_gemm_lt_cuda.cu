// The bf16 GEMM with the bias in its epilogue (CudaNnBackend::gemm_bf16_bias, kernels/nn_backend_common.cuh): cuBLASLt
// with CUBLASLT_EPILOGUE_BIAS, D = op(A) op(B) + bias broadcast over D's columns (bf16 A and B, fp32 accumulation, an
// fp32 bias and D), so that a linear layer's forward writes its output once — where cublasGemmEx wanted the bias
// rows written first and read back (beta 1): at the 172M config's logits layer 2 GB a step of the ~3 GB its output
// costs. A plan per shape and operand alignments, the bias's included (the matmul descriptor, the three layouts and the
// heuristic's first algorithm for operands that aligned) is made once and kept; a shape without an algorithm, a bias under 16-byte
// alignment, or RETRO_UNFUSE=gemm_bias_epilogue returns false and the caller keeps the bias-rows form. Session 25, written without a GPU: the op harness's bf16 cases of
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

// The largest power of two up to 256 that divides the address: cuBLASLt assumes 256-byte aligned operands unless the
// preferences say less (CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*), and an algorithm chosen for 256 may fault on less.
std::uint32_t alignment_of(const void* p) {
    const auto bits = reinterpret_cast<std::uintptr_t>(p);
    std::uint32_t align = 256;
    while (align > 1 && bits % align != 0) align /= 2;
    return align;
}

// cuBLASLt's epilogue reads the bias vector with 16-byte loads (Marian's cuBLASLt path found 8 too few on A100): a
// bias less aligned keeps the caller's bias-rows form.
constexpr std::uint32_t kBiasAlignment = 16;

}  // namespace

struct CudaNnBackend::LtPlans {
    struct Plan {
        cublasLtMatmulDesc_t desc = nullptr;
        cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
        cublasLtMatmulAlgo_t algo{};
        bool ok = false;   // the heuristic offered an algorithm, and the last call with it ran
        void destroy() noexcept {
            if (a) RETRO_CUBLAS_CHECK_NOTHROW(cublasLtMatrixLayoutDestroy(a));
            if (b) RETRO_CUBLAS_CHECK_NOTHROW(cublasLtMatrixLayoutDestroy(b));
            if (c) RETRO_CUBLAS_CHECK_NOTHROW(cublasLtMatrixLayoutDestroy(c));
            if (desc) RETRO_CUBLAS_CHECK_NOTHROW(cublasLtMatmulDescDestroy(desc));
            a = b = c = nullptr;
            desc = nullptr;
        }
    };
    // (ta, tb, m, n, k, lda, ldb, ldc, the alignments of A, B, C (= D) and the bias (at least 16 bytes))
    using Key = std::tuple<bool, bool, int, int, int, int, int, int, std::uint32_t, std::uint32_t, std::uint32_t,
                           std::uint32_t>;
    cublasLtHandle_t handle = nullptr;
    void* workspace = nullptr;
    std::map<Key, Plan> plans;

    Plan make_plan(bool ta, bool tb, int m, int n, int k, int lda, int ldb, int ldc, std::uint32_t align_a,
                   std::uint32_t align_b, std::uint32_t align_c, const float* bias) const;

    ~LtPlans() {
        for (auto& [key, p] : plans) p.destroy();
        if (workspace) RETRO_CUDA_CHECK_NOTHROW(cudaFree(workspace));
        if (handle) RETRO_CUBLAS_CHECK_NOTHROW(cublasLtDestroy(handle));
    }
};

void CudaNnBackend::LtPlansDelete::operator()(LtPlans* p) const noexcept {
    delete p;
}

// A plan for one key: the matmul descriptor with the bias epilogue, the three layouts and the heuristic's first
// algorithm for operands as aligned as the key says. `bias`: one bias of the key's alignment, on the descriptor
// before the heuristic runs — cuBLASLt has no alignment preference for the bias, and its header says
// cublasLtMatmulAlgoGetHeuristic reads BIAS_POINTER's value for the alignment to expect (a null pointer passes for
// any: an algorithm for a 256-byte aligned bias; found by a review in session 29). Each call sets its own bias.
// Throws on a cuBLAS error (the descriptors made so far freed); no algorithm (CUBLAS_STATUS_NOT_SUPPORTED, or none
// returned) gives a plan with ok false.
CudaNnBackend::LtPlans::Plan CudaNnBackend::LtPlans::make_plan(bool ta, bool tb, int m, int n, int k, int lda,
                                                               int ldb, int ldc, std::uint32_t align_a,
                                                               std::uint32_t align_b, std::uint32_t align_c,
                                                               const float* bias) const {
    struct Guard {   // frees what was made if a check below throws
        Plan p;
        bool keep = false;
        ~Guard() {
            if (!keep) p.destroy();
        }
    } made;
    Plan& p = made.p;
    const cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    RETRO_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    RETRO_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof(opa)));
    RETRO_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof(opb)));
    RETRO_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)));
    RETRO_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
    // stored shapes: A is m x k (k x m transposed), B k x n (n x k), column-major with the given leading dimensions;
    // the bias is D's type (fp32), one per row of D
    RETRO_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.a, CUDA_R_16BF, ta ? k : m, ta ? m : k, lda));
    RETRO_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.b, CUDA_R_16BF, tb ? n : k, tb ? k : n, ldb));
    RETRO_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.c, CUDA_R_32F, m, n, ldc));

    cublasLtMatmulPreference_t pref = nullptr;
    RETRO_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    cublasLtMatmulHeuristicResult_t result{};
    int count = 0;
    const cublasStatus_t st = [&] {
        const std::uint64_t ws = kLtWorkspaceBytes;
        const std::pair<cublasLtMatmulPreferenceAttributes_t, std::uint32_t> aligns[] = {
            {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, align_a},
            {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, align_b},
            {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, align_c},
            {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, align_c}};
        cublasStatus_t set =
            cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
        for (const auto& [attr, bytes] : aligns)
            if (set == CUBLAS_STATUS_SUCCESS) set = cublasLtMatmulPreferenceSetAttribute(pref, attr, &bytes, sizeof(bytes));
        if (set != CUBLAS_STATUS_SUCCESS) return set;
        return cublasLtMatmulAlgoGetHeuristic(handle, p.desc, p.a, p.b, p.c, p.c, pref, 1, &result, &count);
    }();
    RETRO_CUBLAS_CHECK_NOTHROW(cublasLtMatmulPreferenceDestroy(pref));
    if (st != CUBLAS_STATUS_SUCCESS && st != CUBLAS_STATUS_NOT_SUPPORTED)
        ::retro::cublas_check(static_cast<int>(st), "cublasLtMatmulAlgoGetHeuristic", __FILE__, __LINE__);
    p.ok = st == CUBLAS_STATUS_SUCCESS && count > 0 && result.state == CUBLAS_STATUS_SUCCESS;
    if (p.ok) p.algo = result.algo;
    made.keep = true;
    return p;
}

bool CudaNnBackend::gemm_bf16_bias(bool ta, bool tb, int m, int n, int k, const void* A, int lda, const void* B,
                                   int ldb, const float* bias, float* C, int ldc, const char* what) {
    if (unfused(FusedOp::gemm_bias_epilogue) || !bias || m <= 0 || n <= 0 || k <= 0) return false;
    if (alignment_of(bias) < kBiasAlignment) return false;
    const LtPlans::Key key{ta, tb, m, n, k, lda, ldb, ldc, alignment_of(A), alignment_of(B), alignment_of(C),
                           alignment_of(bias)};
    LtPlans::Plan* plan = nullptr;
    if (lt_) {
        const auto found = lt_->plans.find(key);
        if (found != lt_->plans.end()) plan = &found->second;
    }
    if (!plan) {
        // made at the first call of a shape, which must not be inside a CUDA-graph capture (cudaMalloc, heuristics)
        refuse_while_capturing("a cuBLASLt plan for a new GEMM shape");
        if (!lt_) {
            std::unique_ptr<LtPlans, LtPlansDelete> made(new LtPlans);
            RETRO_CUBLAS_CHECK(cublasLtCreate(&made->handle));
            RETRO_CUDA_CHECK(cudaMalloc(&made->workspace, kLtWorkspaceBytes));
            lt_ = std::move(made);
        }
        LtPlans::Plan made = lt_->make_plan(ta, tb, m, n, k, lda, ldb, ldc, std::get<8>(key), std::get<9>(key),
                                            std::get<10>(key), bias);
        try {
            plan = &lt_->plans.emplace(key, made).first->second;
        } catch (...) {
            made.destroy();
            throw;
        }
    }
    LtPlans::Plan& p = *plan;
    if (!p.ok) return false;
    RETRO_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
    const float one = 1.0f, zero = 0.0f;
    const cublasStatus_t st = cublasLtMatmul(lt_->handle, p.desc, &one, A, p.a, B, p.b, &zero, C, p.c, C, p.c, &p.algo,
                                             lt_->workspace, kLtWorkspaceBytes, stream_);
    if (st == CUBLAS_STATUS_NOT_SUPPORTED) {   // the algorithm refused these operands: the bias-rows form from now on
        p.ok = false;
        return false;
    }
    ::retro::cublas_check(static_cast<int>(st), what, __FILE__, __LINE__);
    RETRO_CUDA_SYNC_POINT(what, stream_);
    return true;
}

}  // namespace retro::nn::detail
