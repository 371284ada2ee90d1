// CudaNnBackend::fuse_decode_program (nn/nn_backend.h, nn/decode_program.h): a decode step's recorded ops as one
// cooperative kernel. Why: a demo-config token was ~40 launches (session 49, H200: 0.294 ms a token with graphs and
// programmatic dependent launches, 9.8x the 0.030 ms the weights' bytes take at the copy bandwidth); each small
// kernel costs ~2.4 µs before any byte moves (ncu, session 23) and a few-row GEMV 4-5 µs for 1-4 MB of weights.
//
// The kernel: a persistent grid (cudaLaunchCooperativeKernel, at most as many blocks as fit on the device at once)
// walks the ops in order; each op runs the device code of the kernel its NnBackend call launches — the few-row GEMV
// (kernels/nn_gemv.cuh, with its norm prologue and gelu / residual / rotary epilogues), attention_decode
// (kernels/nn_attention_decode.cuh: its splits and the last split's combine), the rows' RMSNorm
// (kernels/nn_rows.cuh), the embedding and scatter copies (kernels/nn_row_copies.cuh) — over the same work items by
// grid-stride, so each output's arithmetic, and its bits, are the launched kernel's whatever the grid's size. Between
// two ops a grid-wide barrier (cooperative_groups' grid.sync(): the writes of one op visible to the next), unless
// the op touches nothing its phase writes nor writes what it reads (nn::decode_barriers: the block then syncs only its
// own threads, for its shared memory). As each
// op starts, the grid asks L2 for the coming ops' weights (they depend on nothing the step computes) up to a window
// ahead (RETRO_DECODE_PREFETCH_MB, 16), so DRAM streams them while the grid computes and waits at barriers.
// The same choices as the ops (CudaNnBackend's few-row paths): fuse_decode_program refuses (and the decoder
// captures a graph instead) any op whose own call would not take its few-row form — more than gemv::kMaxRows rows,
// a norm's rows past the shared memory the GEMV takes, the bf16 GEMM mode, RETRO_UNFUSE of a fused decode op, a
// head dimension past attention_decode's — so a fused step is always the launched ops' arithmetic. Opt-in
// (RETRO_DECODE_PROGRAM=fused) until timed on a GPU; RETRO_DECODE_BLOCKS_PER_SM sets the grid (default 2 an SM,
// capped by what fits); RETRO_DECODE_PREFETCH_MB the look-ahead (0: each op asks only for the next op's weights).
#include <cooperative_groups.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "cuda_check.cuh"
#include "nn/decode_program.h"
#include "nn/nn_backend_cuda.h"
#include "nn/rmsnorm.h"
#include "nn_attention_decode.cuh"
#include "nn_backend_common.cuh"
#include "nn_gemv.cuh"
#include "nn_row_copies.cuh"
#include "nn_rows.cuh"

namespace retro::nn::detail {
namespace {

using ll = long long;
constexpr float kEps = static_cast<float>(RMSNORM_EPS);   // the few-row GEMV's and the rows kernel's eps
constexpr ll kPrefetchMaxBytes = 16ll << 20;              // of an op's weights in the prefetch stream (L2: 50 MB)

// I^-1/2 as the host computes it for the launched kernels (double, then rounded once: both correctly rounded)
__device__ __forceinline__ float inverse_sqrt_of(ll I) { return static_cast<float>(1.0 / sqrt(static_cast<double>(I > 1 ? I : 1))); }

__device__ __forceinline__ bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

// the few-row GEMV as launch_gemv_n picks it: float4s where I % 4 == 0 and W (and x, without a norm) are aligned
template <int NR>
__device__ __forceinline__ void gemv_op(float* y, const float* x, const float* W, const float* b, const float* res,
                                        const float* gamma, ll I, ll O, gemv::GemvOut out, const gemv::GemvRotary& rot) {
    const bool norm = gamma != nullptr, vec4 = I % 4 == 0 && aligned16(W) && (norm || aligned16(x));
    const float scale = inverse_sqrt_of(I);
    const int o = static_cast<int>(out);
    if (norm) {
        if (vec4) gemv::linear_rows_gemv_body<NR, true, true>(y, nullptr, x, W, b, res, gamma, I, O, o, scale, kEps, rot);
        else gemv::linear_rows_gemv_body<NR, false, true>(y, nullptr, x, W, b, res, gamma, I, O, o, scale, kEps, rot);
    } else {
        if (vec4) gemv::linear_rows_gemv_body<NR, true, false>(y, nullptr, x, W, b, res, gamma, I, O, o, scale, kEps, rot);
        else gemv::linear_rows_gemv_body<NR, false, false>(y, nullptr, x, W, b, res, gamma, I, O, o, scale, kEps, rot);
    }
}

template <int NR>
__device__ __forceinline__ void run_op(const DecodeOp& op) {
    switch (op.kind) {
        case DecodeOpKind::embedding_position:
            copies::embedding_rows(op.out, op.ids, op.table, op.N, op.O, op.index, op.pos_table);
            break;
        case DecodeOpKind::linear:
            gemv_op<NR>(op.out, op.x, op.W, op.b, nullptr, nullptr, op.I, op.O, gemv::GemvOut::plain, {});
            break;
        case DecodeOpKind::rmsnorm_linear:
            gemv_op<NR>(op.out, op.x, op.W, op.b, nullptr, op.gamma, op.I, op.O,
                        op.gelu ? gemv::GemvOut::gelu : gemv::GemvOut::plain, {});
            break;
        case DecodeOpKind::linear_residual:
            gemv_op<NR>(op.out, op.x, op.W, op.b, op.res, nullptr, op.I, op.O, gemv::GemvOut::residual, {});
            break;
        case DecodeOpKind::linear_rotary: {
            const gemv::GemvRotary rot{op.rot.table.cos, op.rot.table.sin, static_cast<int>(op.rot.heads),
                                       static_cast<int>(op.rot.D), static_cast<int>(op.rot.table.rot_dim),
                                       static_cast<int>(op.rot.scaled_heads), op.rot.scale};
            gemv_op<NR>(op.out, op.x, op.W, op.b, nullptr, op.gamma, op.I, op.O, gemv::GemvOut::rotary, rot);
            break;
        }
        case DecodeOpKind::rmsnorm:
            rows::rmsnorm_forward_rows<false>(op.out, op.norm, const_cast<float*>(op.x), nullptr, nullptr, op.gamma,
                                              op.N, op.I, inverse_sqrt_of(op.I), kEps, nullptr);
            break;
        case DecodeOpKind::attention_decode:
            decode::attention_decode_rows(op.out, op.cache.workspace, op.x, op.cache, op.index, op.seq, op.N, op.heads,
                                          op.D, decode::attention_decode_splits(op.cache.L),
                                          decode::attention_decode_vec4(op.D, op.cache.kcache));
            break;
        case DecodeOpKind::scatter_rows: copies::scatter_rows_elements(op.out, op.x, op.index, op.N, op.I); break;
        case DecodeOpKind::zero: copies::zero_elements(op.out, op.I); break;
        case DecodeOpKind::residual_sum: copies::sum_elements(op.out, op.x, op.res, op.I); break;
    }
}

// The weights of the step's GEMV ops form one stream, op after op (each op's first kPrefetchMaxBytes: a matrix larger
// than that, e.g. a 172M config's 98 MB logits, would only evict what comes before it); op i asks L2, as it starts, for
// the stream's bytes [from, to): everything up to the end of op i + 1's weights plus a window of RETRO_DECODE_PREFETCH_MB
// (16) beyond, less what earlier ops asked for. So DRAM keeps streaming the coming ops' weights while the grid works
// on L2-resident ones and waits at barriers (the weights depend on nothing a step computes).
struct StreamPiece {   // one op's part of the stream
    const char* w;
    ll begin, bytes;   // stream offset, bytes
};
struct OpSchedule {   // op i: the stream's bytes it asks for, and whether it waits at a grid barrier first
    ll from, to;
    int barrier_before;   // nn::decode_barriers: 0 where the op joins the phase of the ops before it
};

// this block's share of the stream's bytes [span.from, span.to) into L2, 128-byte lines over every thread of the grid
__device__ __forceinline__ void prefetch_span(const StreamPiece* __restrict__ pieces, int pieces_n, const OpSchedule& span) {
    if (span.to <= span.from) return;
    const ll t = blockIdx.x * static_cast<ll>(blockDim.x) + threadIdx.x, threads = static_cast<ll>(gridDim.x) * blockDim.x;
    for (int k = 0; k < pieces_n; k++) {
        const StreamPiece pc = pieces[k];
        const ll a = span.from > pc.begin ? span.from : pc.begin, end = pc.begin + pc.bytes,
                 b = span.to < end ? span.to : end;
        if (a >= b) continue;
        for (ll line = (a - pc.begin) / 128 + t; line * 128 < b - pc.begin; line += threads)
            simt::prefetch_l2(pc.w + line * 128);
    }
}

// grid: cooperative, at most what fits at once; kThreads threads; dynamic shared memory: the largest norm prologue's.
// BLOCKS_PER_SM: the registers ptxas is held to (2: 128, a few hundred bytes of spills at 8 rows, two blocks an SM;
// 1: ~180-196, no spills, one block an SM) — which wins is for the GPU to say (RETRO_DECODE_BLOCKS_PER_SM).
template <int NR, int BLOCKS_PER_SM>
__global__ __launch_bounds__(kThreads, BLOCKS_PER_SM) void decode_program_k(const DecodeOp* __restrict__ ops, int n,
                                                                const StreamPiece* __restrict__ pieces, int pieces_n,
                                                                const OpSchedule* __restrict__ schedule) {
    cooperative_groups::grid_group grid = cooperative_groups::this_grid();
    for (int i = 0; i < n; i++) {
        // a grid barrier where the op reads or writes what an op of the phase before wrote (or writes what it read);
        // else only the block's own (its shared memory: the norm prologue's rows, attention's arrays)
        if (i > 0) {
            if (schedule[i].barrier_before) grid.sync();
            else __syncthreads();
        }
        if (i + 1 == n) simt::launch_dependents();   // the sampler after the step may start launching (it waits)
        prefetch_span(pieces, pieces_n, schedule[i]);
        run_op<NR>(ops[i]);
    }
}

using ProgramKernel = void (*)(const DecodeOp*, int, const StreamPiece*, int, const OpSchedule*);
// two blocks an SM for every row count; one block an SM (no spills) for one row only, the latency case (each
// instantiation is ~5 s of nvcc)
constexpr ProgramKernel kProgramKernels[gemv::kMaxRows] = {
    decode_program_k<1, 2>, decode_program_k<2, 2>, decode_program_k<3, 2>, decode_program_k<4, 2>,
    decode_program_k<5, 2>, decode_program_k<6, 2>, decode_program_k<7, 2>, decode_program_k<8, 2>};
constexpr ProgramKernel kOneRowOneBlockKernel = decode_program_k<1, 1>;

struct FusedDecodeStep final : BackendGraph {
    void* block = nullptr;   // device copy of the program: the ops, the stream's pieces, each op's schedule
    const DecodeOp* ops = nullptr;
    const StreamPiece* pieces = nullptr;
    const OpSchedule* schedule = nullptr;
    int n = 0, pieces_n = 0;
    unsigned blocks = 0;
    std::size_t smem = 0;
    ProgramKernel kernel = nullptr;
    CudaStream stream = nullptr;   // the backend's: a launch of this step may still be running on it
    ~FusedDecodeStep() override {
        if (!block) return;
        // (as CudaNnBackend::release: cudaFree's own synchronization is documented as "may", not "will")
        RETRO_CUDA_CHECK_NOTHROW(cudaStreamSynchronize(stream));
        RETRO_CUDA_CHECK_NOTHROW(cudaFree(block));
    }
};

}  // namespace

// Why `op` would not run as the fused kernel runs it (its own call would take another path), or "" when it would.
std::string CudaNnBackend::decode_op_refusal(const DecodeOp& op, std::int64_t rows) const {
    const std::string name = decode_op_name(op.kind);
    if (decode_op_is_element_wise(op.kind)) return "";   // (no rows: any count of elements)
    if (op.N != rows) return name + ": " + std::to_string(op.N) + " rows in a step of " + std::to_string(rows);
    if (decode_op_is_gemv(op.kind)) {
        if (gemm_inputs_ != GemmInputs::fp32) return name + ": the bf16 GEMM mode";
        if (op.I <= 0 || op.O <= 0) return name + ": an empty layer";
        const bool norm = op.gamma != nullptr &&
                          (op.kind == DecodeOpKind::rmsnorm_linear || op.kind == DecodeOpKind::linear_rotary);
        if (norm && gemv::smem_bytes(static_cast<int>(rows), op.I, true) > gemv::kNormSmemLimit)
            return name + ": the norm's rows exceed the GEMV's shared memory";
    }
    switch (op.kind) {
        case DecodeOpKind::rmsnorm_linear:
            if (unfused(FusedOp::rmsnorm_linear_forward)) return name + ": RETRO_UNFUSE";
            if (!op.gamma) return name + ": no gamma";
            break;
        case DecodeOpKind::linear_residual:
            if (unfused(FusedOp::linear_residual_forward)) return name + ": RETRO_UNFUSE";
            break;
        case DecodeOpKind::linear_rotary: {
            if (unfused(FusedOp::linear_rotary_forward)) return name + ": RETRO_UNFUSE";
            const auto& r = op.rot;
            if (!(r.table.rows == op.N && r.table.rot_dim % 2 == 0 && r.table.rot_dim <= r.D && r.heads >= 0 &&
                  r.heads * r.D <= op.O && r.scaled_heads >= 0 && r.scaled_heads <= r.heads &&
                  (op.N == 1 || op.O == r.heads * r.D) && r.D <= INT_MAX && r.heads <= INT_MAX))
                return name + ": a rotation the few-row GEMV does not take";
            break;
        }
        case DecodeOpKind::embedding_position:
            if (unfused(FusedOp::embedding_position_forward)) return name + ": RETRO_UNFUSE";
            break;
        case DecodeOpKind::rmsnorm:
            if (op.I <= 0) return name + ": empty rows";
            break;
        case DecodeOpKind::attention_decode:
            if (op.heads <= 0 || op.D <= 0) return name + ": no heads";   // (its own call returns at once)
            if (op.D > kAttentionDecodeMaxD) return name + ": head dimension past attention_decode's";
            if (!op.cache.workspace || !op.cache.counters) return name + ": no workspace or counters";
            break;
        default: break;
    }
    return "";
}

std::unique_ptr<BackendGraph> CudaNnBackend::fuse_decode_program(const DecodeProgram& p, std::string* why) {
    auto refuse = [&](const std::string& reason) -> std::unique_ptr<BackendGraph> {
        if (why) *why = reason;
        return nullptr;
    };
    refuse_while_capturing("fuse_decode_program");
    if (p.ops.empty()) return refuse("an empty step");
    std::int64_t rows = 0;   // the first op with rows: every such op must have as many
    for (const DecodeOp& op : p.ops)
        if (!decode_op_is_element_wise(op.kind)) {
            rows = op.N;
            break;
        }
    if (rows < 1 || rows > gemv::kMaxRows) return refuse(std::to_string(rows) + " rows a step (at most 8 fused)");
    if (p.ops.size() > static_cast<std::size_t>(INT_MAX)) return refuse("too many ops");
    for (const DecodeOp& op : p.ops) {
        const std::string r = decode_op_refusal(op, rows);
        if (!r.empty()) return refuse(r);
    }
    int cooperative = 0, sms = 0;
    RETRO_CUDA_CHECK(cudaDeviceGetAttribute(&cooperative, cudaDevAttrCooperativeLaunch, 0));
    RETRO_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    if (!cooperative) return refuse("the device has no cooperative launch");
    std::size_t smem = 0;
    for (const DecodeOp& op : p.ops)
        if (op.gamma && decode_op_is_gemv(op.kind))
            smem = std::max(smem, static_cast<std::size_t>(gemv::smem_bytes(static_cast<int>(rows), op.I, true)));
    int per_sm = 2;
    if (const char* env = std::getenv("RETRO_DECODE_BLOCKS_PER_SM")) per_sm = std::clamp(std::atoi(env), 1, 32);
    auto step = std::make_unique<FusedDecodeStep>();
    step->stream = stream_;
    step->kernel = per_sm == 1 && rows == 1 ? kOneRowOneBlockKernel : kProgramKernels[rows - 1];
    step->smem = smem;
    step->n = static_cast<int>(p.ops.size());
    // the largest any program takes (a norm's rows within gemv::kNormSmemLimit), so that fusing a program with less
    // never lowers the limit under a step made before with more (the attribute is the kernel's, not the launch's)
    RETRO_CUDA_CHECK(cudaFuncSetAttribute(step->kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(gemv::kNormSmemLimit)));
    int fit = 0;
    RETRO_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fit, step->kernel, kThreads, smem));
    if (fit < 1) return refuse("the fused kernel does not fit an SM");
    step->blocks = static_cast<unsigned>(std::min(per_sm, fit) * sms);
    // the prefetch stream (StreamPiece, OpSchedule above): op i asks for everything up to the end of op i + 1's
    // weights and `window` bytes beyond
    ll window = 16ll << 20;
    if (const char* env = std::getenv("RETRO_DECODE_PREFETCH_MB")) window = std::clamp(std::atoll(env), 0LL, 1LL << 20) << 20;
    std::vector<StreamPiece> pieces;
    std::vector<ll> op_end(p.ops.size());   // stream offset at the end of each op's weights
    ll total = 0;
    for (std::size_t i = 0; i < p.ops.size(); i++) {
        const DecodeOp& op = p.ops[i];
        if (decode_op_is_gemv(op.kind)) {
            const ll bytes = std::min<ll>(op.I * op.O * static_cast<ll>(sizeof(float)), kPrefetchMaxBytes);
            pieces.push_back({reinterpret_cast<const char*>(op.W), total, bytes});
            total += bytes;
        }
        op_end[i] = total;
    }
    std::vector<OpSchedule> spans(p.ops.size());
    const std::vector<bool> barriers = decode_barriers(p);
    ll asked = 0;
    for (std::size_t i = 0; i < p.ops.size(); i++) {
        const ll next_end = op_end[std::min(i + 1, p.ops.size() - 1)];
        const ll to = std::min(total, next_end + window);
        spans[i] = {asked, std::max(asked, to), barriers[i] ? 1 : 0};
        asked = std::max(asked, to);
    }
    step->pieces_n = static_cast<int>(pieces.size());
    // one device block: the ops, then the pieces, then the spans (each at a 256-byte offset)
    auto up = [](std::size_t b) { return (b + 255) / 256 * 256; };
    const std::size_t at_pieces = up(p.ops.size() * sizeof(DecodeOp)), at_spans = at_pieces + up(pieces.size() * sizeof(StreamPiece)),
                      bytes = at_spans + spans.size() * sizeof(OpSchedule);
    std::vector<char> host(bytes);
    std::memcpy(host.data(), p.ops.data(), p.ops.size() * sizeof(DecodeOp));
    if (!pieces.empty()) std::memcpy(host.data() + at_pieces, pieces.data(), pieces.size() * sizeof(StreamPiece));
    std::memcpy(host.data() + at_spans, spans.data(), spans.size() * sizeof(OpSchedule));
    RETRO_CUDA_CHECK(cudaMalloc(&step->block, bytes));
    RETRO_CUDA_CHECK(cudaMemcpyAsync(step->block, host.data(), bytes, cudaMemcpyHostToDevice, stream_));
    RETRO_CUDA_CHECK(cudaStreamSynchronize(stream_));   // the host copy is ours to free
    char* base = static_cast<char*>(step->block);
    step->ops = reinterpret_cast<const DecodeOp*>(base);
    step->pieces = reinterpret_cast<const StreamPiece*>(base + at_pieces);
    step->schedule = reinterpret_cast<const OpSchedule*>(base + at_spans);
    if (why) why->clear();
    return step;
}

bool CudaNnBackend::launch_fused_decode(const BackendGraph& graph) {
    const auto* step = dynamic_cast<const FusedDecodeStep*>(&graph);
    if (!step) return false;
    const DecodeOp* ops = step->ops;
    const StreamPiece* pieces = step->pieces;
    const OpSchedule* schedule = step->schedule;
    int n = step->n, pieces_n = step->pieces_n;
    void* args[] = {&ops, &n, &pieces, &pieces_n, &schedule};
    RETRO_CUDA_CHECK(cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(step->kernel), dim3(step->blocks),
                                                 dim3(kThreads), args, step->smem, stream_));
    RETRO_CUDA_LAUNCH_CHECK("decode_program (fused decode step)", stream_);
    return true;
}

}  // namespace retro::nn::detail
