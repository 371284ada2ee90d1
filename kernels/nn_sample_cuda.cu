// CUDA NnBackend::sample_rows (nn/nn_backend.h): the next tokens drawn on the device, one block a row
// (kernels/nn_sample.cuh), so that a decode step downloads its ids (4 bytes a row) instead of its logits rows (V floats
// each) and the host's draw (~60 us a token at V = 8,000 on the dev box, session 20) leaves the token's critical path.
// The rows and the uniforms go up in one upload, the ids come back in one download; the kernel keeps each row's
// fixed-point weights in the same scratch (n x V x 8 bytes). RETRO_UNFUSE=sample_rows draws on
// the host instead (NnBackend's definition).
#include <cstring>
#include <vector>

#include "core/error.h"
#include "cuda_check.cuh"
#include "nn/nn_backend_cuda.h"
#include "nn_backend_common.cuh"
#include "nn_sample.cuh"

namespace retro::nn::detail {

void CudaNnBackend::sample_rows(std::int32_t* ids, const float* logits, const std::int64_t* rows, std::int64_t n,
                                std::int64_t V, std::int64_t ld, const SamplingParams& p, const double* u) {
    if (n == 0) return;
    RETRO_CHECK(n > 0 && n <= INT32_MAX && V > 0 && V <= INT32_MAX && ld >= V, "sample_rows: n ", n, ", V ", V, ", ld ", ld);
    if (unfused(FusedOp::sample_rows)) return NnBackend::sample_rows(ids, logits, rows, n, V, ld, p, u);
    // [rows: n int64][u: n double][ids: n int32], the first two uploaded together
    const std::size_t rows_bytes = static_cast<std::size_t>(n) * sizeof(std::int64_t), u_bytes = static_cast<std::size_t>(n) * sizeof(double);
    std::vector<unsigned char> block(rows_bytes + u_bytes, 0);
    std::memcpy(block.data(), rows, rows_bytes);
    if (!p.greedy) std::memcpy(block.data() + rows_bytes, u, u_bytes);
    // then [ids: n int32], padded to 8 bytes, then the kernel's weights [n, V] (u64; not when greedy)
    const std::size_t ids_bytes = (static_cast<std::size_t>(n) * sizeof(std::int32_t) + 7) / 8 * 8;
    const std::size_t weight_bytes = p.greedy ? 0 : static_cast<std::size_t>(n) * static_cast<std::size_t>(V) * sizeof(std::uint64_t);
    auto* dev = static_cast<unsigned char*>(scratch(draw_, block.size() + ids_bytes + weight_bytes));
    upload(dev, block.data(), block.size());
    auto* ids_dev = reinterpret_cast<std::int32_t*>(dev + block.size());
    auto* weights = reinterpret_cast<std::uint64_t*>(dev + block.size() + ids_bytes);
    const sample::Params kp{p.temperature, p.top_k, p.top_p, p.greedy ? 1 : 0};
    constexpr int threads = sample::kThreads;
    sample::sample_rows_kernel<threads><<<static_cast<unsigned>(n), threads, sample::smem_bytes<threads>(), stream_>>>(
        ids_dev, logits, reinterpret_cast<const long long*>(dev), V, ld, kp, reinterpret_cast<const double*>(dev + rows_bytes),
        weights);
    RETRO_CUDA_LAUNCH_CHECK("sample_rows", stream_);
    download(ids, ids_dev, static_cast<std::size_t>(n) * sizeof(std::int32_t));
}

}  // namespace retro::nn::detail
