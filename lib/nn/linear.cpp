#include "nn/linear.h"

#include <algorithm>
#include <atomic>
#include <type_traits>

#include "nn/blas.h"
#include "nn/decode_weights_bf16.h"
#include "nn/gemv_avx512.h"
#include "nn/parallel.h"

namespace retro::nn {

// OpenBLAS always runs single-threaded here; a GEMM is cut into tiles the shapes alone fix, which our OpenMP threads
// take whole (so the sums do not depend on the thread count: linear.h). OpenBLAS's own pthreads spin after every call and would compete
// with the OpenMP team of the element-wise loops that follow: one pool of threads for the whole step.
namespace {
inline bool split(std::int64_t work) { return thread_count() > 1 && work >= PARALLEL_MIN_WORK * 16; }
// Up to this many rows a forward linear runs as one cblas_sgemv per row: OpenBLAS's GEMM would pack all of W for
// them. With AVX-512 or AVX2+FMA, up to kGemvMaxRows rows run through nn/gemv_avx512.h, which reads W once for all of them.
constexpr std::int64_t GEMV_MAX_ROWS = 4;

// The few-row path's kernel for this W: the bf16 copy (retro-generate --dtype bf16, decode_weights_bf16.h), the
// fp32 AVX-512 or AVX2 GEMV, or none (cblas_sgemv per row, up to GEMV_MAX_ROWS rows).
struct FewRows {
    const std::uint16_t* w16 = nullptr;
    const GemvKernels* kernels = nullptr;   // (AVX-512's or AVX2's; with w16 always one)
    std::int64_t max_rows() const { return kernels ? kGemvMaxRows : GEMV_MAX_ROWS; }
};

template <typename T>
FewRows few_rows_kernel(const T* W, std::int64_t I, std::int64_t O) {
    FewRows k;
    if constexpr (std::is_same_v<T, float>) {
        if (const DecodeWeightsBf16* table = decode_weights_bf16()) k.w16 = table->find(W, O * I);
        k.kernels = k.w16 ? gemv_best_kernels() : gemv_kernels();   // none: cblas_sgemv (RETRO_GEMV=blas)
    }
    return k;
}

// Outputs [o0, o1) of the N rows (y starts as the bias when `accumulate`).
template <typename T>
void few_rows(const FewRows& k, std::int64_t N, std::int64_t I, std::int64_t O, std::int64_t o0, std::int64_t o1,
              const T* W, const T* x, T* y, bool accumulate) {
    if constexpr (std::is_same_v<T, float>) {
        if (k.w16) return k.kernels->rows_bf16(k.w16 + o0 * I, o1 - o0, I, I, x, I, N, y + o0, O, accumulate);
        if (k.kernels) return k.kernels->rows(W + o0 * I, o1 - o0, I, I, x, I, N, y + o0, O, accumulate);
    }
    for (std::int64_t n = 0; n < N; n++)
        gemv(false, o1 - o0, I, T(1), W + o0 * I, I, x + n * I, accumulate ? T(1) : T(0), y + n * O + o0);
}

// Outputs [o0, o1) of any number of rows through the few-row kernel: W's rows in blocks of about 128 KiB (an L2's
// share), each block against every group of max_rows() rows before the next block, so W comes from memory once.
// A row's sums are the few-row kernel's whatever N (nn/gemv_avx512.h: they depend on neither the group nor the
// outputs' range).
template <typename T>
void few_rows_blocked(const FewRows& k, std::int64_t N, std::int64_t I, std::int64_t O, std::int64_t o0, std::int64_t o1,
                      const T* W, const T* x, T* y, bool accumulate) {
    const std::int64_t G = k.max_rows();
    if (N <= G) return few_rows(k, N, I, O, o0, o1, W, x, y, accumulate);
    const std::int64_t elem = k.w16 ? 2 : static_cast<std::int64_t>(sizeof(T));
    const std::int64_t block = std::max<std::int64_t>(16, (std::int64_t(128) << 10) / std::max<std::int64_t>(1, I * elem));
    for (std::int64_t b0 = o0; b0 < o1; b0 += block) {
        const std::int64_t b1 = std::min(o1, b0 + block);
        for (std::int64_t n0 = 0; n0 < N; n0 += G)
            few_rows(k, std::min(G, N - n0), I, O, b0, b1, W, x + n0 * I, y + n0 * O, accumulate);
    }
}

std::atomic<LinearSums> g_sums{LinearSums::thread_invariant};

// The thread-invariant tiles: rows and outputs in blocks fixed by the shapes (within 5 % of one sgemm call on the
// dev box, and balanced enough for a few threads: a 512-wide layer gives 4 tiles a block of rows).
constexpr std::int64_t kTileRows = 256, kTileOutputs = 128;
}  // namespace

LinearSumsScope::LinearSumsScope(LinearSums mode) : previous_(g_sums.exchange(mode)) {}
LinearSumsScope::~LinearSumsScope() { g_sums.store(previous_); }

// Tiles the shapes alone fix, taken whole by the threads (thread_invariant, linear.h).
struct Tiles {
    std::int64_t rows, cols, tile_rows, tile_cols;
    std::int64_t count() const { return ((rows + tile_rows - 1) / tile_rows) * ((cols + tile_cols - 1) / tile_cols); }
    // tile t's rows [r0, r1) and columns [c0, c1)
    void at(std::int64_t t, std::int64_t& r0, std::int64_t& r1, std::int64_t& c0, std::int64_t& c1) const {
        const std::int64_t per_row = (cols + tile_cols - 1) / tile_cols;
        r0 = t / per_row * tile_rows;
        r1 = std::min(rows, r0 + tile_rows);
        c0 = t % per_row * tile_cols;
        c1 = std::min(cols, c0 + tile_cols);
    }
};

template <typename T>
void linear_forward(T* y, const T* x, const T* W, const T* b, std::int64_t N, std::int64_t I, std::int64_t O) {
    if (N == 0) return;
    BlasSingleThread single;
    const FewRows kernel = few_rows_kernel(W, I, O);
    const bool row_invariant = std::is_same_v<T, float> && g_sums.load(std::memory_order_relaxed) == LinearSums::row_invariant;
    // KV-cached decoding (and every row count when row_invariant): threads take blocks of outputs
    if (N <= kernel.max_rows() || row_invariant) {
        auto outputs = [&](std::int64_t o0, std::int64_t o1) {
            if (b)
                for (std::int64_t n = 0; n < N; n++) std::copy(b + o0, b + o1, y + n * O + o0);
            few_rows_blocked(kernel, N, I, O, o0, o1, W, x, y, b != nullptr);
        };
        if (kernel.kernels) {   // RetroKit's GEMV: a row's sums depend on neither N nor the outputs' range
            if (!split(N * I * O)) outputs(0, O);
            else ranges(O, N * I * O, [&](std::int64_t o0, std::int64_t o1, int) { outputs(o0, o1); });
            return;
        }
        // cblas_sgemv (neither AVX-512 nor AVX2+FMA, or RETRO_GEMV=blas) sums an output by how the outputs are cut:
        // fixed tiles of outputs, as the GEMMs below, so that a row's bits depend on neither N nor the thread count
        const std::int64_t tiles = (O + kTileOutputs - 1) / kTileOutputs;
        for_each(tiles, N * I * O, [&](std::int64_t t) { outputs(t * kTileOutputs, std::min(O, (t + 1) * kTileOutputs)); });
        return;
    }
    // y starts as the bias, the GEMM adds with beta = 1 (beta = 0 makes OpenBLAS clear y first)
    const Tiles tiles{N, O, kTileRows, kTileOutputs};
    for_each(tiles.count(), N * I * O, [&](std::int64_t t) {
        std::int64_t r0, r1, o0, o1;
        tiles.at(t, r0, r1, o0, o1);
        if (b)
            for (std::int64_t n = r0; n < r1; n++) std::copy(b + o0, b + o1, y + n * O + o0);
        gemm(false, true, r1 - r0, o1 - o0, I, T(1), x + r0 * I, I, W + o0 * I, I, b ? T(1) : T(0), y + r0 * O + o0, O);
    });
}

template <typename T>
void linear_backward(T* dx, T* dW, T* db, const T* dy, const T* x, const T* W, std::int64_t N, std::int64_t I,
                     std::int64_t O) {
    if (N == 0) return;
    BlasSingleThread single;
    if (dx) {   // dx[r0:r1, i0:i1] = dy[r0:r1] W[:, i0:i1]
        const Tiles tiles{N, I, kTileRows, kTileOutputs};
        for_each(tiles.count(), N * I * O, [&](std::int64_t t) {
            std::int64_t r0, r1, i0, i1;
            tiles.at(t, r0, r1, i0, i1);
            gemm(false, false, r1 - r0, i1 - i0, O, T(1), dy + r0 * O, O, W + i0, I, T(0), dx + r0 * I + i0, I);
        });
    }
    if (dW) {   // dW[o0:o1, i0:i1] += dy[:, o0:o1]^T x[:, i0:i1]; db[o0:o1] with the tiles of i0 = 0, rows in order
        const Tiles tiles{O, I, kTileOutputs, kTileRows};
        for_each(tiles.count(), N * I * O, [&](std::int64_t t) {
            std::int64_t o0, o1, i0, i1;
            tiles.at(t, o0, o1, i0, i1);
            gemm(true, false, o1 - o0, i1 - i0, N, T(1), dy + o0, O, x + i0, I, T(1), dW + o0 * I + i0, I);
            if (db && i0 == 0)
                for (std::int64_t n = 0; n < N; n++)
                    for (std::int64_t o = o0; o < o1; o++) db[o] += dy[n * O + o];
        });
    }
}

template void linear_forward<float>(float*, const float*, const float*, const float*, std::int64_t, std::int64_t,
                                    std::int64_t);
template void linear_forward<double>(double*, const double*, const double*, const double*, std::int64_t,
                                     std::int64_t, std::int64_t);
template void linear_backward<float>(float*, float*, float*, const float*, const float*, const float*, std::int64_t,
                                     std::int64_t, std::int64_t);
template void linear_backward<double>(double*, double*, double*, const double*, const double*, const double*,
                                      std::int64_t, std::int64_t, std::int64_t);

}  // namespace retro::nn
