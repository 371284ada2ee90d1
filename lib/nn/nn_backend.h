// NnBackend: the primitive ops of RETRO training and decoding (issue 21) behind one interface, so that the model's
// composition (model/backend_model.h, generate/backend_decoder.h) is written once and runs on the CPU (HostNnBackend, nn/nn_backend_host.h:
// the nn/*.h ops themselves) or on the GPU (cuda_nn_backend, nn/nn_backend_cuda.h: kernels/nn_*.cu). Every
// pointer is the backend's memory (host memory for the CPU backend, device 0's for CUDA) unless it says "host".
// Each op has its CPU namesake's contract, word for word (nn/linear.h, rmsnorm.h, gelu.h, rotary.h,
// attention.h, embedding.h, cross_entropy.h, residual.h, copy_head.h): activations are written (=), parameter gradients
// accumulated (+=). The op harness (ops/ops_nn_backend.cpp) runs each op through both backends against the CPU
// in double.
// Determinism: every op gives the same bits for the same inputs on the same device (no atomics in a sum whose
// order could vary), so a GPU run resumes bit-exactly; across backends results differ by rounding only.
// Work is ordered on the backend's stream; download() and the ops that return a host value wait for it.
// Graphs: a sequence of ops recorded once and replayed (begin_capture; CUDA graphs on the GPU).
// provides: NnBackend, RotaryView, BackendBuffer, BackendGraph, kAttentionDecodeMaxD, kAttentionDecodeSplitKeys,
//           attention_decode_workspace
#pragma once
#include <cstddef>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"

#include "nn/attention.h"
#include "nn/copy_head.h"
#include "nn/sampling.h"

namespace retro::nn {

inline constexpr std::int64_t kAttentionDecodeMaxD = 256;   // attention_decode's largest head dimension
inline constexpr std::int64_t kAttentionDecodeSplitKeys = 64;   // keys a CUDA block of attention_decode takes

// Floats of DecodeCache::workspace that attention_decode needs for `rows` rows of H heads of dimension D over caches
// of L positions: one (partial output [D], max, sum) per (row, head, split of kAttentionDecodeSplitKeys keys).
inline std::int64_t attention_decode_workspace(std::int64_t rows, std::int64_t H, std::int64_t D, std::int64_t L) {
    return rows * H * ((L + kAttentionDecodeSplitKeys - 1) / kAttentionDecodeSplitKeys) * (D + 2);
}

// A rotary table in backend memory: cos/sin [rows, rot_dim] (nn/rotary.h's RotaryTable, uploaded).
struct RotaryView {
    const float* cos = nullptr;
    const float* sin = nullptr;
    std::int64_t rows = 0, rot_dim = 0;
};

struct DecodeProgram;   // nn/decode_program.h

// What launch_graph() of a fused decode step (NnBackend::fuse_decode_program) throws where the device refused the
// launch before anything ran (CUDA: cudaErrorCooperativeLaunchTooLarge, a grid larger than the device will hold at
// once; the grid is sized from the occupancy query when the step is made, so this is not expected, and not yet seen:
// an MPS client's limits are one way it might come). Nothing ran, so the step's inputs are as they were: the caller
// may run the step another way (BackendDecoder captures a graph instead). A backend that threw it fuses no later
// program (fuse_decode_program returns null, `why` naming the refusal).
struct FusedLaunchRefused : InternalError {
    using InternalError::InternalError;
};

// A recording of ops made between NnBackend::begin_capture() and end_capture(), replayed by launch_graph().
class BackendGraph {
public:
    virtual ~BackendGraph() = default;
};

class NnBackend {
public:
    virtual ~NnBackend() = default;
    virtual std::string name() const = 0;   // "cpu", "cuda"

    // The inputs of the linear layers' GEMMs (x, W and dy): fp32 (the default), or bf16: rounded to bf16 (nearest
    // even) and multiplied with fp32 accumulation into fp32 outputs, as torch.autocast runs a Linear in bf16 (except
    // that the output stays fp32). The bias, db and every other op (the attention core's products included) stay
    // fp32; parameters and gradients stay fp32 (the master copy). The GPU runs bf16 GEMMs on its tensor cores; the
    // host backend rounds the same inputs and multiplies in fp32, a reference for the mode.
    enum class GemmInputs { fp32, bf16 };
    void set_gemm_inputs(GemmInputs g) { gemm_inputs_ = g; }
    GemmInputs gemm_inputs() const { return gemm_inputs_; }

    // Fused attention (off by default): in the bf16 mode the CUDA backend then runs self-attention without a null
    // column or key mask (Nq == Nk, D of 32, 64 or 128, Nk > D: the decoder's causal self-attention) as one
    // flash-style kernel on the tensor cores (bf16 Q, K, V, P and dS, fp32 accumulation and softmax) instead of the
    // fp32 GEMM path; `probs` then holds what its backward needs, not the probabilities. Set it before a forward and
    // keep it until that forward's backward. The host backend ignores it.
    void set_fused_attention(bool on) { fused_attention_ = on; }
    bool fused_attention() const { return fused_attention_; }

    // bf16 activations (on by default; read by the layers in the bf16 GEMM mode only, model/backend_layers.cpp): the
    // activations only linear layers read — the feed-forward's gelu output, the pre-norm outputs before the
    // feed-forward and the attention, the attention's output (attention_output_bf16_offset) — kept only as the bf16
    // copy the GEMMs multiply (the *_bf16 / *_bf16x ops below), where they were kept fp32 and rounded in every GEMM
    // call: the same values, fewer passes. Off: the fp32 form (for an A/B; the CUDA backend starts with it off under
    // RETRO_UNFUSE=feed_forward_bf16).
    void set_bf16_activations(bool on) { bf16_activations_ = on; }
    bool bf16_activations() const { return bf16_activations_; }

    // Graphs (the decoder's launch-bound steps; CUDA graphs on the GPU): between begin_capture() and end_capture() the
    // ops are recorded instead of run; launch_graph() runs the recording again with the arguments each op had when it
    // was recorded (pointers, sizes, scalars, the GEMM-input mode), so whatever changes between launches must be in
    // backend memory, uploaded before the launch. While capturing, alloc, release, upload, download, synchronize and
    // the ops that return a host value throw InternalError: none can be part of a graph. abort_capture() ends a
    // capture an op failed in, discarding it, and throws nothing (a caller's handler calls it before rethrowing the
    // op's error, which an error of ending the broken capture — CUDA's "capture invalidated" — must not replace).
    virtual void begin_capture() = 0;
    virtual std::unique_ptr<BackendGraph> end_capture() = 0;
    virtual void abort_capture() noexcept = 0;
    virtual void launch_graph(const BackendGraph& graph) = 0;
    bool capturing() const { return capturing_; }
    // A decode step's recorded ops (nn/decode_program.h) as one runnable whole, launched like a graph by
    // launch_graph(): on the GPU one cooperative kernel running the ops in turn with a grid-wide barrier between
    // them, the launched ops' bits. Null where the backend has no such form or the program has an op, shape or
    // alignment it does not take (`why` then says which, when given); the caller captures a graph instead.
    virtual std::unique_ptr<BackendGraph> fuse_decode_program(const DecodeProgram&, std::string* why = nullptr) {
        if (why) *why = "no fused decode step on this backend";
        return nullptr;
    }

    // Memory. alloc() returns memory aligned to 256 bytes, or throws InternalError; release(nullptr) does nothing.
    virtual void* alloc(std::size_t bytes) = 0;
    virtual void release(void* p) noexcept = 0;
    virtual void upload(void* dst, const void* host_src, std::size_t bytes) = 0;     // returns when copied
    virtual void download(void* host_dst, const void* src, std::size_t bytes) = 0;   // waits for earlier work
    virtual void copy(void* dst, const void* src, std::size_t bytes) = 0;
    virtual void zero(void* p, std::size_t bytes) = 0;
    virtual void synchronize() = 0;
    // Device bytes of the grow-only scratch the backend holds now, besides what alloc() handed out (the bf16 GEMM and
    // attention operand copies, the attention backward's and the column sums' temporaries, ...; the libraries'
    // workspaces apart); 0 on the host. What model/backend_model.h's backend_model_scratch_bound bounds for a training
    // step beside its allowance for those workspaces (checked on a GPU).
    virtual std::size_t scratch_device_bytes() const { return 0; }

    // y[N, O] = x W^T + b (b may be null); backward: dx = dy W (dx may be null), dW += dy^T x, db += sum dy
    // (dW null: neither dW nor db).
    virtual void linear_forward(float* y, const float* x, const float* W, const float* b, std::int64_t N,
                                std::int64_t I, std::int64_t O) = 0;
    virtual void linear_backward(float* dx, float* dW, float* db, const float* dy, const float* x, const float* W,
                                 std::int64_t N, std::int64_t I, std::int64_t O) = 0;
    // Linear layers over an input stored as bf16 (bf16 activations): x16 [N, I] holds bf16 bits, x = their values.
    //   linear_gelu_forward_bf16:  h = x W^T + b (linear_forward, h required) and g16 = bf16(gelu(h)): g of
    //                              linear_gelu_forward stored as the bf16 its consumer's GEMMs round it to;
    //   linear_forward_bf16x:      linear_forward(y, x, W, b, N, I, O);
    //   linear_backward_bf16x:     linear_backward(dx, dW, db, dy, x, W, N, I, O).
    // In the bf16 GEMM mode these compute what the fp32-input ops compute (bf16 rounding of a bf16 value is itself):
    // on the host the same bits; on the GPU the same up to the GEMMs' order of sums (linear_gelu_forward_bf16 adds the
    // bias after a beta-0 GEMM where linear_forward has the GEMM add onto bias rows).
    virtual void linear_gelu_forward_bf16(std::uint16_t* g16, float* h, const float* x, const float* W, const float* b,
                                          std::int64_t N, std::int64_t I, std::int64_t O) = 0;
    virtual void linear_forward_bf16x(float* y, const std::uint16_t* x16, const float* W, const float* b,
                                      std::int64_t N, std::int64_t I, std::int64_t O) = 0;
    virtual void linear_backward_bf16x(float* dx, float* dW, float* db, const float* dy, const std::uint16_t* x16,
                                       const float* W, std::int64_t N, std::int64_t I, std::int64_t O) = 0;
    // The feed-forward's input, the pre-norm output, stored only as bf16 too (bf16 activations):
    //   residual_rmsnorm_forward_bf16: residual_rmsnorm_forward(x, y, norm, a, b, gamma, N, C) with y stored only as
    //                                  y16 = bf16(y) [N, C], the bf16 the first layer's GEMMs round it to;
    //   linear_gelu_forward_bf16x:     linear_gelu_forward_bf16(g16, h, x, W, b, N, I, O), x the values of x16;
    //   gelu_linear_backward_bf16x:    gelu_linear_backward(dx, dW, db, dg, h, x, W, N, I, O), x the values of x16.
    // In the bf16 GEMM mode the same floats as the fp32-stored forms, as above.
    virtual void residual_rmsnorm_forward_bf16(float* x, std::uint16_t* y16, float* norm, const float* a,
                                               const float* b, const float* gamma, std::int64_t N, std::int64_t C) = 0;
    virtual void linear_gelu_forward_bf16x(std::uint16_t* g16, float* h, const std::uint16_t* x16, const float* W,
                                           const float* b, std::int64_t N, std::int64_t I, std::int64_t O) = 0;
    virtual void gelu_linear_backward_bf16x(float* dx, float* dW, float* db, float* dg, const float* h,
                                            const std::uint16_t* x16, const float* W, std::int64_t N, std::int64_t I,
                                            std::int64_t O) {
        gelu_backward(dg, dg, h, N * O);
        linear_backward_bf16x(dx, dW, db, dg, x16, W, N, I, O);
    }
    // And the attention's input (bf16 activations):
    //   rmsnorm_forward_bf16:           rmsnorm_forward(y, norm, x, gamma, N, C) with y stored only as y16 = bf16(y);
    //   linear_forward_shared_bf16x,
    //   linear_backward_shared_bf16x:   linear_forward_shared / linear_backward_shared (below) with x the values of x16.
    virtual void rmsnorm_forward_bf16(std::uint16_t* y16, float* norm, const float* x, const float* gamma,
                                      std::int64_t N, std::int64_t C) = 0;
    // g = gelu(x W^T + b), and h = x W^T + b when h is not null: linear_forward then gelu_forward, the same floats
    // (the feed-forward's first layer; on the GPU the gelu rides in the few-row GEMV's epilogue)
    virtual void linear_gelu_forward(float* g, float* h, const float* x, const float* W, const float* b,
                                     std::int64_t N, std::int64_t I, std::int64_t O) = 0;

    // The feed-forward's first layer backward from the gradient of its gelu's output: gelu_backward(dg, dg, h, N * O),
    // then linear_backward(dx, dW, db, dg, x, W, N, I, O); dg [N, O] is scratch (its contents afterwards
    // unspecified). In the bf16 GEMM mode the GPU writes the layer's dy only as the GEMMs' bf16 copy, computing it and
    // db's column sums in one pass (the two ops: a gelu pass, a rounding pass and a column-sum pass over fp32 dy).
    virtual void gelu_linear_backward(float* dx, float* dW, float* db, float* dg, const float* h, const float* x,
                                      const float* W, std::int64_t N, std::int64_t I, std::int64_t O) {
        gelu_backward(dg, dg, h, N * O);
        linear_backward(dx, dW, db, dg, x, W, N, I, O);
    }

    // Linear layers without bias reading one input (an attention's q, k, v projections of x, or k, v of the
    // context): for i < count (<= kMaxShared), y[i] = x W[i]^T [N, O]; backward dx = sum_i dy[i] W[i], added in i order
    // as the separate layers' dx are ((dy0 W0 + dy1 W1) + dy2 W2; dx null: none), and dW[i] += dy[i]^T x. The default
    // runs the single ops (linear_backward's dx of i > 0 into tmp [N, I], then residual_add); the GPU rounds x to bf16
    // once for every GEMM, accumulates dx in the GEMMs (beta 1), and where the W[i] and y[i] (dy[i] and dW[i]) lie at
    // equal strides runs one strided-batched GEMM for the y (the dW).
    static constexpr int kMaxShared = 4;
    struct SharedLinears {
        int count = 0;
        const float* W[kMaxShared] = {};
        float* y[kMaxShared] = {};          // forward: the outputs
        const float* dy[kMaxShared] = {};   // backward: the outputs' gradients
        float* dW[kMaxShared] = {};         // backward: the weights' gradients (+=)
    };
    virtual void linear_forward_shared(const SharedLinears& l, const float* x, std::int64_t N, std::int64_t I,
                                       std::int64_t O) {
        for (int i = 0; i < l.count; i++) linear_forward(l.y[i], x, l.W[i], nullptr, N, I, O);
    }
    virtual void linear_backward_shared(float* dx, float* tmp, const SharedLinears& l, const float* x, std::int64_t N,
                                        std::int64_t I, std::int64_t O) {
        for (int i = 0; i < l.count; i++) {
            linear_backward(i == 0 ? dx : (dx ? tmp : nullptr), l.dW[i], nullptr, l.dy[i], x, l.W[i], N, I, O);
            if (i > 0 && dx) residual_add(dx, tmp, N * I);
        }
    }
    virtual void linear_forward_shared_bf16x(const SharedLinears& l, const std::uint16_t* x16, std::int64_t N,
                                             std::int64_t I, std::int64_t O) {
        for (int i = 0; i < l.count; i++) linear_forward_bf16x(l.y[i], x16, l.W[i], nullptr, N, I, O);
    }
    virtual void linear_backward_shared_bf16x(float* dx, float* tmp, const SharedLinears& l, const std::uint16_t* x16,
                                              std::int64_t N, std::int64_t I, std::int64_t O) {
        for (int i = 0; i < l.count; i++) {
            linear_backward_bf16x(i == 0 ? dx : (dx ? tmp : nullptr), l.dW[i], nullptr, l.dy[i], x16, l.W[i], N, I, O);
            if (i > 0 && dx) residual_add(dx, tmp, N * I);
        }
    }

    virtual void rmsnorm_forward(float* y, float* norm, const float* x, const float* gamma, std::int64_t N,
                                 std::int64_t C) = 0;
    virtual void rmsnorm_backward(float* dx, float* dgamma, const float* dy, const float* x, const float* gamma,
                                  const float* norm, std::int64_t N, std::int64_t C) = 0;

    // Fused forms of the pre-norm stack's pairs (one pass over the rows on the GPU, the same arithmetic as the two ops):
    //   residual_rmsnorm_forward: x = a + b (residual_sum; x may be a; y and norm alias nothing), then
    //                             rmsnorm_forward(y, norm, x, gamma)
    //   rmsnorm_backward_add:     rmsnorm_backward into a temporary, then residual_add(dx, temporary): dx +=
    //                             (dgamma += as rmsnorm_backward; dx is neither dy nor x)
    virtual void residual_rmsnorm_forward(float* x, float* y, float* norm, const float* a, const float* b,
                                          const float* gamma, std::int64_t N, std::int64_t C) = 0;
    virtual void rmsnorm_backward_add(float* dx, float* dgamma, const float* dy, const float* x, const float* gamma,
                                      const float* norm, std::int64_t N, std::int64_t C) = 0;

    // The decoder's few-row pairs as one op each (generate/backend_decoder.cpp; decoding is launch-bound): on the GPU
    // one GEMV launch for up to 8 rows in fp32, the same floats as the two ops they stand for, which are the default
    // (and every other case's) implementation:
    //   rmsnorm_linear_forward:  rmsnorm_forward(xn, norm, x, gamma, N, I), then linear_forward(y, xn, W, b, N, I, O),
    //                            or with gelu linear_gelu_forward(y, nullptr, xn, W, b, N, I, O). xn [N, I] and norm
    //                            [N] are the two-op form's scratch: their contents afterwards are unspecified.
    //   linear_residual_forward: linear_forward(t, x, W, b, N, I, O), then residual_sum(out, res, t, N * O). t [N, O]
    //                            is scratch (unspecified afterwards); out may be res, neither is x or t.
    virtual void rmsnorm_linear_forward(float* y, float* xn, float* norm, const float* x, const float* gamma,
                                        const float* W, const float* b, std::int64_t N, std::int64_t I, std::int64_t O,
                                        bool gelu) {
        rmsnorm_forward(xn, norm, x, gamma, N, I);
        if (gelu) linear_gelu_forward(y, nullptr, xn, W, b, N, I, O);
        else linear_forward(y, xn, W, b, N, I, O);
    }
    virtual void linear_residual_forward(float* out, float* t, const float* res, const float* x, const float* W,
                                         const float* b, std::int64_t N, std::int64_t I, std::int64_t O) {
        linear_forward(t, x, W, b, N, I, O);
        residual_sum(out, res, t, N * O);
    }
    //   linear_rotary_forward:   where gamma is not null rmsnorm_forward(xn, norm, x, gamma, N, I) first (x then
    //                            means xn), linear_forward(y, x, W, b, N, I, O), then rotary_scale_forward(y, y,
    //                            r.table, 1, N, r.heads, r.D, r.scale, r.scaled_heads) over the first r.heads heads of
    //                            r.D columns of each row (the decoder's q | k or q projection with its rotation). Needs
    //                            N == 1 or O == r.heads * r.D (rows that rotary_scale_forward reads) and r.table.rows == N.
    struct LinearRotary {
        RotaryView table;
        std::int64_t heads = 0, D = 0;
        float scale = 1.0f;
        std::int64_t scaled_heads = 0;
    };
    virtual void linear_rotary_forward(float* y, float* xn, float* norm, const float* x, const float* gamma,
                                       const float* W, const float* b, std::int64_t N, std::int64_t I, std::int64_t O,
                                       const LinearRotary& r) {
        RETRO_CHECK(N == 1 || O == r.heads * r.D, "linear_rotary_forward: ", N, " rows of ", O, " columns for ", r.heads,
                    " rotated heads of ", r.D);
        if (gamma) rmsnorm_forward(xn, norm, x, gamma, N, I);
        linear_forward(y, gamma ? xn : x, W, b, N, I, O);
        rotary_scale_forward(y, y, r.table, 1, N, r.heads, r.D, r.scale, r.scaled_heads);
    }

    virtual void gelu_forward(float* y, const float* x, std::int64_t N) = 0;
    virtual void gelu_backward(float* dx, const float* dy, const float* x, std::int64_t N) = 0;

    // x, y [B, N, H*D], table.rows == N; in place allowed (y == x).
    virtual void rotary_forward(float* y, const float* x, const RotaryView& table, std::int64_t B, std::int64_t N,
                                std::int64_t H, std::int64_t D) = 0;
    virtual void rotary_backward(float* dx, const float* dy, const RotaryView& table, std::int64_t B,
                                 std::int64_t N, std::int64_t H, std::int64_t D) = 0;
    // rotary_forward of x with the first `scaled_heads` heads of every row multiplied by s first (every channel of
    // them, the unrotated ones too): scale then rotary_forward in one pass, the same float per element (the queries'
    // dim_head^-1/2 and their rotation; with a row of q | k heads, scaled_heads = H). In place allowed.
    virtual void rotary_scale_forward(float* y, const float* x, const RotaryView& table, std::int64_t B, std::int64_t N,
                                      std::int64_t H, std::int64_t D, float s, std::int64_t scaled_heads) = 0;
    // rotary_backward of dy with every element of the result multiplied by s: the backward of rotary_scale_forward
    // over all heads, as rotary_backward then scale(dx, s, B*N*H*D) in one pass (the same float per element). In
    // place allowed.
    virtual void rotary_backward_scale(float* dx, const float* dy, const RotaryView& table, std::int64_t B,
                                       std::int64_t N, std::int64_t H, std::int64_t D, float s) = 0;

    // x[i] *= s for n elements (the queries' dim_head^-1/2, as nn/attention_layer.cpp applies it).
    virtual void scale(float* x, float s, std::int64_t n) = 0;

    // nn/attention.h's attention_forward / attention_backward; key_mask [B, Nk] bytes (1 = attend) or null,
    // null_k / null_v [H*D] when s.null_kv; probs [B, H, Nq, s.keys()].
    virtual void attention_forward(float* out, float* probs, const float* q, const float* k, const float* v,
                                   const float* null_k, const float* null_v, const std::uint8_t* key_mask,
                                   const AttentionShape& s) = 0;
    virtual void attention_backward(float* dq, float* dk, float* dv, float* dnull_k, float* dnull_v,
                                    const float* dout, const float* probs, const float* q, const float* k,
                                    const float* v, const float* null_k, const float* null_v,
                                    const std::uint8_t* key_mask, const AttentionShape& s) = 0;
    // The floats of `probs` attention_forward writes for shape s (with a key mask or not) and attention_backward
    // reads: the probabilities B·H·Nq·keys, or, where the CUDA backend's fused attention takes the shape in its
    // current mode, only what its backward needs (lse and out's bf16 copy, B·H·Nq·(1 + D/2); with the null column or
    // a key mask also the copy's remainder, B·H·Nq·(1 + D), more than the probabilities where a row has fewer than about
    // 1 + D keys).
    // Callers size probs to this (model/backend_model.h's arena, the op harness), asked in the mode of the call.
    virtual std::int64_t attention_saved_floats(const AttentionShape& s, bool key_mask) const {
        (void)key_mask;
        return s.B * s.H * s.Nq * s.keys();
    }
    // Where the mode keeps an attention's output only as bf16 for the output projection's GEMMs (the bf16 GEMM mode
    // with bf16 activations; on the CUDA backend where the fused attention's mma kernels take the shape, their stash
    // holding that copy anyway): the float offset in `probs` of out's bf16 copy [B, Nq, H*D], else -1 (the default).
    // Where it is >= 0, attention_forward may be given out = nullptr: it then writes that copy (the values the bf16
    // GEMMs would round out to) and no fp32 out; probs is attention_saved_floats(s, key_mask) floats, asked in the
    // same mode. attention_backward never reads out.
    virtual std::int64_t attention_output_bf16_offset(const AttentionShape& s, bool key_mask) const {
        (void)s, (void)key_mask;
        return -1;
    }
    // Where a bf16 copy goes after `floats` floats of a saved buffer: rounded up to 64 floats, so that it is 256-byte
    // aligned as every arena buffer is (the GEMMs that read it as an operand, cuBLASLt's algorithms among them, then
    // see an aligned pointer whatever B·H·Nq is).
    static std::int64_t bf16_copy_at(std::int64_t floats) { return (floats + 63) / 64 * 64; }

    // One query row per row attending cached keys, in one call (generate/backend_decoder.h's decode steps): row i's
    // query q[i] [H*D] (scaled and rotated by the caller) attends keys 0..pos[i] of slot seq[i] of the caches, plus
    // the null column when given, under the mask when given: out [rows, H*D], attention_forward's arithmetic for one
    // query (causal without null column or mask, as the self-attention's cache; not causal with them, as CCA's
    // chunk). With k_new / v_new [rows, H*D], row i's key and value are first written at (seq[i], pos[i]) (the
    // self-attention's new row; then the seq[i] are distinct). pos and seq [rows] in backend memory (pos[i] < L), so
    // a step's positions need no host round trip; D <= kAttentionDecodeMaxD.
    struct DecodeCache {
        float *kcache = nullptr, *vcache = nullptr;   // [slots, L, H*D]
        std::int64_t L = 0;
        const float *k_new = nullptr, *v_new = nullptr;           // [rows, H*D] or null: nothing written
        const float *null_k = nullptr, *null_v = nullptr;         // [H*D] or null
        const std::uint8_t* key_mask = nullptr;                   // [slots, L] bytes (1 = attend) or null
        // attention_decode_workspace(rows, H, D, L) floats of backend memory the call may overwrite (the CUDA
        // backend's per-split partials; the host backend needs none), and `rows * H` counters that must be zero
        // before the first call and that every call leaves zero (on the GPU the last split of a (row, head) to finish
        // combines them). The caller's, so that a captured graph's buffers are all the caller's own (a backend
        // scratch that grew later would leave the graph a freed pointer); the counters apart from the partials, so
        // that a call with more rows finds zeros where a call with fewer left its partials
        float* workspace = nullptr;
        std::uint32_t* counters = nullptr;
    };
    virtual void attention_decode(float* out, const float* q, const DecodeCache& c, const std::int64_t* pos,
                                  const std::int64_t* seq, std::int64_t rows, std::int64_t H, std::int64_t D) = 0;

    // out[N, C] = table[ids[n]] (ids valid: the caller checks them on the host); backward dtable[ids[n]] += dout[n]
    // in n order per element.
    virtual void embedding_forward(float* out, const std::int32_t* ids, const float* table, std::int64_t N,
                                   std::int64_t V, std::int64_t C) = 0;
    virtual void embedding_backward(float* dtable, const float* dout, const std::int32_t* ids, std::int64_t N,
                                    std::int64_t C) = 0;
    // The decoder's embedding of a step's rows: embedding_forward(out, ids, table, N, V, C), then
    // gather_add_rows(out, pos_table, pos_index, N, C) (row n += pos_table[pos_index[n]] where pos_index[n] >= 0;
    // pos_index in backend memory); on the GPU one launch.
    virtual void embedding_position_forward(float* out, const std::int32_t* ids, const float* table,
                                            const std::int64_t* pos_index, const float* pos_table, std::int64_t N,
                                            std::int64_t V, std::int64_t C) {
        embedding_forward(out, ids, table, N, V, C);
        gather_add_rows(out, pos_table, pos_index, N, C);
    }
    // out[B, T, C] += pos[t]; dpos[t] += sum over b in order.
    virtual void position_add_forward(float* out, const float* pos, std::int64_t B, std::int64_t Tn,
                                      std::int64_t C) = 0;
    virtual void position_add_backward(float* dpos, const float* dout, std::int64_t B, std::int64_t Tn,
                                       std::int64_t C) = 0;

    // Returns the mean loss on the host (waits); lse [N] is kept for backward; *valid = non-ignored rows.
    virtual float cross_entropy_forward(float* lse, std::int64_t* valid, const float* logits,
                                        const std::int32_t* targets, std::int64_t N, std::int64_t V,
                                        std::int32_t ignore_index) = 0;
    virtual void cross_entropy_backward(float* dlogits, float dloss, const float* logits, const float* lse,
                                        const std::int32_t* targets, std::int64_t N, std::int64_t V,
                                        std::int32_t ignore_index, std::int64_t valid) = 0;

    // Next tokens (decoding): ids[j] = sample_row(logits row rows[j], V, p, u[j]) for j < n (nn/sampling.h), with
    // logits [*, ld] in backend memory (V <= ld: the first V columns of a row are drawn from; the tokenizer's
    // vocabulary where it is smaller than the model's) and ids, rows and u on the host (u unread when p.greedy); returns when ids are
    // written. A row with a logit that is not finite (NaN, +-inf) among its first V gives -1 (the caller names the
    // weights: generate/next_tokens.h). Here the rows are downloaded and drawn on the host; the GPU draws on the device
    // and downloads only the ids (kernels/nn_sample.cuh: greedy the same id, a draw the same one unless u or the top-p
    // mass falls within V^2 2^-64 of a boundary between two ids, where its fixed-point weights may round the other way).
    virtual void sample_rows(std::int32_t* ids, const float* logits, const std::int64_t* rows, std::int64_t n,
                             std::int64_t V, std::int64_t ld, const SamplingParams& p, const double* u) {
        std::vector<float> row(static_cast<std::size_t>(V));
        for (std::int64_t j = 0; j < n; j++) {
            download(row.data(), logits + rows[j] * ld, row.size() * sizeof(float));
            bool finite = true;
            for (const float x : row) finite = finite && std::isfinite(x);
            ids[j] = finite ? sample_row(row.data(), V, p, p.greedy ? 0.0 : u[j]) : -1;
        }
    }

    // The logits layer's backward from the loss: cross_entropy_backward(dlogits, dloss, logits, lse, targets, N, V,
    // ignore_index, valid), then linear_backward(dx, dW, db, dlogits, x, W, N, I, V); dlogits [N, V] is scratch (its
    // contents afterwards unspecified). In the bf16 GEMM mode (with dW and db) the GPU computes dlogits inside db's
    // first column-sum pass and writes it only as the GEMMs' bf16 copy (the two ops: a gradient pass, a rounding pass
    // and a column-sum pass over fp32 dlogits).
    virtual void cross_entropy_linear_backward(float* dx, float* dW, float* db, float* dlogits, float dloss,
                                               const float* logits, const float* lse, const std::int32_t* targets,
                                               std::int32_t ignore_index, std::int64_t valid, const float* x,
                                               const float* W, std::int64_t N, std::int64_t I, std::int64_t V) {
        cross_entropy_backward(dlogits, dloss, logits, lse, targets, N, V, ignore_index, valid);
        linear_backward(dx, dW, db, dlogits, x, W, N, I, V);
    }
    // Whether cross_entropy_linear_backward in the current mode, with a dW and a db (given or not), uses its dlogits
    // scratch; where not, a caller may pass null there (model/backend_model.h's arena then holds no N·V floats for it:
    // 4.2 GB at the 172M config's 32 x 1024 tokens) as long as the mode stays as it was when asked.
    virtual bool cross_entropy_linear_backward_uses_dlogits(bool with_dW, bool with_db) const {
        (void)with_dW;
        (void)with_db;
        return true;
    }

    // dst = a + b;  dst += src  (n elements; nn/residual.h)
    virtual void residual_sum(float* dst, const float* a, const float* b, std::int64_t n) = 0;
    virtual void residual_add(float* dst, const float* src, std::int64_t n) = 0;

    // Row gathers for the chunk layouts (CCA's shift, the encoder's context): for i < rows,
    //   gather_rows:     dst[i, :]  = index[i] >= 0 ? src[index[i], :] : 0
    //   gather_add_rows: dst[i, :] += src[index[i], :]   where index[i] >= 0
    //   scatter_rows:    dst[index[i], :] = src[i, :]    where index[i] >= 0 (those distinct; other dst rows stay)
    // rows of C floats; index [rows] in backend memory.
    virtual void gather_rows(float* dst, const float* src, const std::int64_t* index, std::int64_t rows,
                             std::int64_t C) = 0;
    virtual void gather_add_rows(float* dst, const float* src, const std::int64_t* index, std::int64_t rows,
                                 std::int64_t C) = 0;
    virtual void scatter_rows(float* dst, const float* src, const std::int64_t* index, std::int64_t rows,
                              std::int64_t C) = 0;

    // The copy head (nn/copy_head.h, config copy_head): logits [rows, V] += the gates of cand [rows, k] (found on the
    // host by nn::copy_candidates_batch or nn::copy_candidates, uploaded); xn [rows, C]; bias [kCopyBuckets],
    // weight [kCopyBuckets, C]. Two candidates of one row naming the same token both add, in neighbour order.
    // backward: dxn, dbias, dweight += (any may be null: not wanted).
    virtual void copy_head_forward(float* logits, const float* xn, const CopyCandidate* cand, std::int64_t rows,
                                   std::int64_t k, std::int64_t V, std::int64_t C, const float* bias,
                                   const float* weight) = 0;
    virtual void copy_head_backward(float* dxn, float* dbias, float* dweight, const float* dlogits, const float* xn,
                                    const CopyCandidate* cand, std::int64_t rows, std::int64_t k, std::int64_t V,
                                    std::int64_t C, const float* weight) = 0;

    // sum of x[i]^2 over n elements, accumulated in double in a fixed order; returned on the host (waits).
    virtual double sum_squares(const float* x, std::int64_t n) = 0;

    // One AdamW update of n elements, train/adamw.cpp's arithmetic in float, element by element:
    //   if decay[i]: p *= a.decay;  m = m + a.w1 (g - m);  v = v a.b2 + a.w2 g^2;
    //   p = p + (-a.step_size) (m / (sqrt(v) / a.bc2_sqrt + a.eps))
    // decay [n] bytes (1 = the tensor decays). The scalars are computed on the host per step (AdamWScalars).
    struct AdamWScalars {
        float decay = 1, w1 = 0, b2 = 0, w2 = 0, step_size = 0, bc2_sqrt = 1, eps = 0;
    };
    virtual void adamw_update(float* p, const float* g, float* m, float* v, const std::uint8_t* decay,
                              std::int64_t n, const AdamWScalars& a) = 0;

protected:
    void refuse_while_capturing(const char* what) const {
        if (capturing_) throw InternalError(cat("NnBackend::", what, " while a graph is being captured"));
    }
    GemmInputs gemm_inputs_ = GemmInputs::fp32;
    bool fused_attention_ = false;
    bool bf16_activations_ = true;
    bool capturing_ = false;
};

// A buffer in a backend's memory, released with it (movable, not copyable).
class BackendBuffer {
public:
    BackendBuffer() = default;
    BackendBuffer(NnBackend& be, std::size_t bytes) : be_(&be), p_(be.alloc(bytes)) {}
    BackendBuffer(BackendBuffer&& o) noexcept : be_(o.be_), p_(o.p_) { o.p_ = nullptr; }
    BackendBuffer& operator=(BackendBuffer&& o) noexcept {
        std::swap(be_, o.be_);
        std::swap(p_, o.p_);
        return *this;
    }
    BackendBuffer(const BackendBuffer&) = delete;
    BackendBuffer& operator=(const BackendBuffer&) = delete;
    ~BackendBuffer() {
        if (be_) be_->release(p_);
    }
    void* get() const { return p_; }
    float* f() const { return static_cast<float*>(p_); }

private:
    NnBackend* be_ = nullptr;
    void* p_ = nullptr;
};

}  // namespace retro::nn
