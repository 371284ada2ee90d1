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
// The device code and the plan are kernels/nn_decode_program.cuh's, written against kernels/simt.cuh: the host
// emulator runs them as a cooperative launch (tests/test_nn_decode_program_host.cpp); this file launches them.
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
#include "nn_decode_program.cuh"
#include "nn_gemv.cuh"

namespace retro::nn::detail {
namespace {

using ll = long long;
using program::DecodeProgramPlan;
using program::OpSchedule;
using program::StreamPiece;

// the fused ops' bodies each assume the launch's block size (a helper's review, session 55: three constants)
static_assert(gemv::kThreads == kThreads && rows::kThreads == kThreads, "the fused step's ops run kThreads threads a block");

// grid: cooperative, at most what fits at once; kThreads threads; dynamic shared memory: the largest norm prologue's.
// BLOCKS_PER_SM: the registers ptxas is held to (2: 128, a few hundred bytes of spills at 8 rows, two blocks an SM;
// 1: ~180-196, no spills, one block an SM) — which wins is for the GPU to say (RETRO_DECODE_BLOCKS_PER_SM).
template <int NR, int BLOCKS_PER_SM>
__global__ __launch_bounds__(kThreads, BLOCKS_PER_SM) void decode_program_k(const DecodeOp* __restrict__ ops, int n,
                                                                const StreamPiece* __restrict__ pieces, int pieces_n,
                                                                const OpSchedule* __restrict__ schedule) {
    program::decode_program_body<NR>(ops, n, pieces, pieces_n, schedule);
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
    int per_sm = 0, fit = 0, sms = 0;   // blocks = min(per_sm, fit) x sms: named when a launch is refused
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
    if (!fused_launch_refused_.empty()) return refuse(fused_launch_refused_);
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
    step->per_sm = per_sm;
    step->fit = fit;
    step->sms = sms;
    // the prefetch stream and each op's schedule (kernels/nn_decode_program.cuh): op i asks for everything up to the
    // end of op i + 1's weights and `window` bytes beyond
    ll window = 16ll << 20;
    if (const char* env = std::getenv("RETRO_DECODE_PREFETCH_MB")) window = std::clamp(std::atoll(env), 0LL, 1LL << 20) << 20;
    const DecodeProgramPlan plan = program::plan_decode_program(p, window);
    const std::vector<StreamPiece>& pieces = plan.pieces;
    const std::vector<OpSchedule>& spans = plan.schedule;
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
    // a refused launch (cudaErrorCooperativeLaunchTooLarge: a tool or MPS holding part of the device) names the grid
    // and where its size came from, so that one look says what to lower (RETRO_DECODE_BLOCKS_PER_SM=1, or
    // RETRO_DECODE_PROGRAM=off: the captured graphs); that refusal comes before anything runs and is thrown as
    // FusedLaunchRefused, which BackendDecoder answers by capturing the step as a graph; this backend fuses no step
    // after it (fuse_decode_program refuses, naming it), so a run warns once however many decoders it makes
    const int status = static_cast<int>(cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(step->kernel),
                                                                    dim3(step->blocks), dim3(kThreads), args, step->smem,
                                                                    stream_));
    if (status != 0) {
        (void)cudaGetLastError();   // (a launch error is not sticky: cleared, so no later check reports it again)
        const std::string what = "cudaLaunchCooperativeKernel(fused decode step: " + std::to_string(step->blocks) +
                                 " blocks = min(" + std::to_string(step->per_sm) + " asked an SM, " +
                                 std::to_string(step->fit) + " that fit) x " + std::to_string(step->sms) + " SMs, " +
                                 std::to_string(kThreads) + " threads, " + std::to_string(step->smem) +
                                 " B dynamic shared memory; RETRO_DECODE_BLOCKS_PER_SM=1 or RETRO_DECODE_PROGRAM=off)";
        if (status == static_cast<int>(cudaErrorCooperativeLaunchTooLarge)) {
            fused_launch_refused_ = "the device refused a fused step's launch: " +
                                    cuda_error_message(status, what.c_str(), __FILE__, __LINE__);
            throw FusedLaunchRefused(fused_launch_refused_);
        }
        cuda_check(status, what.c_str(), __FILE__, __LINE__);
    }
    RETRO_CUDA_LAUNCH_CHECK("decode_program (fused decode step)", stream_);
    return true;
}

}  // namespace retro::nn::detail
