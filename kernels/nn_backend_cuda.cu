// CUDA build of lib/nn/nn_backend_cuda.h: the factory, the backend's memory (cudaMalloc / cudaFree, copies and
// memsets on its stream; download, and upload beyond 1 MiB, wait for it, a smaller upload goes through a pinned
// staging ring), and the row-wise and element-wise ops:
//   linear     cuBLAS sgemm (CUBLAS_PEDANTIC_MATH: fp32, no TF32). Row-major Y[N, O] = X[N, I] W[O, I]^T is, in
//              cuBLAS's column-major view, Y^T = op_T(W) X^T: sgemm(T, N, O, N, I, W, I, X, I, Y, O); the bias is
//              written first and the GEMM adds (beta 1), as nn/linear.cpp does. dx^T = W^T dy^T: sgemm(N, N, I, N,
//              O, W, I, dy, O, dx, I); dW^T += X^T dy: sgemm(N, T, I, O, N, X, I, dy, O, dW, I) with beta 1;
//              db: column sums in two deterministic passes (kernels/nn_rows.cuh: row chunks of 32-column tiles in
//              order, then the chunks in order).
//              fp32 forward of at most gemv::kMaxRows rows (a decode step): kernels/nn_gemv.cuh's
//              linear_rows_gemv instead, one warp per output column for every row at once (W read once, float4s
//              where aligned, a fixed butterfly), the bias added in the same kernel: one memory-bound launch instead
//              of a bias kernel and a GEMM; with gelu, a residual sum or a leading RMSNorm fused in (the decoder's
//              rmsnorm_linear_forward and linear_residual_forward).
//   rmsnorm    a warp per row (kernels/nn_rows.cuh: sum of squares, and backward's dot, in a fixed butterfly);
//              dgamma as db's two-pass column sums (nn_rows.cuh's tiles), before dx (which may alias dy).
//   gelu, scale: map_elements (float4s where aligned); rotary: kernels/nn_rotary.cuh, a block per row (y == x safe).
// The embeddings and positions are in kernels/nn_embedding_cuda.cu.
#include <climits>
#include <cstdint>
#include <cstring>

#include <cuda_bf16.h>
#include <cmath>
#include <memory>
#include <vector>
#include <string>
#include <cstdlib>

#include "core/cuda_check.h"
#include "core/error.h"
#include "cuda_check.cuh"
#include "nn/nn_backend_cuda.h"
#include "nn_backend_common.cuh"
#include "nn_gemv.cuh"
#include "nn_rotary.cuh"

namespace retro::nn {
namespace detail {
namespace {

using ll = long long;
constexpr double kRmsnormEps = 1e-8;   // nn/rmsnorm.h's RMSNORM_EPS: clamps the norm, not under the root


// ---------------- gelu (the function; the ops below) ----------------
using gemv::kRsqrt2;
constexpr float kInvSqrt2Pi = 0.39894228040143267794f;
// gelu(x) = x Phi(x), exact (erf) form, as nn/gelu.h: gemv::gelu_exact (kernels/nn_gemv.cuh), one expression for
// the gelu op and the few-row linear's epilogue, so linear_gelu_forward gives the bits of linear_forward +
// gelu_forward
using gemv::gelu_exact;

// ---------------- linear ----------------
// The few-row GEMV (kernels/nn_gemv.cuh) for N <= gemv::kMaxRows rows: the row count and the float4 path picked at
// run time among the instantiations.
struct GemvCall {
    float* y;
    float* h;   // gelu's pre-activation, or null
    const float *x, *W, *b, *res, *gamma;   // b, res (residual), gamma (norm) may be null
    ll N, I, O;
    gemv::GemvOut out;
    gemv::GemvRotary rot = {};
    bool dependent = false;   // a programmatic dependent launch (launch_kernel)
};

template <int NR, bool VEC4, bool NORM>
void launch_gemv_rows(const GemvCall& c, CudaStream stream) {
    const unsigned blocks = grid_for(c.O, gemv::kWarps);
    const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(std::max<ll>(c.I, 1))));
    launch_kernel("linear_rows_gemv", c.dependent, gemv::linear_rows_gemv<NR, VEC4, NORM>, blocks, gemv::kThreads,
                  static_cast<std::size_t>(gemv::smem_bytes(NR, c.I, NORM)), stream, c.y, c.h, c.x, c.W, c.b, c.res,
                  c.gamma, c.I, c.O, static_cast<int>(c.out), scale, static_cast<float>(kRmsnormEps), c.rot);
}

template <int NR>
void launch_gemv_n(const GemvCall& c, CudaStream stream) {
    const bool norm = c.gamma != nullptr;
    const bool vec4 = c.I % 4 == 0 && reinterpret_cast<std::uintptr_t>(c.W) % 16 == 0 &&
                      (norm || reinterpret_cast<std::uintptr_t>(c.x) % 16 == 0);
    if (norm) vec4 ? launch_gemv_rows<NR, true, true>(c, stream) : launch_gemv_rows<NR, false, true>(c, stream);
    else vec4 ? launch_gemv_rows<NR, true, false>(c, stream) : launch_gemv_rows<NR, false, false>(c, stream);
}

void launch_gemv(GemvCall c, bool dependent, CudaStream stream, const char* what) {
    c.dependent = dependent;
    using Launch = void (*)(const GemvCall&, CudaStream);
    static constexpr Launch kLaunch[gemv::kMaxRows] = {launch_gemv_n<1>, launch_gemv_n<2>, launch_gemv_n<3>,
                                                        launch_gemv_n<4>, launch_gemv_n<5>, launch_gemv_n<6>,
                                                        launch_gemv_n<7>, launch_gemv_n<8>};
    RETRO_CHECK(c.N >= 1 && c.N <= gemv::kMaxRows, "few-row linear: ", c.N, " rows");
    kLaunch[c.N - 1](c, stream);
    RETRO_CUDA_LAUNCH_CHECK(what, stream);
}

__global__ void bias_rows(float* __restrict__ y, const float* __restrict__ b, ll N, ll O) {
    for (ll e = blockIdx.x * static_cast<ll>(blockDim.x) + threadIdx.x; e < N * O; e += static_cast<ll>(gridDim.x) * blockDim.x)
        y[e] = b[e % O];
}

struct BiasTerm {   // db: dy[n, j]
    const float* dy;
    ll O;
    __device__ float operator()(ll n, ll j) const { return dy[n * O + j]; }
};

struct GammaTerm {   // dgamma: dy[n, j] x[n, j] / max(norm[n], eps)
    const float *dy, *x, *norm;
    ll C;
    float eps;
    __device__ float operator()(ll n, ll j) const {
        const float nm = norm[n];
        return dy[n * C + j] * x[n * C + j] * (1.0f / (nm < eps ? eps : nm));
    }
};

// GemmInputs::bf16: round to nearest even (NaN kept), as core/cuda_device.h's to_bf16
__global__ void round_to_bf16(__nv_bfloat16* __restrict__ y, const float* __restrict__ x, ll n) {
    for (ll i = blockIdx.x * static_cast<ll>(blockDim.x) + threadIdx.x; i < n; i += static_cast<ll>(gridDim.x) * blockDim.x)
        y[i] = __float2bfloat16_rn(x[i]);
}

// bf16 bits to fp32 (the bf16x ops outside the bf16 GEMM mode)
__global__ void widen_bf16(float* __restrict__ y, const __nv_bfloat16* __restrict__ x, ll n) {
    for (ll i = blockIdx.x * static_cast<ll>(blockDim.x) + threadIdx.x; i < n; i += static_cast<ll>(gridDim.x) * blockDim.x)
        y[i] = __bfloat162float(x[i]);
}

// linear_gelu_forward_bf16 after its GEMM (beta 0 into h): h = h + b (b may be null) and g16 = bf16(gelu(h)), a block
// per row (block-stride), threads over its columns: the bias rows linear_forward writes before its GEMM (and the GEMM
// reads back), the gelu pass and the next layer's rounding of g in one pass.
__global__ void bias_gelu_to_bf16(float* __restrict__ h, __nv_bfloat16* __restrict__ g16, const float* __restrict__ b,
                                  ll N, ll O) {
    for (ll r = blockIdx.x; r < N; r += gridDim.x) {
        float* hr = h + r * O;
        __nv_bfloat16* gr = g16 + r * O;
        for (ll j = threadIdx.x; j < O; j += blockDim.x) {
            const float v = b ? hr[j] + b[j] : hr[j];
            if (b) hr[j] = v;
            gr[j] = __float2bfloat16_rn(gelu_exact(v));
        }
    }
}

// ---------------- rmsnorm ----------------
// kernels/nn_rows.cuh: a warp per row (forward with the residual sum in the same pass; backward = or +=)

// ---------------- gelu ----------------
struct GeluOp {   // gelu_exact (one input)
    __device__ float operator()(float x, float) const { return gelu_exact(x); }
};
struct GeluBackwardOp {   // dy (Phi(x) + x phi(x))
    __device__ float operator()(float dy, float x) const {
        const float cdf = 0.5f * (1.0f + erff(x * kRsqrt2));
        const float pdf = expf(-0.5f * x * x) * kInvSqrt2Pi;
        return dy * (cdf + x * pdf);
    }
};

struct GeluGradTerm {   // gelu_linear_backward's dy[n, j] = GeluBackwardOp(dg, h): the summed term of db and its bf16 copy
    const float *dg, *h;
    ll O;
    __device__ float operator()(ll n, ll j) const { return GeluBackwardOp{}(dg[n * O + j], h[n * O + j]); }
};

// ---------------- rotary ----------------
// kernels/nn_rotary.cuh's rotary_rows: a block per group of rows, their pairs and then their passed channels.
template <bool BACKWARD>
void launch_rotary(float* y, const float* x, const RotaryView& t, ll B, ll N, ll H, ll D, cudaStream_t stream,
                   float scale = 1.0f, ll scaled_heads = 0, float out_scale = 1.0f) {
    RETRO_CHECK(t.rows == N, "rotary table has ", t.rows, " rows for ", N, " positions");
    RETRO_CHECK(t.rot_dim <= D && t.rot_dim % 2 == 0, "rotary dim ", t.rot_dim, " for head dim ", D);
    RETRO_CHECK(H * D <= INT_MAX / rotary::kThreads, "rotary: a row of ", H, " heads of ", D,
                " is past the kernel's 32-bit index within a group of rows");
    RETRO_CHECK(N <= INT_MAX - rotary::kThreads, "rotary: ", N, " positions do not fit an int");
    const ll rows = B * N;
    if (rows == 0 || H * D == 0) return;
    const int group = rotary::rows_per_block(static_cast<int>(H), static_cast<int>(t.rot_dim));
    rotary::rotary_rows<BACKWARD><<<grid_for(rows, group), rotary::kThreads, 0, stream>>>(
        y, x, t.cos, t.sin, rows, N, static_cast<int>(H), static_cast<int>(D), static_cast<int>(t.rot_dim), scale,
        static_cast<int>(std::min(scaled_heads, H)), out_scale);
    RETRO_CUDA_LAUNCH_CHECK(BACKWARD ? "rotary_backward" : "rotary_forward", stream);
}

struct ScaleOp {   // x s (one input)
    float s;
    __device__ float operator()(float x, float) const { return x * s; }
};

}  // namespace

// ---------------- construction, memory ----------------
CudaNnBackend::CudaNnBackend(CudaStream stream) : stream_(stream) {
    cuda_stream_require(stream, "cuda_nn_backend");
    RETRO_CUDA_CHECK(cudaSetDevice(0));
    RETRO_CUBLAS_CHECK(cublasCreate(&handle_));
    try {
        RETRO_CUBLAS_CHECK(cublasSetMathMode(handle_, CUBLAS_PEDANTIC_MATH));   // fp32, no TF32
        RETRO_CUBLAS_CHECK(cublasSetStream(handle_, stream_));
        int major = 0;
        RETRO_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0));
        tensor_core_bf16_ = major >= 8;
        int optin = 0;
        RETRO_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
        optin_shared_bytes_ = optin;
        const FlashKernels kernels = flash_kernels_requested();
        flash_wmma_ = kernels == FlashKernels::wmma;
        flash_fp32_operands_ = kernels == FlashKernels::mma_fp32;
        flash_one_stage_ = kernels == FlashKernels::mma_1stage;
        // programmatic dependent launches where the kernels running here were compiled for sm_90+ (their
        // griddepcontrol.wait exists only there: an sm_80 build JIT-run on an H100 would launch early without
        // waiting), unless RETRO_PDL=0 (every kernel launched the ordinary way: an A/B)
        const char* pdl = std::getenv("RETRO_PDL");
        cudaFuncAttributes gemv_attributes{};
        RETRO_CUDA_CHECK(cudaFuncGetAttributes(&gemv_attributes, gemv::linear_rows_gemv<1, false, false>));
        dependent_launch_ = major >= 9 && gemv_attributes.ptxVersion >= 90 && !(pdl && std::string(pdl) == "0");
        unfused_ = unfused_ops_requested(std::getenv("RETRO_UNFUSE"));
        if (unfused(FusedOp::feed_forward_bf16)) set_bf16_activations(false);
    } catch (...) {   // no destructor runs for a throwing constructor
        RETRO_CUBLAS_CHECK_NOTHROW(cublasDestroy(handle_));
        throw;
    }
}

CudaNnBackend::~CudaNnBackend() {
    RETRO_CUDA_CHECK_NOTHROW(cudaStreamSynchronize(stream_));   // the scratch (freed by ~Scratch) may still be in use
    for (Staging& s : staging_) {
        if (s.host) RETRO_CUDA_CHECK_NOTHROW(cudaFreeHost(s.host));
        if (s.done) RETRO_CUDA_CHECK_NOTHROW(cudaEventDestroy(s.done));
    }
    if (handle_) RETRO_CUBLAS_CHECK_NOTHROW(cublasDestroy(handle_));
}

CudaNnBackend::Scratch::~Scratch() { RETRO_CUDA_CHECK_NOTHROW(cudaFree(p)); }

void* CudaNnBackend::scratch(Scratch& s, std::size_t bytes) {
    if (bytes > s.bytes) {
        refuse_while_capturing("scratch growth");   // the op must have run once at this size before a capture
        RETRO_CUDA_CHECK(cudaStreamSynchronize(stream_));
        void* old = s.p;
        scratch_bytes_ -= s.bytes;
        s.p = nullptr;
        s.bytes = 0;
        RETRO_CUDA_CHECK(cudaFree(old));
        RETRO_CUDA_CHECK(cudaMalloc(&s.p, bytes));
        s.bytes = bytes;
        scratch_bytes_ += bytes;
    }
    return s.p;
}


void* CudaNnBackend::alloc(std::size_t bytes) {
    refuse_while_capturing("alloc");
    void* p = nullptr;
    RETRO_CUDA_CHECK(cudaMalloc(&p, std::max<std::size_t>(bytes, 1)));   // 256-byte aligned
    return p;
}
// Waits for the stream first: its kernels may still use the buffer (the training arena when the model re-plans),
// and cudaFree's own synchronization is documented as "may", not "will". (Not while capturing, where a synchronize
// would end the capture: nothing frees then but an unwinding error path.)
void CudaNnBackend::release(void* p) noexcept {
    if (!p) return;
    if (!capturing_) RETRO_CUDA_CHECK_NOTHROW(cudaStreamSynchronize(stream_));
    RETRO_CUDA_CHECK_NOTHROW(cudaFree(p));
}
void CudaNnBackend::upload(void* dst, const void* src, std::size_t bytes) {
    refuse_while_capturing("upload");
    if (!bytes) return;
    if (bytes > kStagedUploadMax) {   // weights, batches: rare, large
        RETRO_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_));
        RETRO_CUDA_CHECK(cudaStreamSynchronize(stream_));   // the host buffer is the caller's again
        return;
    }
    Staging& s = staging_[next_staging_];
    next_staging_ = (next_staging_ + 1) % kStagingSlots;
    if (s.done) RETRO_CUDA_CHECK(cudaEventSynchronize(s.done));   // the slot's previous copy has been read
    else RETRO_CUDA_CHECK(cudaEventCreateWithFlags(&s.done, cudaEventDisableTiming));
    if (bytes > s.bytes) {
        void* old = s.host;
        s.host = nullptr;
        s.bytes = 0;
        if (old) RETRO_CUDA_CHECK(cudaFreeHost(old));
        const std::size_t want = std::max<std::size_t>(bytes, 4096);
        RETRO_CUDA_CHECK(cudaMallocHost(&s.host, want));
        s.bytes = want;
    }
    std::memcpy(s.host, src, bytes);
    RETRO_CUDA_CHECK(cudaMemcpyAsync(dst, s.host, bytes, cudaMemcpyHostToDevice, stream_));
    RETRO_CUDA_CHECK(cudaEventRecord(s.done, stream_));
}
void CudaNnBackend::download(void* dst, const void* src, std::size_t bytes) {
    refuse_while_capturing("download");
    if (!bytes) return;
    RETRO_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_));
    RETRO_CUDA_CHECK(cudaStreamSynchronize(stream_));
}
void CudaNnBackend::copy(void* dst, const void* src, std::size_t bytes) {
    if (!bytes || dst == src) return;
    RETRO_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_));
}
void CudaNnBackend::zero(void* p, std::size_t bytes) {
    if (bytes) RETRO_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, stream_));
}
void CudaNnBackend::synchronize() {
    refuse_while_capturing("synchronize");
    RETRO_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

// ---------------- graphs: CUDA stream capture ----------------
namespace {
struct CudaGraph final : BackendGraph {
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    ~CudaGraph() override {
        if (exec) RETRO_CUDA_CHECK_NOTHROW(cudaGraphExecDestroy(exec));
        if (graph) RETRO_CUDA_CHECK_NOTHROW(cudaGraphDestroy(graph));
    }
};
}  // namespace

void CudaNnBackend::begin_capture() {
    RETRO_CHECK(!capturing_, "begin_capture: a capture is already open");
    // thread-local mode: this thread's unsafe calls (cudaMalloc, a synchronize) fail the capture, others' do not
    RETRO_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
    capturing_ = true;
}

std::unique_ptr<BackendGraph> CudaNnBackend::end_capture() {
    RETRO_CHECK(capturing_, "end_capture without begin_capture");
    capturing_ = false;
    auto g = std::make_unique<CudaGraph>();
    RETRO_CUDA_CHECK(cudaStreamEndCapture(stream_, &g->graph));
    RETRO_CUDA_CHECK(cudaGraphInstantiate(&g->exec, g->graph, 0));
    return g;
}

void CudaNnBackend::abort_capture() noexcept {
    if (!capturing_) return;
    capturing_ = false;
    cudaGraph_t broken = nullptr;   // an op's failure invalidated the capture: ending it says so, which is no news
    const cudaError_t ended = cudaStreamEndCapture(stream_, &broken);
    if (broken) RETRO_CUDA_CHECK_NOTHROW(cudaGraphDestroy(broken));
    if (ended != cudaSuccess && ended != cudaErrorStreamCaptureInvalidated)
        cuda_check_nothrow(ended, "cudaStreamEndCapture(stream_, &broken)", __FILE__, __LINE__);
    (void)cudaGetLastError();   // (the capture's own status, not a later kernel's)
}

void CudaNnBackend::launch_graph(const BackendGraph& graph) {
    refuse_while_capturing("launch_graph");
    if (launch_fused_decode(graph)) return;   // a fused decode step (fuse_decode_program)
    RETRO_CUDA_CHECK(cudaGraphLaunch(dynamic_cast<const CudaGraph&>(graph).exec, stream_));
}

const void* CudaNnBackend::to_bf16(int slot, const float* x, std::int64_t n) {
    auto* y = static_cast<__nv_bfloat16*>(scratch(bf_[slot], static_cast<std::size_t>(std::max<std::int64_t>(n, 1)) * 2));
    if (n > 0) {
        round_to_bf16<<<grid_for(n), kThreads, 0, stream_>>>(y, x, n);
        RETRO_CUDA_LAUNCH_CHECK("round_to_bf16", stream_);
    }
    return y;
}

void CudaNnBackend::gemm_bf16(bool ta, bool tb, int m, int n, int k, const void* A, int lda, const void* B, int ldb,
                              float beta, float* C, int ldc, const char* what) {
    const float one = 1.0f;
    // default math: bf16 products on the tensor cores, fp32 accumulation (the handle is pedantic for the fp32 GEMMs)
    RETRO_CUBLAS_CHECK(cublasSetMathMode(handle_, CUBLAS_DEFAULT_MATH));
    const cublasStatus_t st = cublasGemmEx(handle_, ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb ? CUBLAS_OP_T : CUBLAS_OP_N, m, n,
                                           k, &one, A, CUDA_R_16BF, lda, B, CUDA_R_16BF, ldb, &beta, C, CUDA_R_32F, ldc,
                                           CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    RETRO_CUBLAS_CHECK(cublasSetMathMode(handle_, CUBLAS_PEDANTIC_MATH));   // back first, whatever the GEMM said
    ::retro::cublas_check(static_cast<int>(st), "cublasGemmEx (bf16 inputs)", __FILE__, __LINE__);
    RETRO_CUDA_SYNC_POINT(what, stream_);
}

// ---------------- linear ----------------
void CudaNnBackend::linear_forward(float* y, const float* x, const float* W, const float* b, std::int64_t N,
                                   std::int64_t I, std::int64_t O) {
    if (N == 0 || O == 0) return;
    RETRO_CHECK(N > 0 && I >= 0 && O > 0, "linear_forward: N ", N, ", I ", I, ", O ", O);
    if (gemm_inputs_ == GemmInputs::fp32 && N <= gemv::kMaxRows) {   // a decode step's few rows: one GEMV kernel
        launch_gemv({y, nullptr, x, W, b, nullptr, nullptr, N, I, O, gemv::GemvOut::plain}, dependent_launch_, stream_,
                    "linear_rows_gemv");
        return;
    }
    const int n = as_int(N, "N"), i = as_int(I, "I"), o = as_int(O, "O");
    as_int(N * std::max<std::int64_t>(I, O), "N * max(I, O)");
    if (gemm_inputs_ == GemmInputs::bf16 && I > 0)
        return linear_forward_bf16_of(y, to_bf16(1, x, N * I), W, b, n, i, o, "cublasGemmEx bf16 (linear forward)");
    if (b) {
        bias_rows<<<grid_for(N * O), kThreads, 0, stream_>>>(y, b, N, O);
        RETRO_CUDA_LAUNCH_CHECK("bias_rows", stream_);
    }
    const float one = 1.0f, zero = 0.0f;
    RETRO_CUBLAS_CHECK(cublasSgemm(handle_, CUBLAS_OP_T, CUBLAS_OP_N, o, n, i, &one, W, std::max(i, 1), x,
                                   std::max(i, 1), b ? &one : &zero, y, o));
    RETRO_CUDA_SYNC_POINT("cublasSgemm (linear forward)", stream_);
}

void CudaNnBackend::linear_gelu_forward(float* g, float* h, const float* x, const float* W, const float* b,
                                        std::int64_t N, std::int64_t I, std::int64_t O) {
    if (N == 0 || O == 0) return;
    if (gemm_inputs_ == GemmInputs::fp32 && N > 0 && N <= gemv::kMaxRows && I >= 0) {   // gelu in the GEMV's epilogue
        launch_gemv({g, h, x, W, b, nullptr, nullptr, N, I, O, gemv::GemvOut::gelu}, dependent_launch_, stream_,
                    "linear_rows_gemv (gelu)");
        return;
    }
    float* pre = h ? h : g;   // the GEMM, then gelu over its output (in place when h is null)
    linear_forward(pre, x, W, b, N, I, O);
    gelu_forward(g, pre, N * O);
}

const float* CudaNnBackend::widened(const std::uint16_t* x16, std::int64_t n) {
    auto* y = static_cast<float*>(scratch(wide_, static_cast<std::size_t>(n) * sizeof(float)));
    if (n > 0) {
        widen_bf16<<<grid_for(n), kThreads, 0, stream_>>>(y, reinterpret_cast<const __nv_bfloat16*>(x16), n);
        RETRO_CUDA_LAUNCH_CHECK("widen_bf16", stream_);
    }
    return y;
}

// bf16 GEMM mode: the GEMM (beta 0) into h, then bias_gelu_to_bf16; otherwise the two ops into a widened scratch's
// place: linear_gelu_forward with g in fp32 scratch, then rounded.
void CudaNnBackend::linear_gelu_forward_bf16(std::uint16_t* g16, float* h, const float* x, const float* W,
                                             const float* b, std::int64_t N, std::int64_t I, std::int64_t O) {
    if (N == 0 || O == 0) return;
    RETRO_CHECK(h && N > 0 && I >= 0 && O > 0, "linear_gelu_forward_bf16: N ", N, ", I ", I, ", O ", O, ", h required");
    if (gemm_inputs_ == GemmInputs::bf16 && I > 0) return linear_gelu_forward_bf16_of(g16, h, to_bf16(1, x, N * I), W, b, N, I, O);
    linear_forward(h, x, W, b, N, I, O);   // fp32 mode (or I = 0): the ops it stands for
    bias_gelu_to_bf16<<<static_cast<unsigned>(std::min<std::int64_t>(N, 65535)), kThreads, 0, stream_>>>(
        h, reinterpret_cast<__nv_bfloat16*>(g16), nullptr, N, O);
    RETRO_CUDA_LAUNCH_CHECK("bias_gelu_to_bf16", stream_);
}

void CudaNnBackend::linear_gelu_forward_bf16x(std::uint16_t* g16, float* h, const std::uint16_t* x16, const float* W,
                                              const float* b, std::int64_t N, std::int64_t I, std::int64_t O) {
    if (N == 0 || O == 0) return;
    RETRO_CHECK(h && N > 0 && I >= 0 && O > 0, "linear_gelu_forward_bf16x: N ", N, ", I ", I, ", O ", O, ", h required");
    if (gemm_inputs_ == GemmInputs::bf16 && I > 0) return linear_gelu_forward_bf16_of(g16, h, x16, W, b, N, I, O);
    linear_gelu_forward_bf16(g16, h, widened(x16, N * I), W, b, N, I, O);   // fp32 mode: x's values in fp32
}

// The bf16 mode's h = x W^T + b (beta-0 GEMM) and g16 = bf16(gelu(h)) on x's bf16 copy xb: the bias in the GEMM's
// epilogue where cuBLASLt takes it (the pass then only reads h), else in the gelu pass.
void CudaNnBackend::linear_gelu_forward_bf16_of(std::uint16_t* g16, float* h, const void* xb, const float* W,
                                                const float* b, std::int64_t N, std::int64_t I, std::int64_t O) {
    const int n = as_int(N, "N"), i = as_int(I, "I"), o = as_int(O, "O");
    as_int(N * std::max<std::int64_t>(I, O), "N * max(I, O)");
    const void* wb = to_bf16(0, W, O * I);
    const bool biased = gemm_bf16_bias(true, false, o, n, i, wb, i, xb, i, b, h, o,
                                       "cublasLtMatmul bf16 + bias (linear gelu forward)");
    if (!biased) gemm_bf16(true, false, o, n, i, wb, i, xb, i, 0.0f, h, o, "cublasGemmEx bf16 (linear gelu forward)");
    bias_gelu_to_bf16<<<static_cast<unsigned>(std::min<std::int64_t>(N, 65535)), kThreads, 0, stream_>>>(
        h, reinterpret_cast<__nv_bfloat16*>(g16), biased ? nullptr : b, N, O);
    RETRO_CUDA_LAUNCH_CHECK("bias_gelu_to_bf16", stream_);
}

void CudaNnBackend::linear_forward_bf16x(float* y, const std::uint16_t* x16, const float* W, const float* b,
                                         std::int64_t N, std::int64_t I, std::int64_t O) {
    if (N == 0 || O == 0) return;
    RETRO_CHECK(N > 0 && I >= 0 && O > 0, "linear_forward_bf16x: N ", N, ", I ", I, ", O ", O);
    if (gemm_inputs_ != GemmInputs::bf16 || I == 0) return linear_forward(y, widened(x16, N * I), W, b, N, I, O);
    const int n = as_int(N, "N"), i = as_int(I, "I"), o = as_int(O, "O");
    as_int(N * std::max<std::int64_t>(I, O), "N * max(I, O)");
    linear_forward_bf16_of(y, x16, W, b, n, i, o, "cublasGemmEx bf16 (linear forward, bf16 x)");
}

// The bf16 mode's linear forward on x's bf16 copy xb: the bias in cuBLASLt's epilogue, else (no algorithm for the
// shape, RETRO_UNFUSE=gemm_bias_epilogue, no bias) its rows written first and the GEMM adding onto them.
void CudaNnBackend::linear_forward_bf16_of(float* y, const void* xb, const float* W, const float* b, int n, int i,
                                           int o, const char* what) {
    const void* wb = to_bf16(0, W, static_cast<std::int64_t>(o) * i);
    if (b && gemm_bf16_bias(true, false, o, n, i, wb, i, xb, i, b, y, o, "cublasLtMatmul bf16 + bias (linear forward)"))
        return;
    if (b) {
        bias_rows<<<grid_for(static_cast<std::int64_t>(n) * o), kThreads, 0, stream_>>>(y, b, n, o);
        RETRO_CUDA_LAUNCH_CHECK("bias_rows", stream_);
    }
    gemm_bf16(true, false, o, n, i, wb, i, xb, i, b ? 1.0f : 0.0f, y, o, what);
}

void CudaNnBackend::linear_backward_bf16x(float* dx, float* dW, float* db, const float* dy, const std::uint16_t* x16,
                                          const float* W, std::int64_t N, std::int64_t I, std::int64_t O) {
    if (N == 0) return;
    RETRO_CHECK(N > 0 && I >= 0 && O >= 0, "linear_backward_bf16x: N ", N, ", I ", I, ", O ", O);
    if (gemm_inputs_ != GemmInputs::bf16 || I <= 0 || O <= 0)
        return linear_backward(dx, dW, db, dy, widened(x16, N * I), W, N, I, O);
    linear_backward_bf16(dx, dW, db, dy, nullptr, x16, W, N, I, O);
}

// One launch for up to gemv::kMaxRows rows in fp32 (where NORM's rows fit the shared memory a block has without
// opting in); the two ops otherwise (NnBackend's forms).
void CudaNnBackend::rmsnorm_linear_forward(float* y, float* xn, float* norm, const float* x, const float* gamma,
                                           const float* W, const float* b, std::int64_t N, std::int64_t I,
                                           std::int64_t O, bool gelu) {
    if (N == 0) return;
    if (unfused(FusedOp::rmsnorm_linear_forward))
        return NnBackend::rmsnorm_linear_forward(y, xn, norm, x, gamma, W, b, N, I, O, gelu);
    if (gemm_inputs_ == GemmInputs::fp32 && N > 0 && N <= gemv::kMaxRows && I > 0 && O > 0 &&
        gemv::smem_bytes(static_cast<int>(N), I, true) <= gemv::kNormSmemLimit) {
        launch_gemv({y, nullptr, x, W, b, nullptr, gamma, N, I, O, gelu ? gemv::GemvOut::gelu : gemv::GemvOut::plain},
                    dependent_launch_, stream_, "linear_rows_gemv (rmsnorm)");
        return;
    }
    NnBackend::rmsnorm_linear_forward(y, xn, norm, x, gamma, W, b, N, I, O, gelu);
}

void CudaNnBackend::linear_residual_forward(float* out, float* t, const float* res, const float* x, const float* W,
                                            const float* b, std::int64_t N, std::int64_t I, std::int64_t O) {
    if (N == 0 || O == 0) return;
    if (unfused(FusedOp::linear_residual_forward))
        return NnBackend::linear_residual_forward(out, t, res, x, W, b, N, I, O);
    if (gemm_inputs_ == GemmInputs::fp32 && N > 0 && N <= gemv::kMaxRows && I >= 0) {
        launch_gemv({out, nullptr, x, W, b, res, nullptr, N, I, O, gemv::GemvOut::residual}, dependent_launch_,
                    stream_, "linear_rows_gemv (residual)");
        return;
    }
    NnBackend::linear_residual_forward(out, t, res, x, W, b, N, I, O);
}

void CudaNnBackend::linear_rotary_forward(float* y, float* xn, float* norm, const float* x, const float* gamma,
                                          const float* W, const float* b, std::int64_t N, std::int64_t I,
                                          std::int64_t O, const LinearRotary& r) {
    if (N == 0) return;
    if (unfused(FusedOp::linear_rotary_forward))
        return NnBackend::linear_rotary_forward(y, xn, norm, x, gamma, W, b, N, I, O, r);
    RETRO_CHECK(N == 1 || O == r.heads * r.D, "linear_rotary_forward: ", N, " rows of ", O, " columns for ", r.heads,
                " rotated heads of ", r.D);
    RETRO_CHECK(r.scaled_heads >= 0 && r.scaled_heads <= r.heads, "linear_rotary_forward: ", r.scaled_heads,
                " scaled heads of ", r.heads);
    const bool fits = !gamma || gemv::smem_bytes(static_cast<int>(std::min<std::int64_t>(N, gemv::kMaxRows)), I, true) <=
                                    gemv::kNormSmemLimit;
    if (gemm_inputs_ == GemmInputs::fp32 && N > 0 && N <= gemv::kMaxRows && I > 0 && O > 0 && fits &&
        r.table.rows == N && r.table.rot_dim % 2 == 0 && r.table.rot_dim <= r.D && r.heads >= 0 &&
        r.heads * r.D <= O && r.D <= INT_MAX && r.heads <= INT_MAX) {
        const gemv::GemvRotary rot{r.table.cos, r.table.sin, static_cast<int>(r.heads), static_cast<int>(r.D),
                                   static_cast<int>(r.table.rot_dim),
                                   static_cast<int>(r.scaled_heads), r.scale};
        launch_gemv({y, nullptr, x, W, b, nullptr, gamma, N, I, O, gemv::GemvOut::rotary, rot}, dependent_launch_,
                    stream_, gamma ? "linear_rows_gemv (rmsnorm, rotary)" : "linear_rows_gemv (rotary)");
        return;
    }
    NnBackend::linear_rotary_forward(y, xn, norm, x, gamma, W, b, N, I, O, r);
}

// bf16 mode with a bias: dy = gelu_backward(dg, h) computed in db's first column-sum pass, which writes it only as its
// bf16 copy (slot 0, what linear_backward would have rounded), then linear_backward's GEMMs on it; otherwise the two
// ops (NnBackend's form). The dy values, their bf16 bits and the GEMMs are the two ops'.
void CudaNnBackend::gelu_linear_backward(float* dx, float* dW, float* db, float* dg, const float* h, const float* x,
                                         const float* W, std::int64_t N, std::int64_t I, std::int64_t O) {
    if (gemm_inputs_ != GemmInputs::bf16 || !dW || !db || N <= 0 || I <= 0 || O <= 0 ||
        unfused(FusedOp::gelu_linear_backward))
        return NnBackend::gelu_linear_backward(dx, dW, db, dg, h, x, W, N, I, O);
    bf16_linear_backward_of(dx, dW, db, GeluGradTerm{dg, h, O}, to_bf16(2, x, N * I), W, N, I, O, "gelu_linear_backward");
}

void CudaNnBackend::gelu_linear_backward_bf16x(float* dx, float* dW, float* db, float* dg, const float* h,
                                               const std::uint16_t* x16, const float* W, std::int64_t N,
                                               std::int64_t I, std::int64_t O) {
    if (gemm_inputs_ != GemmInputs::bf16 || !dW || !db || N <= 0 || I <= 0 || O <= 0 ||
        unfused(FusedOp::gelu_linear_backward))
        return NnBackend::gelu_linear_backward_bf16x(dx, dW, db, dg, h, x16, W, N, I, O);
    bf16_linear_backward_of(dx, dW, db, GeluGradTerm{dg, h, O}, x16, W, N, I, O, "gelu_linear_backward_bf16x");
}

void CudaNnBackend::linear_backward(float* dx, float* dW, float* db, const float* dy, const float* x, const float* W,
                                    std::int64_t N, std::int64_t I, std::int64_t O) {
    if (N == 0) return;
    const int n = as_int(N, "N"), i = as_int(I, "I"), o = as_int(O, "O");
    as_int(N * std::max<std::int64_t>(I, O), "N * max(I, O)");
    if (gemm_inputs_ == GemmInputs::bf16 && I > 0 && O > 0) return linear_backward_bf16(dx, dW, db, dy, x, nullptr, W, N, I, O);
    const float one = 1.0f, zero = 0.0f;
    if (dx && I > 0) {
        RETRO_CUBLAS_CHECK(cublasSgemm(handle_, CUBLAS_OP_N, CUBLAS_OP_N, i, n, o, &one, W, i, dy, std::max(o, 1),
                                       &zero, dx, i));
        RETRO_CUDA_SYNC_POINT("cublasSgemm (linear dx)", stream_);
    }
    if (dW && O > 0) {
        if (I > 0) {
            RETRO_CUBLAS_CHECK(
                cublasSgemm(handle_, CUBLAS_OP_N, CUBLAS_OP_T, i, o, n, &one, x, i, dy, o, &one, dW, i));
            RETRO_CUDA_SYNC_POINT("cublasSgemm (linear dW)", stream_);
        }
        if (db) {
            column_sums(db, BiasTerm{dy, O}, N, O, "db");
        }
    }
}

// The bf16 GEMM mode (I, O > 0): with dW and db, dy's bf16 copy is written by db's column-sum pass (one pass over dy
// where the rounding and the sums made two; the same bits); then the GEMMs on the copies.
void CudaNnBackend::linear_backward_bf16(float* dx, float* dW, float* db, const float* dy, const float* x,
                                         const std::uint16_t* x16, const float* W, std::int64_t N, std::int64_t I,
                                         std::int64_t O) {
    const int n = as_int(N, "N"), i = as_int(I, "I"), o = as_int(O, "O");
    as_int(N * std::max<std::int64_t>(I, O), "N * max(I, O)");
    const auto x_bf16 = [&]() -> const void* { return x16 ? static_cast<const void*>(x16) : to_bf16(2, x, N * I); };
    if (dW && db && !unfused(FusedOp::linear_backward_dy_copy))
        return bf16_linear_backward_of(dx, dW, db, BiasTerm{dy, O}, x_bf16(), W, N, I, O, "linear_backward");
    const void* dyb = dx || dW ? to_bf16(0, dy, N * O) : nullptr;
    if (dx) gemm_bf16(false, false, i, n, o, to_bf16(1, W, O * I), i, dyb, o, 0.0f, dx, i, "cublasGemmEx bf16 (linear dx)");
    if (dW) gemm_bf16(false, true, i, o, n, x_bf16(), i, dyb, o, 1.0f, dW, i, "cublasGemmEx bf16 (linear dW)");
    if (dW && db) column_sums(db, BiasTerm{dy, O}, N, O, "db");   // (RETRO_UNFUSE=linear_backward_dy_copy)
}

// ---------------- rmsnorm ----------------
namespace {
// rmsnorm_forward (RESIDUAL false: x is only read) and residual_rmsnorm_forward (x = a + b written first); with
// BF16_OUT y only as its bf16 bits y16
template <bool RESIDUAL, bool BF16_OUT = false>
void launch_rmsnorm_forward(float* y, float* norm, float* x, const float* a, const float* b, const float* gamma, ll N,
                            ll C, CudaStream stream, const char* name, std::uint16_t* y16 = nullptr) {
    if (N == 0) return;
    const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(C)));
    rows::rmsnorm_forward_warps<RESIDUAL, BF16_OUT><<<grid_for(N, rows::kWarps), rows::kThreads, 0, stream>>>(
        y, norm, x, a, b, gamma, N, C, scale, static_cast<float>(kRmsnormEps), y16);
    RETRO_CUDA_LAUNCH_CHECK(name, stream);
}
}  // namespace

void CudaNnBackend::rmsnorm_forward(float* y, float* norm, const float* x, const float* gamma, std::int64_t N,
                                    std::int64_t C) {
    launch_rmsnorm_forward<false>(y, norm, const_cast<float*>(x), nullptr, nullptr, gamma, N, C, stream_,
                                  "rmsnorm_forward");
}

void CudaNnBackend::residual_rmsnorm_forward(float* x, float* y, float* norm, const float* a, const float* b,
                                             const float* gamma, std::int64_t N, std::int64_t C) {
    launch_rmsnorm_forward<true>(y, norm, x, a, b, gamma, N, C, stream_, "residual_rmsnorm_forward");
}

void CudaNnBackend::rmsnorm_forward_bf16(std::uint16_t* y16, float* norm, const float* x, const float* gamma,
                                         std::int64_t N, std::int64_t C) {
    launch_rmsnorm_forward<false, true>(nullptr, norm, const_cast<float*>(x), nullptr, nullptr, gamma, N, C, stream_,
                                        "rmsnorm_forward_bf16", y16);
}

void CudaNnBackend::residual_rmsnorm_forward_bf16(float* x, std::uint16_t* y16, float* norm, const float* a,
                                                  const float* b, const float* gamma, std::int64_t N, std::int64_t C) {
    launch_rmsnorm_forward<true, true>(nullptr, norm, x, a, b, gamma, N, C, stream_, "residual_rmsnorm_forward_bf16",
                                       y16);
}

// rmsnorm_backward (ADD false: dx =) and rmsnorm_backward_add (dx +=)
template <bool ADD>
void CudaNnBackend::rmsnorm_backward_rows_of(float* dx, float* dgamma, const float* dy, const float* x,
                                             const float* gamma, const float* norm, std::int64_t N, std::int64_t C) {
    if (N == 0 || C == 0) return;
    const float eps = static_cast<float>(kRmsnormEps);
    if (dgamma && rows::dgamma_smem_bytes(C) <= 48 * 1024 && !unfused(FusedOp::rmsnorm_backward_one_pass)) {
        // one pass over dy and x for dx and dgamma's per-block partials, then the blocks' partials added in order
        const long long per = rows::dgamma_block_rows(N), blocks = (N + per - 1) / per;
        auto* part = static_cast<float*>(scratch(colpart_, static_cast<std::size_t>(blocks * C) * sizeof(float)));
        rows::rmsnorm_backward_dgamma_warps<ADD><<<static_cast<unsigned>(blocks), rows::kThreads,
                                                   static_cast<std::size_t>(rows::dgamma_smem_bytes(C)), stream_>>>(
            dx, part, dy, x, gamma, norm, N, C, per, eps);
        RETRO_CUDA_LAUNCH_CHECK(ADD ? "rmsnorm_backward_add (dgamma partials)" : "rmsnorm_backward (dgamma partials)",
                                stream_);
        const auto tiles = static_cast<unsigned>((C + rows::kColumnTile - 1) / rows::kColumnTile);
        rows::column_partials_add_tiles<<<tiles, rows::kThreads, rows::kColumnSmemBytes, stream_>>>(dgamma, part, C,
                                                                                                    blocks);
        RETRO_CUDA_LAUNCH_CHECK("dgamma (blocks' partials)", stream_);
        return;
    }
    // dgamma first: it reads dy and x, which dx may alias (the CPU op allows dx == dy)
    if (dgamma) column_sums(dgamma, GammaTerm{dy, x, norm, C, eps}, N, C, "dgamma");
    rows::rmsnorm_backward_warps<ADD><<<grid_for(N, rows::kWarps), rows::kThreads, 0, stream_>>>(dx, dy, x, gamma,
                                                                                              norm, N, C, eps);
    RETRO_CUDA_LAUNCH_CHECK(ADD ? "rmsnorm_backward_add" : "rmsnorm_backward", stream_);
}

void CudaNnBackend::rmsnorm_backward(float* dx, float* dgamma, const float* dy, const float* x, const float* gamma,
                                     const float* norm, std::int64_t N, std::int64_t C) {
    rmsnorm_backward_rows_of<false>(dx, dgamma, dy, x, gamma, norm, N, C);
}

void CudaNnBackend::rmsnorm_backward_add(float* dx, float* dgamma, const float* dy, const float* x, const float* gamma,
                                         const float* norm, std::int64_t N, std::int64_t C) {
    rmsnorm_backward_rows_of<true>(dx, dgamma, dy, x, gamma, norm, N, C);
}

// ---------------- gelu, rotary, scale ----------------
void CudaNnBackend::gelu_forward(float* y, const float* x, std::int64_t N) {
    if (N == 0) return;
    map_elements(stream_, y, x, N, GeluOp{});
    RETRO_CUDA_LAUNCH_CHECK("gelu_forward", stream_);
}
void CudaNnBackend::gelu_backward(float* dx, const float* dy, const float* x, std::int64_t N) {
    if (N == 0) return;
    map_elements(stream_, dx, dy, x, N, GeluBackwardOp{});
    RETRO_CUDA_LAUNCH_CHECK("gelu_backward", stream_);
}

void CudaNnBackend::rotary_forward(float* y, const float* x, const RotaryView& t, std::int64_t B, std::int64_t N,
                                   std::int64_t H, std::int64_t D) {
    launch_rotary<false>(y, x, t, B, N, H, D, stream_);
}
void CudaNnBackend::rotary_scale_forward(float* y, const float* x, const RotaryView& t, std::int64_t B, std::int64_t N,
                                         std::int64_t H, std::int64_t D, float s, std::int64_t scaled_heads) {
    RETRO_CHECK(scaled_heads >= 0 && scaled_heads <= H, "rotary_scale_forward: ", scaled_heads, " scaled heads of ", H);
    launch_rotary<false>(y, x, t, B, N, H, D, stream_, s, scaled_heads);
}
void CudaNnBackend::rotary_backward_scale(float* dx, const float* dy, const RotaryView& t, std::int64_t B,
                                          std::int64_t N, std::int64_t H, std::int64_t D, float s) {
    launch_rotary<true>(dx, dy, t, B, N, H, D, stream_, 1.0f, 0, s);
}
void CudaNnBackend::rotary_backward(float* dx, const float* dy, const RotaryView& t, std::int64_t B, std::int64_t N,
                                    std::int64_t H, std::int64_t D) {
    launch_rotary<true>(dx, dy, t, B, N, H, D, stream_);
}

void CudaNnBackend::scale(float* x, float s, std::int64_t n) {
    if (n == 0) return;
    map_elements(stream_, x, x, n, ScaleOp{s});
    RETRO_CUDA_LAUNCH_CHECK("scale", stream_);
}

}  // namespace detail

std::unique_ptr<NnBackend> cuda_nn_backend(CudaStream stream) { return std::make_unique<detail::CudaNnBackend>(stream); }

}  // namespace retro::nn
