#include "nn/decode_program.h"

#include <cstdint>
#include <cstring>

#include "core/error.h"

namespace retro::nn {

const char* decode_op_name(DecodeOpKind k) {
    switch (k) {
        case DecodeOpKind::embedding_position: return "embedding_position_forward";
        case DecodeOpKind::linear: return "linear_forward";
        case DecodeOpKind::rmsnorm_linear: return "rmsnorm_linear_forward";
        case DecodeOpKind::linear_residual: return "linear_residual_forward";
        case DecodeOpKind::linear_rotary: return "linear_rotary_forward";
        case DecodeOpKind::rmsnorm: return "rmsnorm_forward";
        case DecodeOpKind::attention_decode: return "attention_decode";
        case DecodeOpKind::scatter_rows: return "scatter_rows";
        case DecodeOpKind::zero: return "zero";
        case DecodeOpKind::residual_sum: return "residual_sum";
    }
    return "?";
}

void DecodeProgramRecorder::embedding_position_forward(float* out, const std::int32_t* ids, const float* table,
                                                       const std::int64_t* pos_index, const float* pos_table,
                                                       std::int64_t N, std::int64_t V, std::int64_t C) {
    DecodeOp o;
    o.kind = DecodeOpKind::embedding_position;
    o.out = out, o.ids = ids, o.table = table, o.index = pos_index, o.pos_table = pos_table;
    o.N = N, o.I = V, o.O = C;
    program.ops.push_back(o);
}

void DecodeProgramRecorder::linear_forward(float* y, const float* x, const float* W, const float* b, std::int64_t N,
                                           std::int64_t I, std::int64_t O) {
    DecodeOp o;
    o.kind = DecodeOpKind::linear;
    o.out = y, o.x = x, o.W = W, o.b = b, o.N = N, o.I = I, o.O = O;
    program.ops.push_back(o);
}

void DecodeProgramRecorder::rmsnorm_linear_forward(float* y, float* xn, float* norm, const float* x, const float* gamma,
                                                   const float* W, const float* b, std::int64_t N, std::int64_t I,
                                                   std::int64_t O, bool gelu) {
    DecodeOp o;
    o.kind = DecodeOpKind::rmsnorm_linear;
    o.out = y, o.xn = xn, o.norm = norm, o.x = x, o.gamma = gamma, o.W = W, o.b = b, o.N = N, o.I = I, o.O = O;
    o.gelu = gelu;
    program.ops.push_back(o);
}

void DecodeProgramRecorder::linear_residual_forward(float* out, float* t, const float* res, const float* x,
                                                    const float* W, const float* b, std::int64_t N, std::int64_t I,
                                                    std::int64_t O) {
    DecodeOp o;
    o.kind = DecodeOpKind::linear_residual;
    o.out = out, o.xn = t, o.res = res, o.x = x, o.W = W, o.b = b, o.N = N, o.I = I, o.O = O;
    program.ops.push_back(o);
}

void DecodeProgramRecorder::linear_rotary_forward(float* y, float* xn, float* norm, const float* x, const float* gamma,
                                                  const float* W, const float* b, std::int64_t N, std::int64_t I,
                                                  std::int64_t O, const NnBackend::LinearRotary& r) {
    DecodeOp o;
    o.kind = DecodeOpKind::linear_rotary;
    o.out = y, o.xn = xn, o.norm = norm, o.x = x, o.gamma = gamma, o.W = W, o.b = b, o.N = N, o.I = I, o.O = O;
    o.rot = r;
    program.ops.push_back(o);
}

void DecodeProgramRecorder::rmsnorm_forward(float* y, float* norm, const float* x, const float* gamma, std::int64_t N,
                                            std::int64_t C) {
    DecodeOp o;
    o.kind = DecodeOpKind::rmsnorm;
    o.out = y, o.norm = norm, o.x = x, o.gamma = gamma, o.N = N, o.I = C;
    program.ops.push_back(o);
}

void DecodeProgramRecorder::attention_decode(float* out, const float* q, const NnBackend::DecodeCache& c,
                                             const std::int64_t* pos, const std::int64_t* seq, std::int64_t rows,
                                             std::int64_t H, std::int64_t D) {
    DecodeOp o;
    o.kind = DecodeOpKind::attention_decode;
    o.out = out, o.x = q, o.cache = c, o.index = pos, o.seq = seq, o.N = rows, o.heads = H, o.D = D;
    program.ops.push_back(o);
}

void DecodeProgramRecorder::scatter_rows(float* dst, const float* src, const std::int64_t* index, std::int64_t rows,
                                         std::int64_t C) {
    DecodeOp o;
    o.kind = DecodeOpKind::scatter_rows;
    o.out = dst, o.x = src, o.index = index, o.N = rows, o.I = C;
    program.ops.push_back(o);
}

void DecodeProgramRecorder::zero(void* p, std::size_t bytes) {
    if (bytes % sizeof(float) != 0) return unsupported("zero (not of floats)");
    DecodeOp o;
    o.kind = DecodeOpKind::zero;
    o.out = static_cast<float*>(p), o.I = static_cast<std::int64_t>(bytes / sizeof(float));
    program.ops.push_back(o);
}

void DecodeProgramRecorder::residual_sum(float* dst, const float* a, const float* b, std::int64_t n) {
    DecodeOp o;
    o.kind = DecodeOpKind::residual_sum;
    o.out = dst, o.x = a, o.res = b, o.I = n;
    program.ops.push_back(o);
}

namespace {
void run_op(NnBackend& be, const DecodeOp& o) {
    switch (o.kind) {
        case DecodeOpKind::embedding_position:
            be.embedding_position_forward(o.out, o.ids, o.table, o.index, o.pos_table, o.N, o.I, o.O);
            break;
        case DecodeOpKind::linear: be.linear_forward(o.out, o.x, o.W, o.b, o.N, o.I, o.O); break;
        case DecodeOpKind::rmsnorm_linear:
            be.rmsnorm_linear_forward(o.out, o.xn, o.norm, o.x, o.gamma, o.W, o.b, o.N, o.I, o.O, o.gelu);
            break;
        case DecodeOpKind::linear_residual:
            be.linear_residual_forward(o.out, o.xn, o.res, o.x, o.W, o.b, o.N, o.I, o.O);
            break;
        case DecodeOpKind::linear_rotary:
            be.linear_rotary_forward(o.out, o.xn, o.norm, o.x, o.gamma, o.W, o.b, o.N, o.I, o.O, o.rot);
            break;
        case DecodeOpKind::rmsnorm: be.rmsnorm_forward(o.out, o.norm, o.x, o.gamma, o.N, o.I); break;
        case DecodeOpKind::attention_decode:
            be.attention_decode(o.out, o.x, o.cache, o.index, o.seq, o.N, o.heads, o.D);
            break;
        case DecodeOpKind::scatter_rows: be.scatter_rows(o.out, o.x, o.index, o.N, o.I); break;
        case DecodeOpKind::zero: be.zero(o.out, static_cast<std::size_t>(o.I) * sizeof(float)); break;
        case DecodeOpKind::residual_sum: be.residual_sum(o.out, o.x, o.res, o.I); break;
    }
}
}  // namespace

void run_decode_program(NnBackend& be, const DecodeProgram& p, bool reverse_phases) {
    if (!reverse_phases) {
        for (const DecodeOp& o : p.ops) run_op(be, o);
        return;
    }
    const std::vector<bool> barrier = decode_barriers(p);
    for (std::size_t begin = 0; begin < p.ops.size();) {
        std::size_t end = begin + 1;
        while (end < p.ops.size() && !barrier[end]) end++;
        for (std::size_t i = end; i-- > begin;) run_op(be, p.ops[i]);
        begin = end;
    }
}

namespace {

struct Span {   // bytes [lo, hi) of backend memory
    std::uintptr_t lo, hi;
};
bool overlap(const std::vector<Span>& a, const std::vector<Span>& b) {
    for (const Span& x : a)
        for (const Span& y : b)
            if (x.lo < y.hi && y.lo < x.hi) return true;
    return false;
}
Span floats(const void* p, std::int64_t n) {
    const auto lo = reinterpret_cast<std::uintptr_t>(p);
    return {lo, lo + static_cast<std::uintptr_t>(n > 0 ? n : 0) * sizeof(float)};
}

// The activation memory an op reads and writes, from its arguments (the weights and the step's uploaded inputs —
// ids, positions, rotary rows — are never written in a step and are left out); false for the ops whose extent is not
// known on the host (attention_decode's caches, scatter_rows' rows at device-side indices).
bool op_memory(const DecodeOp& o, std::vector<Span>& reads, std::vector<Span>& writes) {
    reads.clear();
    writes.clear();
    if (decode_op_is_gemv(o.kind)) {
        writes.push_back(floats(o.out, o.N * o.O));
        reads.push_back(floats(o.x, o.N * o.I));
        if (o.kind == DecodeOpKind::linear_residual) {
            reads.push_back(floats(o.res, o.N * o.O));
            writes.push_back(floats(o.xn, o.N * o.O));   // t: the two-op form's scratch
        }
        if (o.gamma) {   // the norms' scratch, written by the two-op form
            writes.push_back(floats(o.xn, o.N * o.I));
            writes.push_back(floats(o.norm, o.N));
        }
        return true;
    }
    switch (o.kind) {
        case DecodeOpKind::embedding_position: writes.push_back(floats(o.out, o.N * o.O)); return true;
        case DecodeOpKind::rmsnorm:
            writes.push_back(floats(o.out, o.N * o.I));
            writes.push_back(floats(o.norm, o.N));
            reads.push_back(floats(o.x, o.N * o.I));
            return true;
        case DecodeOpKind::zero: writes.push_back(floats(o.out, o.I)); return true;
        case DecodeOpKind::residual_sum:
            writes.push_back(floats(o.out, o.I));
            reads.push_back(floats(o.x, o.I));
            reads.push_back(floats(o.res, o.I));
            return true;
        default: return false;
    }
}

}  // namespace

std::vector<bool> decode_barriers(const DecodeProgram& p) {
    std::vector<bool> out(p.ops.size(), true);
    std::vector<Span> phase_reads, phase_writes, reads, writes;
    bool phase_known = false;   // every op of the current phase has known memory
    for (std::size_t i = 0; i < p.ops.size(); i++) {
        const bool known = op_memory(p.ops[i], reads, writes);
        const bool joins = i > 0 && known && phase_known && !overlap(reads, phase_writes) &&
                           !overlap(writes, phase_writes) && !overlap(writes, phase_reads);
        if (!joins) {
            phase_reads.clear();
            phase_writes.clear();
            phase_known = known;
        }
        out[i] = !joins;
        phase_reads.insert(phase_reads.end(), reads.begin(), reads.end());
        phase_writes.insert(phase_writes.end(), writes.begin(), writes.end());
    }
    return out;
}

DecodeProgramMode decode_program_mode_requested(const char* env) {
    if (!env || !*env || std::strcmp(env, "off") == 0 || std::strcmp(env, "0") == 0) return DecodeProgramMode::off;
    if (std::strcmp(env, "interpret") == 0) return DecodeProgramMode::interpret;
    if (std::strcmp(env, "fused") == 0 || std::strcmp(env, "1") == 0) return DecodeProgramMode::fused;
    user_error_in("RETRO_DECODE_PROGRAM", cat("'", env, "' is not one of off, interpret, fused"));
}

}  // namespace retro::nn
