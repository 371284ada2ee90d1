#include "nn/linear.h"

#include <algorithm>
#include <atomic>
#include <type_traits>

#include "nn/blas.h"
#include "nn/decode_weights_bf16.h"
#include "nn/gemv_avx512.h"
#include "nn/parallel.h"

namespace retro::nn {

// OpenBLAS always runs single-threaded here; with more than one thread a large GEMM is split into row
// blocks over our OpenMP threads instead. OpenBLAS's own pthreads spin after every call and would compete
// with the OpenMP team of the element-wise loops that follow: one pool of threads for the whole step.
namespace {
inline bool split(std::int64_t work) { return thread_count() > 1 && work >= PARALLEL_MIN_WORK * 16; }
// Up to this many rows a forward linear runs as one cblas_sgemv per row: OpenBLAS's GEMM would pack all of W for
// them. With AVX-512, up to kGemvMaxRows rows run through nn/gemv_avx512.h, which reads W once for all of them.
constexpr std::int64_t GEMV_MAX_ROWS = 4;

// The few-row path's kernel for this W: the bf16 copy (retro-generate --dtype bf16, decode_weights_bf16.h), the
// fp32 AVX-512 GEMV, or none (cblas_sgemv per row, up to GEMV_MAX_ROWS rows).
struct FewRows {
    const std::uint16_t* w16 = nullptr;
    bool avx512 = false;
    std::int64_t max_rows() const { return w16 || avx512 ? kGemvMaxRows : GEMV_MAX_ROWS; }
};

template <typename T>
FewRows few_rows_kernel(const T* W, std::int64_t I, std::int64_t O) {
    FewRows k;
    if constexpr (std::is_same_v<T, float>) {
        if (const DecodeWeightsBf16* table = decode_weights_bf16()) k.w16 = table->find(W, O * I);
        k.avx512 = !k.w16 && gemv_avx512_enabled();   // else cblas_sgemv (RETRO_GEMV=blas)
    }
    return k;
}

// Outputs [o0, o1) of the N rows (y starts as the bias when `accumulate`).
template <typename T>
void few_rows(const FewRows& k, std::int64_t N, std::int64_t I, std::int64_t O, std::int64_t o0, std::int64_t o1,
              const T* W, const T* x, T* y, bool accumulate) {
    if constexpr (std::is_same_v<T, float>) {
        if (k.w16) return gemv_rows_bf16_avx512(k.w16 + o0 * I, o1 - o0, I, I, x, I, N, y + o0, O, accumulate);
        if (k.avx512) return gemv_rows_avx512(W + o0 * I, o1 - o0, I, I, x, I, N, y + o0, O, accumulate);
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

std::atomic<LinearSums> g_sums{LinearSums::fastest};

// The thread-invariant tiles: rows and outputs in blocks fixed by the shapes (within 5 % of one sgemm call on the
// dev box, and balanced enough for a few threads: a 512-wide layer gives 4 tiles a block of rows).
constexpr std::int64_t kTileRows = 256, kTileOutputs = 128;
}  // namespace

LinearSumsScope::LinearSumsScope(LinearSums mode) : previous_(g_sums.exchange(mode)) {}
LinearSumsScope::~LinearSumsScope() { g_sums.store(previous_); }

template <typename T>
void linear_forward(T* y, const T* x, const T* W, const T* b, std::int64_t N, std::int64_t I, std::int64_t O) {
    if (N == 0) return;
    auto rows = [&](std::int64_t r0, std::int64_t r1) {   // y starts as the bias, sgemm adds with beta = 1
        if (b)                                               // (beta = 0 makes OpenBLAS clear y first)
            for (std::int64_t n = r0; n < r1; n++) std::copy(b, b + O, y + n * O);
        gemm(false, true, r1 - r0, O, I, T(1), x + r0 * I, I, W, I, b ? T(1) : T(0), y + r0 * O, O);
    };
    BlasSingleThread single;
    const FewRows kernel = few_rows_kernel(W, I, O);
    const LinearSums mode = std::is_same_v<T, float> ? g_sums.load(std::memory_order_relaxed) : LinearSums::fastest;
    // KV-cached decoding (and every row count when row_invariant): threads take blocks of outputs
    if (N <= kernel.max_rows() || mode == LinearSums::row_invariant) {
        auto outputs = [&](std::int64_t o0, std::int64_t o1) {
            if (b)
                for (std::int64_t n = 0; n < N; n++) std::copy(b + o0, b + o1, y + n * O + o0);
            few_rows_blocked(kernel, N, I, O, o0, o1, W, x, y, b != nullptr);
        };
        if (!split(N * I * O)) outputs(0, O);
        else ranges(O, N * I * O, [&](std::int64_t o0, std::int64_t o1, int) { outputs(o0, o1); });
        return;
    }
    if (mode == LinearSums::thread_invariant) {
        const std::int64_t row_tiles = (N + kTileRows - 1) / kTileRows, out_tiles = (O + kTileOutputs - 1) / kTileOutputs;
        for_each(row_tiles * out_tiles, N * I * O, [&](std::int64_t t) {
            const std::int64_t r0 = t / out_tiles * kTileRows, r1 = std::min(N, r0 + kTileRows);
            const std::int64_t o0 = t % out_tiles * kTileOutputs, o1 = std::min(O, o0 + kTileOutputs);
            if (b)
                for (std::int64_t n = r0; n < r1; n++) std::copy(b + o0, b + o1, y + n * O + o0);
            gemm(false, true, r1 - r0, o1 - o0, I, T(1), x + r0 * I, I, W + o0 * I, I, b ? T(1) : T(0), y + r0 * O + o0, O);
        });
        return;
    }
    if (!split(N * I * O)) {
        rows(0, N);
        return;
    }
    ranges(N, N * I * O, [&](std::int64_t r0, std::int64_t r1, int) { rows(r0, r1); });
}

template <typename T>
void linear_backward(T* dx, T* dW, T* db, const T* dy, const T* x, const T* W, std::int64_t N, std::int64_t I,
                     std::int64_t O) {
    if (N == 0) return;
    auto dx_rows = [&](std::int64_t r0, std::int64_t r1) {
        gemm(false, false, r1 - r0, I, O, T(1), dy + r0 * O, O, W, I, T(0), dx + r0 * I, I);
    };
    auto dw_rows = [&](std::int64_t o0, std::int64_t o1) {   // dW[o0:o1] += dy[:, o0:o1]^T x, db[o0:o1]
        gemm(true, false, o1 - o0, I, N, T(1), dy + o0, O, x, I, T(1), dW + o0 * I, I);
        if (db)
            for (std::int64_t n = 0; n < N; n++)
                for (std::int64_t o = o0; o < o1; o++) db[o] += dy[n * O + o];
    };
    BlasSingleThread single;
    if (!split(N * I * O)) {
        if (dx) dx_rows(0, N);
        if (dW) dw_rows(0, O);
        return;
    }
    if (dx) ranges(N, N * I * O, [&](std::int64_t r0, std::int64_t r1, int) { dx_rows(r0, r1); });
    if (dW) ranges(O, N * I * O, [&](std::int64_t o0, std::int64_t o1, int) { dw_rows(o0, o1); });
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
