// How the CUDA retention kernels launch, as plain host arithmetic (issue 19's "robust launch"): the chunk walks'
// shared memory (the mma.sync walk of kernels/retention_chunk_mma.cuh, one or two load stages; the older wmma walk's
// carve-up TcLayout, used by kernels/retention_chunk_tc.cuh itself), the pair kernels' shared memory, and the checks
// every entry makes before a launch — B·H within the grid's y limit, and the shared memory a kernel needs within
// what the device lets one block opt into (an sm_86/89 card has 99 KB: the mma walk at Da = 128 runs there with one
// stage). Kept free of CUDA so that tests/test_retention.cpp checks the decisions without a GPU.
// provides: TcLayout, kTcChunk, kTcTile, kTcMaxDa, tc_supported, chunk_mma_shared_bytes, chunk_mma16_shared_bytes,
//           ChunkWalkConfig,
//           chunk_walk_config, dual_walk_config, pair_shared_bytes, pair_mma_shared_bytes, kMaxGridY, ChunkwisePlan, plan_chunkwise,
//           retention_launch_refusal
#pragma once
#include <string>

#ifdef __CUDACC__
#define RETRO_HOST_DEVICE __host__ __device__
#else
#define RETRO_HOST_DEVICE
#endif

namespace retro::retention {

constexpr int kTcChunk = 64, kTcTile = 64, kTcMaxDa = 128;
constexpr long kMaxGridY = 65535;   // every retention kernel runs one grid row per (b, h)

// The tensor-core walk's shape limits: chunk 64, Da a multiple of 32 up to 128, Dc whole 64-column tiles.
inline bool tc_supported(long Da, long Dc, long C) {
    return C == kTcChunk && Da % 32 == 0 && Da <= kTcMaxDa && Dc % kTcTile == 0;
}

struct TcLayout {   // shared-memory carve-up (bytes), rows padded against bank conflicts (wmma wants 32-byte bases)
    int lda, ldc, ldf;   // bf16 row stride of A/B (Da+8) and of C/Pb/Mb (72); fp32 row stride of 64-wide tiles (68)
    int a, b, bs, c, p, x, pb, mf, mb, pw, total;
    RETRO_HOST_DEVICE explicit TcLayout(int Da) {
        lda = Da + 8, ldc = kTcTile + 8, ldf = kTcTile + 4;
        a = 0;                              // A_c (bf16)
        b = a + kTcChunk * lda * 2;         // B_c (bf16)
        bs = b + kTcChunk * lda * 2;        // B_c rows times their update coefficient (bf16)
        c = bs + kTcChunk * lda * 2;        // C_c tile (bf16)
        p = c + kTcChunk * ldc * 2;         // P = A B^T (fp32), later O = the output tile before rounding
        x = p + kTcChunk * ldf * 4;         // X = A M (fp32)
        pb = x + kTcChunk * ldf * 4;        // P masked and decayed (bf16)
        mf = pb + kTcChunk * ldc * 2;       // M (fp32, Da x 64)
        mb = mf + Da * ldf * 4;             // M (bf16)
        pw = mb + Da * ldc * 2;             // gamma^d, d = 0..64 (fp32)
        total = pw + 80 * 4;
    }
};

// The CUDA-core pair kernel's dynamic shared memory (retention_common.cuh's launch_pair): 16 query rows and 32 key
// rows of Da, 32 value rows of Dc, a 16 x 32 score tile, all fp32.
inline long pair_shared_bytes(long Da, long Dc) { return 4 * (16 * Da + 32 * Da + 32 * Dc + 16 * 32); }
// The tensor-core pair kernel's (kernels/retention_pair_mma.cuh, bf16, Da and Dc of 64 or 128): the block's A rows
// and two load stages of B's and C's (64 rows of Da + 8 or Dc + 8 bf16 each); dual (dk beside dv): the block's A2
// rows (Dc + 8) as well; where a device allows less, the kernel above.
inline long pair_mma_shared_bytes(long Da, long Dc, bool dual = false) {
    return 3 * 64 * (Da + 8) * 2 + (dual ? 3 : 2) * 64 * (Dc + 8) * 2;
}

// The mma walk's dynamic shared memory (kernels/retention_chunk_mma.cuh's chunk_smem) for a block of `columns` (64 or
// 128) output columns: per load stage the chunk's rows of A and B (64 rows of Da + 8 bf16 each) and its 64 x columns
// tile of C (64 rows of columns + 8), then the state's bf16 copy (columns rows of Da + 8), or two that alternate
// (copies = 2, with two stages: one block barrier a chunk instead of two).
// The dual walk (dk beside dv over one state) holds a second 64 x columns tile a stage.
inline long chunk_mma_shared_bytes(long Da, int stages, int columns, bool dual = false, int copies = 1) {
    return stages * (2 * 64 * (Da + 8) * 2 + (dual ? 2 : 1) * 64 * (columns + 8) * 2) + copies * columns * (Da + 8) * 2;
}

// The 16-warp walk's (kernels/retention_chunk_mma16.cuh's chunk16_smem: 128 columns, two stages, two copies) with
// its 8 KB of P fragments: 182,272 bytes at Da = 128.
inline long chunk_mma16_shared_bytes(long Da) { return chunk_mma_shared_bytes(Da, 2, 128, false, 2) + 4 * 4 * 4 * 32 * 4; }

// How one mma walk over a Da x Dc state launches: 128 columns a block (8 warps; A and B read once a head at Dc = 128)
// where Dc allows, else 64 (4 warps), each with two load stages where they fit the device, else one, and with two
// stages two copies of the state where they fit too; `ok` false where not even 64 columns with one stage fit (or
// chunk, Da, Dc are not the walk's). narrow: 64 columns only (the A/B of RETRO_RETENTION_KERNELS=mma64).
struct ChunkWalkConfig {
    bool ok = false;
    int stages = 0;    // 2: the next chunk's loads overlap this one's products
    int columns = 0;   // output columns a block
    int copies = 1;    // the state's bf16 copies: 2 (two stages only) saves a block barrier a chunk
    bool wide = false;  // 16 warps a block (128 columns, two stages, two copies; kernels/retention_chunk_mma16.cuh)
};
// one_stage: never two stages (the A/B and the GPU tests of RETRO_RETENTION_KERNELS=mma1: the sm_86/89 form on an H100);
// one_copy: never two state copies (RETRO_RETENTION_KERNELS=mma-1copy: session 23's walk, for the A/B);
// wide: the 16-warp walk where the configuration is its (128 columns, two stages, two copies) and its shared memory
// fits (RETRO_RETENTION_KERNELS=mma16, not yet timed on a GPU): at Da = 128 an H100 or H200, at smaller Da also an A100
// (83,968 / 116,736 / 149,504 bytes at Da = 32 / 64 / 96).
// sm_shared_bytes (0: unknown): an SM's shared memory; two copies are not taken where they would leave one block an
// SM where one copy lets two share it (blocks hide each other's barriers: e.g. Da = 128 at 64 columns, Da = 96 at 128).
inline bool copies_keep_residency(long one_copy_bytes, long two_copy_bytes, long sm_shared_bytes) {
    const auto resident = [&](long bytes) { return sm_shared_bytes / (bytes + 1024); };   // 1 KB reserved a block
    return sm_shared_bytes <= 0 || resident(two_copy_bytes) >= resident(one_copy_bytes);
}
inline ChunkWalkConfig chunk_walk_config(long Da, long Dc, long C, long optin_shared_bytes, bool narrow = false,
                                         bool one_stage = false, bool one_copy = false, long sm_shared_bytes = 0,
                                         bool wide = false) {
    if (!tc_supported(Da, Dc, C)) return {};
    for (const int stages : {2, 1})
        for (const int columns : {128, 64})
            for (const int copies : {2, 1}) {
                const bool allowed = !(one_stage && stages == 2) && !(columns == 128 && (narrow || Dc % 128 != 0)) &&
                                     !(copies == 2 && (stages == 1 || one_copy));
                const long bytes = chunk_mma_shared_bytes(Da, stages, columns, false, copies);
                if (copies == 2 && !copies_keep_residency(chunk_mma_shared_bytes(Da, stages, columns, false, 1), bytes,
                                                          sm_shared_bytes))
                    continue;
                if (allowed && bytes <= optin_shared_bytes)
                    return {true, stages, columns, copies,
                            wide && stages == 2 && columns == 128 && copies == 2 &&
                                chunk_mma16_shared_bytes(Da) <= optin_shared_bytes};
            }
    return {};
}

// The dual walk (dk and dv in one walk over G, kernels/retention_chunk_mma.cuh's DUAL) where K = V = 64 or 128 and a
// block of K columns fits with two stages (174,080 bytes at 128: an H100, not an A100). Not with one stage: whether
// one dual walk without load overlap beats two overlapped walks is unmeasured, so such a card keeps the two walks.
// Two state copies where they fit too (208,896 bytes at 128: an H100 or H200).
inline ChunkWalkConfig dual_walk_config(long K, long V, long C, long optin_shared_bytes, bool one_copy = false,
                                        long sm_shared_bytes = 0) {
    if (K != V || (K != 64 && K != 128) || !tc_supported(K, V, C)) return {};
    const int columns = static_cast<int>(K);
    const long one = chunk_mma_shared_bytes(K, 2, columns, true, 1), two = chunk_mma_shared_bytes(K, 2, columns, true, 2);
    if (!one_copy && two <= optin_shared_bytes && copies_keep_residency(one, two, sm_shared_bytes))
        return {true, 2, columns, 2};
    if (one <= optin_shared_bytes) return {true, 2, columns, 1};
    return {};
}

// Which walks the chunkwise mode takes: the tensor cores (kernels/retention_chunk_mma.cuh) when the dtype is bf16 and
// every walk of the call has an mma configuration on this device (the forward's Da = K over Dc = V; the backward's
// also Da = V over Dc = K for dq and dk, and dk with dv in one dual walk where that fits), else the CUDA-core walk.
// For A/Bs (RETRO_RETENTION_KERNELS): narrow = 64 columns a block and no dual walk; split = no dual walk;
// one_stage = one load stage, no dual walk; one_copy = one state copy (session 23's walks); wide = the 16-warp walk
// where a walk's configuration allows it (the dual walk keeps 8 warps).
struct ChunkwisePlan {
    bool tensor_cores = false;
    ChunkWalkConfig da_k;   // the walks with Da = K, Dc = V: the forward, dv
    ChunkWalkConfig da_v;   // Da = V, Dc = K: dq, dk (backward only)
    ChunkWalkConfig dkdv;   // the dual walk for dk and dv (backward only; ok false: two walks)
};
inline ChunkwisePlan plan_chunkwise(bool bf16, long K, long V, long C, bool backward, long optin_shared_bytes,
                                    bool narrow = false, bool split = false, bool one_stage = false,
                                    bool one_copy = false, long sm_shared_bytes = 0, bool wide = false) {
    if (!bf16) return {};
    ChunkwisePlan plan;
    plan.da_k = chunk_walk_config(K, V, C, optin_shared_bytes, narrow, one_stage, one_copy, sm_shared_bytes, wide);
    if (backward) {
        plan.da_v = chunk_walk_config(V, K, C, optin_shared_bytes, narrow, one_stage, one_copy, sm_shared_bytes, wide);
        if (!narrow && !split) plan.dkdv = dual_walk_config(K, V, C, optin_shared_bytes, one_copy, sm_shared_bytes);
    }
    plan.tensor_cores = plan.da_k.ok && (!backward || plan.da_v.ok);
    return plan;
}

// Why a CUDA retention entry cannot launch B, H, K, V on a device whose blocks may opt into optin_shared_bytes of
// shared memory (one line, naming the limit and what to change), or "" when it can. The CUDA-core pair kernel is
// the one whose shared memory grows with K and V.
inline std::string retention_launch_refusal(long B, long H, long K, long V, long optin_shared_bytes) {
    if (B * H > kMaxGridY)
        return "B*H = " + std::to_string(B * H) + " exceeds the CUDA grid's " + std::to_string(kMaxGridY) +
               " rows (one per batch item and head); split the batch";
    const long need = pair_shared_bytes(K, V) > pair_shared_bytes(V, K) ? pair_shared_bytes(K, V) : pair_shared_bytes(V, K);
    if (need > optin_shared_bytes)
        return "K=" + std::to_string(K) + ", V=" + std::to_string(V) + " need " + std::to_string(need) +
               " bytes of shared memory per block, this device allows " + std::to_string(optin_shared_bytes) +
               "; use smaller head dimensions";
    return "";
}

}  // namespace retro::retention
