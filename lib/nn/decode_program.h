// A decode step as data (issue 21: the decode latency within 2x of the weights' bytes over the memory bandwidth).
// generate/backend_decoder.cpp's run_step, run against a DecodeProgramRecorder instead of a backend, lists the ops a
// graph-eligible step calls (one row per advancing sequence, no chunk to encode) with their arguments; the list is
// then
//   - interpreted (run_decode_program: each op called on a backend, in order: the ops' own bits), or
//   - handed to NnBackend::fuse_decode_program: on the GPU one cooperative kernel that runs every op in turn with a
//     grid-wide barrier between phases (decode_barriers; kernels/nn_decode_program_cuda.cu), where a step took ~40 launches of a few
//     µs each (docs/performance.md "Session 49": 0.294 ms a token, 9.8x the bound; each launch ~2.4 µs before any
//     byte moves). The kernel runs each op's own device code (the few-row GEMV, attention_decode, ...), so a fused
//     step gives the launched ops' bits.
// Only the ops the fused kernel can run are recordable (the few-row forms of a decode step, and the zero rows and
// residual sum CCA makes before a sequence's first chunk); any other op the step would call (a gather, a copy, the
// copy head, the encoder) leaves the recorder not ok and the caller falls back to a captured graph.
// provides: DecodeOpKind, DecodeOp, DecodeProgram, DecodeProgramRecorder, run_decode_program, decode_barriers,
//           DecodeProgramMode, decode_program_mode_requested
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "nn/nn_backend.h"

namespace retro::nn {

enum class DecodeOpKind : std::int32_t {
    embedding_position,   // embedding_position_forward(out, ids, table, index, pos_table, N, V = I, C = O)
    linear,               // linear_forward(out, x, W, b, N, I, O)
    rmsnorm_linear,       // rmsnorm_linear_forward(out, xn, norm, x, gamma, W, b, N, I, O, gelu)
    linear_residual,      // linear_residual_forward(out, t = xn, res, x, W, b, N, I, O)
    linear_rotary,        // linear_rotary_forward(out, xn, norm, x, gamma, W, b, N, I, O, rot)
    rmsnorm,              // rmsnorm_forward(out, norm, x, gamma, N, C = I)
    attention_decode,     // attention_decode(out, x = q, cache, index = pos, seq, N = rows, heads, D)
    scatter_rows,         // scatter_rows(out, x, index, N = rows, C = I)
    zero,                 // zero(out, I floats)                      (element-wise: N = 0)
    residual_sum,         // residual_sum(out, x, res, n = I)          (element-wise: N = 0)
};
const char* decode_op_name(DecodeOpKind k);
// the few-row GEMV's ops (their W is a weight matrix [O, I]), and the element-wise ones (no rows)
inline bool decode_op_is_gemv(DecodeOpKind k) {
    return k == DecodeOpKind::linear || k == DecodeOpKind::rmsnorm_linear || k == DecodeOpKind::linear_residual ||
           k == DecodeOpKind::linear_rotary;
}
inline bool decode_op_is_element_wise(DecodeOpKind k) { return k == DecodeOpKind::zero || k == DecodeOpKind::residual_sum; }

// One op's arguments (the fields its kind names; the others null or 0). Plain data: the CUDA backend copies the
// list to device memory as it is.
struct DecodeOp {
    DecodeOpKind kind = DecodeOpKind::linear;
    float* out = nullptr;
    float* xn = nullptr;     // the norms' scratch (rmsnorm_linear, linear_rotary), linear_residual's t
    float* norm = nullptr;
    const float* x = nullptr;
    const float* W = nullptr;
    const float* b = nullptr;
    const float* res = nullptr;
    const float* gamma = nullptr;
    const float* table = nullptr;       // embedding_position's token table
    const float* pos_table = nullptr;   // and its position table
    const std::int32_t* ids = nullptr;
    const std::int64_t* index = nullptr;   // embedding_position's and attention_decode's positions, scatter's rows
    const std::int64_t* seq = nullptr;     // attention_decode's cache slots
    std::int64_t N = 0, I = 0, O = 0;
    std::int64_t heads = 0, D = 0;         // attention_decode
    bool gelu = false;
    NnBackend::LinearRotary rot{};
    NnBackend::DecodeCache cache{};
};

struct DecodeProgram {
    std::vector<DecodeOp> ops;
};

// Stands in for the backend in BackendDecoder::run_step: the ops a fused step can run are appended to `program`;
// any other call marks the recording unusable (ok() false, why() names the op) and does nothing.
class DecodeProgramRecorder {
public:
    DecodeProgram program;
    bool ok() const { return why_.empty(); }
    const std::string& why() const { return why_; }
    void unsupported(const char* op) {
        if (why_.empty()) why_ = op;
    }

    void embedding_position_forward(float* out, const std::int32_t* ids, const float* table, const std::int64_t* pos_index,
                                    const float* pos_table, std::int64_t N, std::int64_t V, std::int64_t C);
    void linear_forward(float* y, const float* x, const float* W, const float* b, std::int64_t N, std::int64_t I,
                        std::int64_t O);
    void rmsnorm_linear_forward(float* y, float* xn, float* norm, const float* x, const float* gamma, const float* W,
                                const float* b, std::int64_t N, std::int64_t I, std::int64_t O, bool gelu);
    void linear_residual_forward(float* out, float* t, const float* res, const float* x, const float* W, const float* b,
                                 std::int64_t N, std::int64_t I, std::int64_t O);
    void linear_rotary_forward(float* y, float* xn, float* norm, const float* x, const float* gamma, const float* W,
                               const float* b, std::int64_t N, std::int64_t I, std::int64_t O,
                               const NnBackend::LinearRotary& r);
    void rmsnorm_forward(float* y, float* norm, const float* x, const float* gamma, std::int64_t N, std::int64_t C);
    void attention_decode(float* out, const float* q, const NnBackend::DecodeCache& c, const std::int64_t* pos,
                          const std::int64_t* seq, std::int64_t rows, std::int64_t H, std::int64_t D);
    void scatter_rows(float* dst, const float* src, const std::int64_t* index, std::int64_t rows, std::int64_t C);
    void zero(void* p, std::size_t bytes);   // (of floats: the rows CCA leaves at 0 before the first chunk)
    void residual_sum(float* dst, const float* a, const float* b, std::int64_t n);

    // what a decode step may call that a fused step cannot run
    void attention_forward(float*, float*, const float*, const float*, const float*, const float*, const float*,
                           const std::uint8_t*, const AttentionShape&) { unsupported("attention_forward"); }
    void copy(void*, const void*, std::size_t) { unsupported("copy"); }
    void gather_rows(float*, const float*, const std::int64_t*, std::int64_t, std::int64_t) { unsupported("gather_rows"); }
    void copy_head_forward(float*, const float*, const CopyCandidate*, std::int64_t, std::int64_t, std::int64_t,
                           std::int64_t, const float*, const float*) {
        unsupported("copy_head_forward");
    }

private:
    std::string why_;
};

// Each op of `p` called on `be`, in order; with `reverse_phases` the ops of each phase (decode_barriers) in reverse
// order, which changes no bit where the phases are right (BackendDecoder's interpret mode: the tests' check of them).
void run_decode_program(NnBackend& be, const DecodeProgram& p, bool reverse_phases = false);

// Which ops of `p` must wait for every op before them (a grid-wide barrier in the fused kernel): out[i] is false only
// where op i and every op since the last barrier are ops whose memory is known from their arguments (the GEMV kinds,
// rmsnorm, the embedding, zero, residual_sum) and op i neither reads nor writes what one of them writes, nor writes
// what one of them reads (e.g. a two-row step's q, k and v projections of one normalised input: one phase instead of
// three). attention_decode and scatter_rows (caches and rows at device-side indices) always wait and are always
// waited for; out[0] is true.
std::vector<bool> decode_barriers(const DecodeProgram& p);

// How BackendDecoder runs a graph-eligible step: `off` (a captured graph: the default), `interpret` (recorded, then
// run_decode_program: for tests and as the fused kernel's reference), `fused` (recorded, then the backend's fused
// step where it has one, else a captured graph). RETRO_DECODE_PROGRAM=off|interpret|fused picks it; unset: off
// (until the fused kernel has been timed on a GPU).
enum class DecodeProgramMode { off, interpret, fused };
DecodeProgramMode decode_program_mode_requested(const char* env);

}  // namespace retro::nn
