// CUDA build of lib/embed/bert_cuda.h. Per batch: embeddings + LayerNorm (one block per token row), then per layer
//   qkv = x Wqkv^T (cuBLAS) + b;  ctx = softmax(q k^T / sqrt(d)) v per (sequence, head) (one block each, the
//   score row in shared memory);  x = LN(x + ctx Wo^T + bo);  x = LN(x + act(x W1^T + b1) W2^T + b2)
// and the mean of each sequence's rows. A row-major Y[rows, out] = X[rows, in] W[out, in]^T is, in cuBLAS's
// column-major view, Y^T (out x rows) = op_T(W) X^T: cublasSgemm(T, N, out, rows, in, W, in, X, in, Y, out).
// Everything runs on the caller's stream; every call is checked (cuda_check.cuh).
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/cuda_device.h"
#include "core/error.h"
#include "cuda_check.cuh"
#include "embed/activation.h"
#include "embed/bert_cuda.h"

namespace retro {
namespace {

constexpr int kThreads = 128;

// A device array that grows on demand (never shrinks: batches reuse it).
template <typename T>
struct DevArray {
    T* p = nullptr;
    std::size_t n = 0;
    DevArray() = default;
    DevArray(const DevArray&) = delete;
    DevArray& operator=(const DevArray&) = delete;
    ~DevArray() { RETRO_CUDA_CHECK_NOTHROW(cudaFree(p)); }
    T* ensure(std::size_t count) {
        if (count > n) {
            T* old = p;
            p = nullptr;
            n = 0;
            RETRO_CUDA_CHECK(cudaFree(old));
            if (cudaMalloc(&p, std::max<std::size_t>(count, 1) * sizeof(T)) != cudaSuccess) {
                cudaGetLastError();   // not sticky: clear it
                p = nullptr;
                user_error_in("--device cuda", cat("bert: ", count * sizeof(T) / (1 << 20), " MiB do not fit on the GPU"),
                              "lower --batch or --max-length, or embed on the CPU");
            }
            n = count;
        }
        return p;
    }
    // Enqueues the copy on `stream`: `host` must stay as it is until the stream is synchronized.
    T* upload(const T* host, std::size_t count, cudaStream_t stream) {
        ensure(count);
        RETRO_CUDA_CHECK(cudaMemcpyAsync(p, host, count * sizeof(T), cudaMemcpyHostToDevice, stream));
        return p;
    }
    T* upload(const std::vector<T>& host, cudaStream_t stream) { return upload(host.data(), host.size(), stream); }
};

// Sum / max over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the result.
__device__ float block_reduce(float v, bool is_max, float* red) {
    for (int off = 16; off > 0; off >>= 1) {
        const float o = __shfl_xor_sync(0xffffffffu, v, off);
        v = is_max ? fmaxf(v, o) : v + o;
    }
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
    __syncthreads();   // red may still be read by an earlier call
    if (lane == 0) red[warp] = v;
    __syncthreads();
    v = lane < warps ? red[lane] : (is_max ? -INFINITY : 0.0f);
    for (int off = 16; off > 0; off >>= 1) {
        const float o = __shfl_xor_sync(0xffffffffu, v, off);
        v = is_max ? fmaxf(v, o) : v + o;
    }
    return v;
}

// xr (H values, already summed) -> LayerNorm with two-pass mean and variance, as the CPU does.
__device__ void layer_norm_row(float* xr, const float* g, const float* b, int H, float eps, float* red) {
    float s = 0;
    for (int j = threadIdx.x; j < H; j += blockDim.x) s += xr[j];
    const float mean = block_reduce(s, false, red) / static_cast<float>(H);
    float v = 0;
    for (int j = threadIdx.x; j < H; j += blockDim.x) v += (xr[j] - mean) * (xr[j] - mean);
    const float inv = rsqrtf(block_reduce(v, false, red) / static_cast<float>(H) + eps);
    for (int j = threadIdx.x; j < H; j += blockDim.x) xr[j] = (xr[j] - mean) * inv * g[j] + b[j];
}

// Row r: x = LN(word[id] + pos[t] + type[0]).
__global__ void embed_rows(const int* ids, const int* pos, const float* word, const float* posw, const float* type,
                           const float* g, const float* b, int H, float eps, float* x) {
    __shared__ float red[32];
    const long r = blockIdx.x;
    float* xr = x + r * H;
    const float* w = word + static_cast<long>(ids[r]) * H;
    const float* p = posw + static_cast<long>(pos[r]) * H;
    for (int j = threadIdx.x; j < H; j += blockDim.x) xr[j] = w[j] + p[j] + type[j];
    layer_norm_row(xr, g, b, H, eps, red);
}

// Row r: x = LN(x + y + bias).
__global__ void add_bias_ln_rows(float* x, const float* y, const float* bias, const float* g, const float* b, int H,
                                 float eps) {
    __shared__ float red[32];
    const long r = blockIdx.x;
    float* xr = x + r * H;
    const float* yr = y + r * H;
    for (int j = threadIdx.x; j < H; j += blockDim.x) xr[j] += yr[j] + bias[j];
    layer_norm_row(xr, g, b, H, eps, red);
}

enum class Act : int { gelu_erf, gelu_tanh, relu };

// y[i] = act(y[i] + bias[i % width]) over n elements (act none: plain bias add).
__global__ void bias_act(float* y, const float* bias, long n, int width, int act, bool apply_act) {
    const long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x;
    if (i >= n) return;
    float v = y[i] + bias[i % width];
    if (apply_act) {
        if (act == static_cast<int>(Act::gelu_erf)) v = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
        else if (act == static_cast<int>(Act::gelu_tanh)) v = 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
        else v = fmaxf(v, 0.0f);
    }
    y[i] = v;
}

// Block (s, h): ctx rows of sequence s, head h = softmax(q k^T * scale) v over the sequence's tokens.
// qkv rows are [q | k | v] (3H wide); dynamic shared memory: max_len floats for the score row.
__global__ void attention(const float* qkv, const long long* offsets, long long base, int heads, int d, float scale,
                          float* ctx) {
    extern __shared__ float sc[];
    __shared__ float red[32];
    const int s = blockIdx.x / heads, h = blockIdx.x % heads, H = heads * d;
    const long long r0 = offsets[s] - base;
    const int len = static_cast<int>(offsets[s + 1] - offsets[s]);
    for (int i = 0; i < len; ++i) {
        const float* q = qkv + (r0 + i) * 3 * H + h * d;
        float m = -INFINITY;
        for (int j = threadIdx.x; j < len; j += blockDim.x) {
            const float* k = qkv + (r0 + j) * 3 * H + H + h * d;
            float dot = 0;
            for (int c = 0; c < d; ++c) dot += q[c] * k[c];
            sc[j] = dot * scale;
            m = fmaxf(m, sc[j]);
        }
        m = block_reduce(m, true, red);
        float sum = 0;
        for (int j = threadIdx.x; j < len; j += blockDim.x) {
            sc[j] = expf(sc[j] - m);
            sum += sc[j];
        }
        sum = block_reduce(sum, false, red);   // its barriers also publish sc
        const float inv = 1.0f / sum;
        for (int c = threadIdx.x; c < d; c += blockDim.x) {
            float acc = 0;
            for (int j = 0; j < len; ++j) acc += sc[j] * qkv[(r0 + j) * 3 * H + 2 * H + h * d + c];
            ctx[(r0 + i) * H + h * d + c] = acc * inv;
        }
        __syncthreads();   // sc is rewritten for the next row
    }
}

// out[s] = mean of sequence s's rows of x; with first_only, its first row (CLS pooling; zeros for an empty sequence).
__global__ void mean_rows(const float* x, const long long* offsets, long long base, int H, float* out, bool first_only) {
    const int s = blockIdx.x;
    const long long r0 = offsets[s] - base, all = offsets[s + 1] - offsets[s], len = first_only && all > 1 ? 1 : all;
    const float inv = 1.0f / fmaxf(static_cast<float>(len), 1e-9f);
    for (int c = threadIdx.x; c < H; c += blockDim.x) {
        float acc = 0;
        for (long long r = 0; r < len; ++r) acc += x[(r0 + r) * H + c];
        out[static_cast<long>(s) * H + c] = acc * inv;
    }
}

struct LayerDev {
    DevArray<float> w_qkv, b_qkv, w_o, b_o, ln1_g, ln1_b, w_1, b_1, w_2, b_2, ln2_g, ln2_b;
};

// The weights on the device, the cuBLAS handle, and the activation buffers the batches reuse.
struct State {
    BertConfig cfg;
    Act act = Act::gelu_erf;
    cublasHandle_t handle = nullptr;
    DevArray<float> word, pos, type, emb_g, emb_b;
    std::vector<std::unique_ptr<LayerDev>> layers;
    DevArray<int> ids, positions;
    DevArray<long long> offsets;
    DevArray<float> x, qkv, ctx, y, mid, pooled;
    ~State() {
        if (handle) RETRO_CUBLAS_CHECK_NOTHROW(cublasDestroy(handle));
    }
    // Y[rows, out] = X[rows, in] · W[out, in]^T on the stream the handle was last set to; `what` names it in errors.
    void gemm(const float* X, long rows, int in, const float* W, int out, float* Y, const char* what,
              cudaStream_t stream) const {
        const float one = 1.0f, zero = 0.0f;
        RETRO_CUBLAS_CHECK(cublasSgemm(handle, CUBLAS_OP_T, CUBLAS_OP_N, out, static_cast<int>(rows), in, &one, W, in, X, in,
                                       &zero, Y, out));
        RETRO_CUDA_SYNC_POINT(what, stream);
    }
};

class CudaBertImpl final : public CudaBert {
public:
    CudaBertImpl(const BertModel& model, CudaStream stream);
    void forward_mean(const std::int32_t* ids, const std::int64_t* offsets, int count, float* out,
                      CudaStream stream) override {
        forward(ids, offsets, count, out, false, stream);
    }
    void forward_cls(const std::int32_t* ids, const std::int64_t* offsets, int count, float* out,
                     CudaStream stream) override {
        forward(ids, offsets, count, out, true, stream);
    }

private:
    void forward(const std::int32_t* ids, const std::int64_t* offsets, int count, float* out, bool cls, CudaStream stream);
    State s_;
};

CudaBertImpl::CudaBertImpl(const BertModel& model, CudaStream stream) {
    cuda_require("--device cuda", "RetroKit", "embed on the CPU (--device cpu)");
    cuda_stream_require(stream, "CudaBert::upload");
    RETRO_CUDA_CHECK(cudaSetDevice(0));
    State& s = s_;
    s.cfg = model.config();
    Activation act = Activation::GELU_ERF;
    activation_from_name(s.cfg.hidden_act, act);   // BertEmbedder refuses the others before the upload
    RETRO_CHECK(act == Activation::GELU_ERF || act == Activation::GELU_TANH || act == Activation::RELU,
                "the CUDA encoder has no ", s.cfg.hidden_act, " feed-forward");
    s.act = act == Activation::GELU_ERF ? Act::gelu_erf : act == Activation::RELU ? Act::relu : Act::gelu_tanh;
    // MPNet's relative-position bias and shifted positions are CPU-only (BertEmbedder refuses them first)
    RETRO_CHECK(!s.cfg.mpnet, "the CUDA encoder has no relative-position bias (an MPNet checkpoint)");
    RETRO_CHECK(!s.cfg.modernbert, "the CUDA encoder has no rotary positions, GLU or sliding window (a ModernBERT checkpoint)");
    const auto e = model.embeddings();
    const cudaStream_t st = stream;
    const CudaWaitOnThrow wait_on_throw(st);   // a throw below leaves uploads queued into s_'s arrays
    s.word.upload(e.word, st), s.pos.upload(e.pos, st), s.type.upload(e.type, st), s.emb_g.upload(e.ln_g, st),
        s.emb_b.upload(e.ln_b, st);
    for (const auto& L : model.layers()) {
        // held by s before its uploads: a local would be freed before wait_on_throw waits for them
        LayerDev* d = s.layers.emplace_back(std::make_unique<LayerDev>()).get();
        d->w_qkv.upload(L.w_qkv, st), d->b_qkv.upload(L.b_qkv, st), d->w_o.upload(L.w_o, st), d->b_o.upload(L.b_o, st);
        d->ln1_g.upload(L.ln1_g, st), d->ln1_b.upload(L.ln1_b, st), d->w_1.upload(L.w_1, st), d->b_1.upload(L.b_1, st);
        d->w_2.upload(L.w_2, st), d->b_2.upload(L.b_2, st), d->ln2_g.upload(L.ln2_g, st), d->ln2_b.upload(L.ln2_b, st);
    }
    RETRO_CUBLAS_CHECK(cublasCreate(&s.handle));
    RETRO_CUBLAS_CHECK(cublasSetMathMode(s.handle, CUBLAS_PEDANTIC_MATH));   // fp32, no TF32
    RETRO_CUDA_CHECK(cudaStreamSynchronize(stream));   // the weights are in place for work on any stream
}

void CudaBertImpl::forward(const std::int32_t* ids, const std::int64_t* offsets, int count, float* out, bool cls,
                           CudaStream stream) {
    cuda_stream_require(stream, cls ? "CudaBert::forward_cls" : "CudaBert::forward_mean");
    State& s = s_;
    const BertConfig& c = s.cfg;
    const int H = c.hidden, I = c.intermediate, heads = c.heads, d = H / heads;
    const long long base = offsets[0], N = offsets[count] - offsets[0];
    if (count <= 0) return;
    std::vector<int> pos(static_cast<std::size_t>(N));
    int max_len = 0;
    for (int q = 0; q < count; ++q) {
        const std::int64_t len = offsets[q + 1] - offsets[q];
        RETRO_CHECK(len >= 0 && len <= c.max_tokens(), "sequence ", q, " has length ", len, ", the model allows ", c.max_tokens());
        max_len = std::max<int>(max_len, static_cast<int>(len));
        bert_position_ids(c, ids + offsets[q], len, pos.data() + (offsets[q] - base));   // 0, 1, ... or fairseq's
    }
    for (long long i = 0; i < N; ++i)
        RETRO_CHECK(ids[base + i] >= 0 && ids[base + i] < c.vocab_size, "token id ", ids[base + i],
                    " outside the model's vocabulary of ", c.vocab_size);
    float* pooled = s.pooled.ensure(static_cast<std::size_t>(count) * H);
    if (N == 0) {
        std::fill(out, out + static_cast<std::size_t>(count) * H, 0.0f);
        return;
    }
    const cudaStream_t st = stream;   // pos, ids and offsets are read by the copies until the sync at the end
    const CudaWaitOnThrow wait_on_throw(st);   // a throw part way leaves kernels queued on s_'s arrays
    const int* dids = s.ids.upload(reinterpret_cast<const int*>(ids + base), static_cast<std::size_t>(N), st);
    const int* dpos = s.positions.upload(pos, st);
    const long long* doff =
        s.offsets.upload(reinterpret_cast<const long long*>(offsets), static_cast<std::size_t>(count) + 1, st);
    float* x = s.x.ensure(static_cast<std::size_t>(N) * H);
    float* qkv = s.qkv.ensure(static_cast<std::size_t>(N) * 3 * H);
    float* ctx = s.ctx.ensure(static_cast<std::size_t>(N) * H);
    float* y = s.y.ensure(static_cast<std::size_t>(N) * H);
    float* mid = s.mid.ensure(static_cast<std::size_t>(N) * I);
    const float eps = c.layer_norm_eps, scale = 1.0f / std::sqrt(static_cast<float>(d));
    const unsigned rows = static_cast<unsigned>(N);
    auto elementwise_blocks = [](long n) { return static_cast<unsigned>((n + 255) / 256); };
    RETRO_CUBLAS_CHECK(cublasSetStream(s.handle, st));
    embed_rows<<<rows, kThreads, 0, st>>>(dids, dpos, s.word.p, s.pos.p, s.type.p, s.emb_g.p, s.emb_b.p, H, eps, x);
    RETRO_CUDA_LAUNCH_CHECK("embed_rows", st);
    for (const auto& Lp : s.layers) {
        const LayerDev& L = *Lp;
        s.gemm(x, N, H, L.w_qkv.p, 3 * H, qkv, "cublasSgemm (qkv)", st);
        bias_act<<<elementwise_blocks(N * 3 * H), 256, 0, st>>>(qkv, L.b_qkv.p, N * 3 * H, 3 * H, 0, false);
        RETRO_CUDA_LAUNCH_CHECK("bias_act (qkv)", st);
        RETRO_CHECK(max_len <= kCudaBertMaxTokens, "CudaBert: a text of ", max_len, " tokens > ", kCudaBertMaxTokens,
                    " (BertEmbedder refuses such a --max-length)");
        attention<<<static_cast<unsigned>(count * heads), kThreads, static_cast<std::size_t>(max_len) * sizeof(float), st>>>(
            qkv, doff, base, heads, d, scale, ctx);
        RETRO_CUDA_LAUNCH_CHECK("attention", st);
        s.gemm(ctx, N, H, L.w_o.p, H, y, "cublasSgemm (attention output)", st);
        add_bias_ln_rows<<<rows, kThreads, 0, st>>>(x, y, L.b_o.p, L.ln1_g.p, L.ln1_b.p, H, eps);
        RETRO_CUDA_LAUNCH_CHECK("add_bias_ln_rows (attention)", st);
        s.gemm(x, N, H, L.w_1.p, I, mid, "cublasSgemm (ffn in)", st);
        bias_act<<<elementwise_blocks(N * I), 256, 0, st>>>(mid, L.b_1.p, N * I, I, static_cast<int>(s.act), true);
        RETRO_CUDA_LAUNCH_CHECK("bias_act (ffn)", st);
        s.gemm(mid, N, I, L.w_2.p, H, y, "cublasSgemm (ffn out)", st);
        add_bias_ln_rows<<<rows, kThreads, 0, st>>>(x, y, L.b_2.p, L.ln2_g.p, L.ln2_b.p, H, eps);
        RETRO_CUDA_LAUNCH_CHECK("add_bias_ln_rows (ffn)", st);
    }
    mean_rows<<<static_cast<unsigned>(count), kThreads, 0, st>>>(x, doff, base, H, pooled, cls);
    RETRO_CUDA_LAUNCH_CHECK("mean_rows", st);
    RETRO_CUDA_CHECK(cudaMemcpyAsync(out, pooled, static_cast<std::size_t>(count) * H * sizeof(float),
                                     cudaMemcpyDeviceToHost, st));
    RETRO_CUDA_CHECK(cudaStreamSynchronize(st));
}

}  // namespace

std::unique_ptr<CudaBert> CudaBert::upload(const BertModel& model, CudaStream stream) {
    return std::make_unique<CudaBertImpl>(model, stream);
}

}  // namespace retro
