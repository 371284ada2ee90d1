// The CUDA NnBackend's class (nn/nn_backend_cuda.h) and the helpers its kernels share. The class's members are
// defined across kernels/nn_backend_cuda.cu (memory, linear, rmsnorm, gelu, rotary, scale),
// kernels/nn_embedding_cuda.cu (embeddings, positions), kernels/nn_attention_cuda.cu (attention),
// kernels/nn_attention_decode_cuda.cu (a decode step's self-attention),
// kernels/nn_loss_cuda.cu (cross-entropy, residual adds, row gathers, sum of squares, AdamW) and
// kernels/nn_copy_head_cuda.cu (the copy head). Every kernel runs kThreads threads per block; element-wise kernels loop
// grid-stride over a 1-D grid of at most kMaxBlocks blocks, row kernels loop block-stride over rows, so no
// size reaches a grid limit. Every sum runs in a fixed order (a thread's own elements in index order, then
// block_reduce's fixed tree): the same inputs give the same bits on the same device.
// provides: CudaNnBackend, kMaxBlocks, grid_for, map_elements (and, from nn_block_reduce.cuh, kThreads, SumOp, MaxOp,
//           block_reduce)
#pragma once
#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "core/cuda_device.h"
#include "core/error.h"
#include "cuda_check.cuh"
#include "nn/fused_ops.h"
#include "nn/nn_backend.h"
#include "nn_block_reduce.cuh"
#include "nn_rows.cuh"

namespace retro::nn {
struct DecodeOp;   // nn/decode_program.h
}

namespace retro::nn::detail {

constexpr std::int64_t kMaxBlocks = std::int64_t{1} << 16;   // grid-stride / block-stride loops cover the rest

// v as a cuBLAS int, or InternalError naming `what`.
inline int as_int(std::int64_t v, const char* what) {
    RETRO_CHECK(v >= 0 && v <= INT_MAX, "nn backend (cuda): ", what, " = ", v, " does not fit cuBLAS's int");
    return static_cast<int>(v);
}

// Blocks for `work` items (elements at one per thread, or rows at one per block with per_block = 1).
inline unsigned grid_for(std::int64_t work, std::int64_t per_block = kThreads) {
    return static_cast<unsigned>(std::clamp<std::int64_t>((work + per_block - 1) / per_block, 1, kMaxBlocks));
}

// kernel<<<grid, block, smem, stream>>>(args...), or where `dependent` is set the same as a programmatic dependent
// launch (cudaLaunchAttributeProgrammaticStreamSerialization, sm_90+; also inside a graph capture): the kernel may
// then start while the kernel before it in the stream finishes, so it must call simt::grid_dependency_wait() before it
// reads what earlier kernels wrote or writes what they read (kernels/simt.cuh). The decode step's chain of small
// kernels (the few-row GEMVs, attention_decode) overlaps each launch and its weight fetches with the kernel before.
// `name` names the kernel where the dependent launch is refused (the plain launch is checked by the caller's
// RETRO_CUDA_LAUNCH_CHECK under the same name).
template <typename... Params, typename... Args>
void launch_kernel(const char* name, bool dependent, void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t smem,
                   cudaStream_t stream, Args&&... args) {
    if (!dependent) {
        kernel<<<grid, block, smem, stream>>>(std::forward<Args>(args)...);
        return;
    }
    cudaLaunchConfig_t config = {};
    config.gridDim = grid;
    config.blockDim = block;
    config.dynamicSmemBytes = smem;
    config.stream = stream;
    cudaLaunchAttribute attribute[1] = {};
    attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute[0].val.programmaticStreamSerializationAllowed = 1;
    config.attrs = attribute;
    config.numAttrs = 1;
    const cudaError_t launched = cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
    if (launched != cudaSuccess)
        cuda_check(launched, cat("kernel ", name, ": launch (cudaLaunchKernelEx, programmatic dependent)").c_str(),
                   __FILE__, __LINE__);
}

// cross_entropy_backward's dlogits[n, j] (nn/cross_entropy.h): exp(logits - lse) scale, minus scale at the target, 0
// on an ignored row or when no row counts; one expression for the op's kernel and cross_entropy_linear_backward's
// column-sum term (kernels/nn_loss_cuda.cu)
__device__ __forceinline__ float cross_entropy_grad(const float* __restrict__ logits, const float* __restrict__ lse,
                                                    const std::int32_t* __restrict__ targets, long long n, long long j,
                                                    long long V, std::int32_t ignore_index, float scale,
                                                    bool none_valid) {
    const std::int32_t t = targets[n];
    if (t == ignore_index || none_valid) return 0.0f;
    const float d = expf(logits[n * V + j] - lse[n]) * scale;
    return j == t ? d - scale : d;
}

// ---------------- element-wise maps, four floats a load where they can ----------------
// out[i] = f(a[i], b[i]) for i < n; the one-input form (map_elements without b) calls f(a[i], a[i]) and loads a once.
// Where every pointer is 16-byte aligned each thread moves float4s, then the n % 4 tail one float a thread; otherwise
// one float a thread throughout (session 12's H100 profile: one float a thread ran the residual adds at ~35 % of the
// memory bandwidth). Each element gets the same f on either path, so the bits do not depend on the alignment. No
// __restrict__: out may be a or b (each element reads and writes its own index only).
template <bool VEC4, bool BINARY, typename F>
__global__ void map_elements_k(float* out, const float* a, const float* b, long long n, F f) {
    const long long first = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
    const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
    long long tail = 0;
    if constexpr (VEC4) {
        const long long n4 = n / 4;
        for (long long q = first; q < n4; q += stride) {
            const float4 x = reinterpret_cast<const float4*>(a)[q];
            const float4 y = BINARY ? reinterpret_cast<const float4*>(b)[q] : x;
            reinterpret_cast<float4*>(out)[q] = make_float4(f(x.x, y.x), f(x.y, y.y), f(x.z, y.z), f(x.w, y.w));
        }
        tail = n4 * 4;
    }
    for (long long i = tail + first; i < n; i += stride) {
        const float x = a[i];
        out[i] = f(x, BINARY ? b[i] : x);
    }
}

template <bool BINARY, typename F>
void launch_map_elements(CudaStream stream, float* out, const float* a, const float* b, std::int64_t n, F f) {
    const std::uintptr_t addresses =
        reinterpret_cast<std::uintptr_t>(out) | reinterpret_cast<std::uintptr_t>(a) | reinterpret_cast<std::uintptr_t>(b);
    if (addresses % 16 == 0)
        map_elements_k<true, BINARY><<<grid_for((n + 3) / 4), kThreads, 0, stream>>>(out, a, b, n, f);
    else
        map_elements_k<false, BINARY><<<grid_for(n), kThreads, 0, stream>>>(out, a, b, n, f);
}
template <typename F>
void map_elements(CudaStream stream, float* out, const float* a, const float* b, std::int64_t n, F f) {
    launch_map_elements<true>(stream, out, a, b, n, f);
}
template <typename F>
void map_elements(CudaStream stream, float* out, const float* a, std::int64_t n, F f) {
    launch_map_elements<false>(stream, out, a, a, n, f);
}

// RETRO_FLASH_KERNELS (kernels/nn_flash_attention_cuda.cu): unset or "mma" the fused attention's mma.sync kernels
// (over bf16 copies of q, k, v, dO where there is no null column or key mask, their tiles in two stages where the
// shared memory allows), "mma-1stage" the same with one stage (the next step's tiles not loaded during this one),
// "mma-fp32" the same kernels reading the fp32 operands, "wmma" the older kernels; anything else is a UserError.
// For A/B runs on a GPU.
enum class FlashKernels { mma, mma_1stage, mma_fp32, wmma };
FlashKernels flash_kernels_requested();


class CudaNnBackend final : public NnBackend {
public:
    explicit CudaNnBackend(CudaStream stream);
    ~CudaNnBackend() override;
    CudaNnBackend(const CudaNnBackend&) = delete;
    CudaNnBackend& operator=(const CudaNnBackend&) = delete;

    std::string name() const override { return "cuda"; }
    void* alloc(std::size_t bytes) override;
    std::size_t scratch_device_bytes() const override { return scratch_bytes_; }
    void release(void* p) noexcept override;
    void upload(void* dst, const void* host_src, std::size_t bytes) override;
    void download(void* host_dst, const void* src, std::size_t bytes) override;
    void copy(void* dst, const void* src, std::size_t bytes) override;
    void zero(void* p, std::size_t bytes) override;
    void synchronize() override;
    void begin_capture() override;
    std::unique_ptr<BackendGraph> end_capture() override;
    void abort_capture() noexcept override;
    void launch_graph(const BackendGraph& graph) override;
    // a decode step's ops as one cooperative kernel (kernels/nn_decode_program_cuda.cu)
    std::unique_ptr<BackendGraph> fuse_decode_program(const DecodeProgram& p, std::string* why = nullptr) override;

    void linear_forward(float* y, const float* x, const float* W, const float* b, std::int64_t N, std::int64_t I,
                        std::int64_t O) override;
    void linear_gelu_forward(float* g, float* h, const float* x, const float* W, const float* b, std::int64_t N,
                             std::int64_t I, std::int64_t O) override;
    void linear_gelu_forward_bf16(std::uint16_t* g16, float* h, const float* x, const float* W, const float* b,
                                  std::int64_t N, std::int64_t I, std::int64_t O) override;
    void linear_forward_bf16x(float* y, const std::uint16_t* x16, const float* W, const float* b, std::int64_t N,
                              std::int64_t I, std::int64_t O) override;
    void linear_backward_bf16x(float* dx, float* dW, float* db, const float* dy, const std::uint16_t* x16,
                               const float* W, std::int64_t N, std::int64_t I, std::int64_t O) override;
    void residual_rmsnorm_forward_bf16(float* x, std::uint16_t* y16, float* norm, const float* a, const float* b,
                                       const float* gamma, std::int64_t N, std::int64_t C) override;
    void rmsnorm_forward_bf16(std::uint16_t* y16, float* norm, const float* x, const float* gamma, std::int64_t N,
                              std::int64_t C) override;
    void linear_forward_shared_bf16x(const SharedLinears& l, const std::uint16_t* x16, std::int64_t N, std::int64_t I,
                                     std::int64_t O) override;
    void linear_backward_shared_bf16x(float* dx, float* tmp, const SharedLinears& l, const std::uint16_t* x16,
                                      std::int64_t N, std::int64_t I, std::int64_t O) override;
    void linear_gelu_forward_bf16x(std::uint16_t* g16, float* h, const std::uint16_t* x16, const float* W,
                                   const float* b, std::int64_t N, std::int64_t I, std::int64_t O) override;
    void gelu_linear_backward_bf16x(float* dx, float* dW, float* db, float* dg, const float* h,
                                    const std::uint16_t* x16, const float* W, std::int64_t N, std::int64_t I,
                                    std::int64_t O) override;
    void rmsnorm_linear_forward(float* y, float* xn, float* norm, const float* x, const float* gamma, const float* W,
                                const float* b, std::int64_t N, std::int64_t I, std::int64_t O, bool gelu) override;
    void linear_residual_forward(float* out, float* t, const float* res, const float* x, const float* W, const float* b,
                                 std::int64_t N, std::int64_t I, std::int64_t O) override;
    void linear_rotary_forward(float* y, float* xn, float* norm, const float* x, const float* gamma, const float* W,
                               const float* b, std::int64_t N, std::int64_t I, std::int64_t O,
                               const LinearRotary& r) override;
    void linear_backward(float* dx, float* dW, float* db, const float* dy, const float* x, const float* W,
                         std::int64_t N, std::int64_t I, std::int64_t O) override;
    void gelu_linear_backward(float* dx, float* dW, float* db, float* dg, const float* h, const float* x,
                              const float* W, std::int64_t N, std::int64_t I, std::int64_t O) override;
    void embedding_position_forward(float* out, const std::int32_t* ids, const float* table,
                                    const std::int64_t* pos_index, const float* pos_table, std::int64_t N,
                                    std::int64_t V, std::int64_t C) override;
    void cross_entropy_linear_backward(float* dx, float* dW, float* db, float* dlogits, float dloss,
                                       const float* logits, const float* lse, const std::int32_t* targets,
                                       std::int32_t ignore_index, std::int64_t valid, const float* x, const float* W,
                                       std::int64_t N, std::int64_t I, std::int64_t V) override;
    void linear_forward_shared(const SharedLinears& l, const float* x, std::int64_t N, std::int64_t I,
                               std::int64_t O) override;
    void linear_backward_shared(float* dx, float* tmp, const SharedLinears& l, const float* x, std::int64_t N,
                                std::int64_t I, std::int64_t O) override;
    void rmsnorm_forward(float* y, float* norm, const float* x, const float* gamma, std::int64_t N,
                         std::int64_t C) override;
    void rmsnorm_backward(float* dx, float* dgamma, const float* dy, const float* x, const float* gamma,
                          const float* norm, std::int64_t N, std::int64_t C) override;
    void residual_rmsnorm_forward(float* x, float* y, float* norm, const float* a, const float* b, const float* gamma,
                                  std::int64_t N, std::int64_t C) override;
    void rmsnorm_backward_add(float* dx, float* dgamma, const float* dy, const float* x, const float* gamma,
                              const float* norm, std::int64_t N, std::int64_t C) override;
    void gelu_forward(float* y, const float* x, std::int64_t N) override;
    void gelu_backward(float* dx, const float* dy, const float* x, std::int64_t N) override;
    void rotary_forward(float* y, const float* x, const RotaryView& t, std::int64_t B, std::int64_t N, std::int64_t H,
                        std::int64_t D) override;
    void rotary_backward(float* dx, const float* dy, const RotaryView& t, std::int64_t B, std::int64_t N,
                         std::int64_t H, std::int64_t D) override;
    void rotary_backward_scale(float* dx, const float* dy, const RotaryView& t, std::int64_t B, std::int64_t N,
                               std::int64_t H, std::int64_t D, float s) override;
    void rotary_scale_forward(float* y, const float* x, const RotaryView& t, std::int64_t B, std::int64_t N,
                              std::int64_t H, std::int64_t D, float s, std::int64_t scaled_heads) override;
    void scale(float* x, float s, std::int64_t n) override;
    std::int64_t attention_saved_floats(const AttentionShape& s, bool key_mask) const override;
    std::int64_t attention_output_bf16_offset(const AttentionShape& s, bool key_mask) const override;
    std::int64_t out_lo_at(const AttentionShape& s, bool key_mask) const;   // the stash's remainder of out, or -1
    bool cross_entropy_linear_backward_uses_dlogits(bool with_dW, bool with_db) const override;
    void attention_forward(float* out, float* probs, const float* q, const float* k, const float* v,
                           const float* null_k, const float* null_v, const std::uint8_t* key_mask,
                           const AttentionShape& s) override;
    void attention_backward(float* dq, float* dk, float* dv, float* dnull_k, float* dnull_v, const float* dout,
                            const float* probs, const float* q, const float* k, const float* v, const float* null_k,
                            const float* null_v, const std::uint8_t* key_mask, const AttentionShape& s) override;
    void attention_decode(float* out, const float* q, const DecodeCache& c, const std::int64_t* pos,
                          const std::int64_t* seq, std::int64_t rows, std::int64_t H, std::int64_t D) override;
    void embedding_forward(float* out, const std::int32_t* ids, const float* table, std::int64_t N, std::int64_t V,
                           std::int64_t C) override;
    void embedding_backward(float* dtable, const float* dout, const std::int32_t* ids, std::int64_t N,
                            std::int64_t C) override;
    void position_add_forward(float* out, const float* pos, std::int64_t B, std::int64_t Tn, std::int64_t C) override;
    void position_add_backward(float* dpos, const float* dout, std::int64_t B, std::int64_t Tn,
                               std::int64_t C) override;
    void sample_rows(std::int32_t* ids, const float* logits, const std::int64_t* rows, std::int64_t n, std::int64_t V,
                     std::int64_t ld, const SamplingParams& p, const double* u) override;
    float cross_entropy_forward(float* lse, std::int64_t* valid, const float* logits, const std::int32_t* targets,
                                std::int64_t N, std::int64_t V, std::int32_t ignore_index) override;
    void cross_entropy_backward(float* dlogits, float dloss, const float* logits, const float* lse,
                                const std::int32_t* targets, std::int64_t N, std::int64_t V, std::int32_t ignore_index,
                                std::int64_t valid) override;
    void residual_sum(float* dst, const float* a, const float* b, std::int64_t n) override;
    void residual_add(float* dst, const float* src, std::int64_t n) override;
    void gather_rows(float* dst, const float* src, const std::int64_t* index, std::int64_t rows,
                     std::int64_t C) override;
    void gather_add_rows(float* dst, const float* src, const std::int64_t* index, std::int64_t rows,
                         std::int64_t C) override;
    void copy_head_forward(float* logits, const float* xn, const CopyCandidate* cand, std::int64_t rows, std::int64_t k,
                           std::int64_t V, std::int64_t C, const float* bias, const float* weight) override;
    void copy_head_backward(float* dxn, float* dbias, float* dweight, const float* dlogits, const float* xn,
                            const CopyCandidate* cand, std::int64_t rows, std::int64_t k, std::int64_t V, std::int64_t C,
                            const float* weight) override;
    void scatter_rows(float* dst, const float* src, const std::int64_t* index, std::int64_t rows,
                      std::int64_t C) override;
    double sum_squares(const float* x, std::int64_t n) override;
    void adamw_update(float* p, const float* g, float* m, float* v, const std::uint8_t* decay, std::int64_t n,
                      const AdamWScalars& a) override;

private:
    // Grow-only device scratch (never shrinks). Growing waits for the stream first: earlier kernels may still
    // read the old buffer. Each frees its buffer when the backend goes (after ~CudaNnBackend's body has waited for
    // the stream): no list of members to keep (one once left out leaked sample_rows' scratch).
    struct Scratch {
        void* p = nullptr;
        std::size_t bytes = 0;
        Scratch() = default;
        Scratch(const Scratch&) = delete;
        Scratch& operator=(const Scratch&) = delete;
        ~Scratch();
    };
    void* scratch(Scratch& s, std::size_t bytes);
    std::size_t scratch_bytes_ = 0;   // the Scratch buffers' sizes, summed (scratch_device_bytes)
    // out[j] += sum over rows n of term(n, j), j < C, in two deterministic passes (kernels/nn_backend_cuda.cu)
    template <typename Term>
    void column_sums(float* out, Term term, std::int64_t N, std::int64_t C, const char* what,
                     std::uint16_t* copy = nullptr);
    // rmsnorm_backward (ADD false) and rmsnorm_backward_add (ADD true): dgamma, then dx = or += (nn_backend_cuda.cu)
    template <bool ADD>
    void rmsnorm_backward_rows_of(float* dx, float* dgamma, const float* dy, const float* x, const float* gamma,
                                  const float* norm, std::int64_t N, std::int64_t C);
    // attention's fp32 GEMMs, one product per (item b, head h) (kernels/nn_attention_cuda.cu): an operand of item b
    // and head h starts at p + b * per_item + h * per_head, with leading dimension ld
    struct HeadOperand {
        const float* p;
        long long ld, per_item, per_head;
    };
    void attention_gemm(bool ta, bool tb, long long m, long long n, long long k, HeadOperand A, HeadOperand B,
                        float* C, long long ldc, long long c_item, long long c_head, long long items, long long heads,
                        const char* what);
    // the fused (flash-style) bf16 attention (kernels/nn_flash_attention_cuda.cu): whether it runs this shape, and
    // its forward / backward (probs holds lse [B, H, Nq] and a copy of out [B, Nq, H*D] between the two)
    bool flash_applies(const AttentionShape& s, const std::uint8_t* key_mask) const;
    // whether the arena holds only the fused backward's stash for the shape (flash_applies, unless RETRO_UNFUSE names
    // attention_saved_floats); key_mask: whether there is one
    bool stash_only(const AttentionShape& s, bool key_mask) const;
    bool flash_bf16_operands(const AttentionShape& s, const std::uint8_t* key_mask) const;
    void flash_forward(float* out, float* probs, const float* q, const float* k, const float* v, const float* null_k,
                       const float* null_v, const std::uint8_t* key_mask, const AttentionShape& s);
    void flash_backward(float* dq, float* dk, float* dv, float* dnull_k, float* dnull_v, const float* dout,
                        const float* probs, const float* q, const float* k, const float* v, const float* null_k,
                        const float* null_v, const std::uint8_t* key_mask, const AttentionShape& s);
    bool tensor_core_bf16_ = false;    // device 0 is sm_80 or newer (bf16 wmma)
    bool flash_wmma_ = false;          // RETRO_FLASH_KERNELS=wmma: the older wmma kernels (an A/B on a GPU)
    bool flash_fp32_operands_ = false; // RETRO_FLASH_KERNELS=mma-fp32: no bf16 operand copies
    bool flash_one_stage_ = false;     // RETRO_FLASH_KERNELS=mma-1stage: the bf16 operands' tiles in one stage
    bool flash_two_stages(long long bytes) const;   // kernels/nn_flash_attention_cuda.cu
    bool dependent_launch_ = false;    // sm_90+ and not RETRO_PDL=0: the decode kernels as programmatic dependents
    unsigned unfused_ = 0;             // RETRO_UNFUSE: a bit per FusedOp run as the ops it stands for
    bool unfused(FusedOp op) const { return (unfused_ >> static_cast<unsigned>(op)) & 1u; }
    // kernels/nn_decode_program_cuda.cu: why an op would not run fused as its own call runs ("" when it would); the
    // fused step's launch (false when `graph` is a captured CUDA graph instead)
    std::string decode_op_refusal(const DecodeOp& op, std::int64_t rows) const;
    bool launch_fused_decode(const BackendGraph& graph);
    std::string fused_launch_refused_;   // the device's refusal of a fused step's launch: no step fused after it
    // cross_entropy_linear_backward's one-pass form applies (kernels/nn_loss_cuda.cu)
    bool fused_cross_entropy_linear_backward(bool with_dW, bool with_db) const {
        return gemm_inputs_ == GemmInputs::bf16 && with_dW && with_db && !unfused(FusedOp::cross_entropy_linear_backward);
    }
    long long optin_shared_bytes_ = 0;  // the shared memory one block may opt into on device 0

    // upload() of up to kStagedUploadMax bytes: copied into a pinned slot of a ring and sent with cudaMemcpyAsync,
    // so the caller's buffer is free at once without waiting for the stream (the decoder uploads row indices and
    // rotary tables between kernels of every token: a wait there idles the GPU while the host queues the rest). A
    // slot is reused once its event says its last copy is done.
    static constexpr int kStagingSlots = 64;
    static constexpr std::size_t kStagedUploadMax = std::size_t{1} << 20;
    struct Staging {
        void* host = nullptr;   // cudaMallocHost, grow-only
        std::size_t bytes = 0;
        cudaEvent_t done = nullptr;
    };
    Staging staging_[kStagingSlots];
    int next_staging_ = 0;

    CudaStream stream_;
    cublasHandle_t handle_ = nullptr;
    Scratch ds_;         // attention backward: ds [B, H, Nq, keys] (the fused path: Delta [B, H, N])
    Scratch rows_;       // cross-entropy forward: per-row losses [N]
    Scratch partials_;   // sum_squares: per-block partial sums (double)
    Scratch colpart_;    // column sums (db, dgamma, the copy head's dweight and dbias): per-chunk partials [chunks, C]
    Scratch emb_;        // embedding_backward: the ids sorted with their rows, and CUB's temporary storage
    Scratch draw_;       // sample_rows: the rows and uniforms uploaded, the ids drawn
    Scratch bf_[4];      // bf16 copies: the GEMM inputs (GemmInputs::bf16, kernels/nn_backend_cuda.cu: slots 0-2) and
                         // the fused attention's q, k, v, dO (kernels/nn_flash_attention_cuda.cu: slots 0-3)
    // bf16 copy of x[0, n) in bf_[slot] (grow-only); returns it as a device pointer
    const void* to_bf16(int slot, const float* x, std::int64_t n);
    // C (fp32, column-major m x n, ldc) = alpha op(A) op(B) + beta C with A, B the bf16 copies (cublasGemmEx, fp32
    // accumulation and output, tensor cores)
    void gemm_bf16(bool ta, bool tb, int m, int n, int k, const void* A, int lda, const void* B, int ldb, float beta,
                   float* C, int ldc, const char* what);
    // The bf16 mode's linear_backward (dW and db wanted) of a dy that is computed on the fly, dy(n, j) [N, O]: its bf16
    // copy (slot 0) and db's sums in one pass (column_sums with a copy), then the dx (when not null) and dW GEMMs on
    // the copy, with xb x's bf16 copy (linear_backward and its bf16x form, gelu_linear_backward,
    // cross_entropy_linear_backward)
    template <typename Term>
    void bf16_linear_backward_of(float* dx, float* dW, float* db, Term dy, const void* xb, const float* W, long long N,
                                 long long I, long long O, const char* what);
    // linear_forward_shared / linear_backward_shared and their bf16x forms: x in fp32, or (bf16 mode) its bf16 bits x16
    void linear_forward_shared_of(const SharedLinears& l, const float* x, const std::uint16_t* x16, std::int64_t N,
                                  std::int64_t I, std::int64_t O);
    void linear_backward_shared_of(float* dx, float* tmp, const SharedLinears& l, const float* x,
                                   const std::uint16_t* x16, std::int64_t N, std::int64_t I, std::int64_t O);
    // The bf16 mode's h and g16 on x's bf16 copy xb (linear_gelu_forward_bf16 and its bf16x form)
    void linear_gelu_forward_bf16_of(std::uint16_t* g16, float* h, const void* xb, const float* W, const float* b,
                                     std::int64_t N, std::int64_t I, std::int64_t O);
    // The bf16 mode's linear forward on x's bf16 copy xb (linear_forward, linear_forward_bf16x)
    void linear_forward_bf16_of(float* y, const void* xb, const float* W, const float* b, int n, int i, int o,
                                const char* what);
    // The bf16 mode's linear_backward with x as fp32 (x: rounded here where dW wants it) or as bf16 bits (x16)
    void linear_backward_bf16(float* dx, float* dW, float* db, const float* dy, const float* x,
                              const std::uint16_t* x16, const float* W, std::int64_t N, std::int64_t I, std::int64_t O);
    // bf16 bits x16[0, n) widened to fp32 in a grow-only scratch (the bf16x ops outside the bf16 GEMM mode)
    const float* widened(const std::uint16_t* x16, std::int64_t n);
    Scratch wide_;
    // C (fp32, column-major m x n, ldc) = op(A) op(B) + bias[row] with A, B the bf16 copies, the bias added in the
    // GEMM's epilogue (cuBLASLt, CUBLASLT_EPILOGUE_BIAS; kernels/nn_gemm_lt_cuda.cu): no bias rows written first and
    // read back by a beta-1 GEMM. Returns false (nothing run) where cuBLASLt offers no algorithm for the shape and
    // the operands' alignments (or refuses it at the call), the bias is under 16-byte aligned, or RETRO_UNFUSE names
    // gemm_bias_epilogue: the caller then takes the bias-rows form.
    bool gemm_bf16_bias(bool ta, bool tb, int m, int n, int k, const void* A, int lda, const void* B, int ldb,
                        const float* bias, float* C, int ldc, const char* what);
    struct LtPlans;   // cuBLASLt's handle, its workspace and a plan per GEMM shape (made at the first use)
    struct LtPlansDelete {
        void operator()(LtPlans* p) const noexcept;
    };
    std::unique_ptr<LtPlans, LtPlansDelete> lt_;
    // The same over `batch` products at element strides sA, sB, sC (0: one matrix for every product;
    // cublasGemmStridedBatchedEx) with bf16 A and B, or fp32 A and B (bf16 false: cublasSgemmStridedBatched, pedantic)
    void gemm_batched(bool bf16, bool ta, bool tb, int m, int n, int k, const void* A, int lda, long long sA,
                      const void* B, int ldb, long long sB, float beta, float* C, int ldc, long long sC, int batch,
                      const char* what);
};

// ---- column sums (db, dgamma, the null key/value and copy-head gradients), shared by the .cu files ----
// kernels/nn_rows.cuh's two deterministic passes (no atomics; a block per 32 columns and chunk of rows, then per 32
// columns over the chunks, every sum in a fixed order). Term(n, j) is the summed value; `copy` (not null): every
// term also stored there as bf16 [N, C] (the first pass's).
template <typename Term>
void CudaNnBackend::column_sums(float* out, Term term, std::int64_t N, std::int64_t C, const char* what,
                                std::uint16_t* copy) {
    if (N <= 0 || C <= 0) return;
    const long long per = rows::column_chunk_rows(N), chunks = (N + per - 1) / per;
    const auto tiles = static_cast<unsigned>((C + rows::kColumnTile - 1) / rows::kColumnTile);
    auto* part = static_cast<float*>(scratch(colpart_, static_cast<std::size_t>(chunks * C) * sizeof(float)));
    rows::column_partials_tiles<<<dim3(tiles, static_cast<unsigned>(chunks)), rows::kThreads, rows::kColumnSmemBytes,
                                  stream_>>>(part, N, C, per, term, copy);
    RETRO_CUDA_LAUNCH_CHECK(what, stream_);
    rows::column_partials_add_tiles<<<tiles, rows::kThreads, rows::kColumnSmemBytes, stream_>>>(out, part, C, chunks);
    RETRO_CUDA_LAUNCH_CHECK(what, stream_);
}

template <typename Term>
void CudaNnBackend::bf16_linear_backward_of(float* dx, float* dW, float* db, Term dy, const void* xb, const float* W,
                                            long long N, long long I, long long O, const char* what) {
    const int n = as_int(N, "N"), i = as_int(I, "I"), o = as_int(O, "O");
    as_int(N * (I > O ? I : O), "N * max(I, O)");
    auto* dyb = static_cast<std::uint16_t*>(scratch(bf_[0], static_cast<std::size_t>(N * O) * 2));
    column_sums(db, dy, N, O, what, dyb);
    if (dx) gemm_bf16(false, false, i, n, o, to_bf16(1, W, O * I), i, dyb, o, 0.0f, dx, i, what);
    gemm_bf16(false, true, i, o, n, xb, i, dyb, o, 1.0f, dW, i, what);
}

}  // namespace retro::nn::detail
