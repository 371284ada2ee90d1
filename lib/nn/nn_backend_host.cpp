#include "nn/nn_backend_host.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/cuda_device.h"
#include "core/error.h"
#include "nn/copy_head.h"
#include "nn/cross_entropy.h"
#include "nn/embedding.h"
#include "nn/gelu.h"
#include "nn/linear.h"
#include "nn/parallel.h"
#include "nn/residual.h"
#include "nn/rmsnorm.h"
#include "nn/rotary.h"

namespace retro::nn {

void* HostNnBackend::alloc(std::size_t bytes) {
    refuse_while_capturing("alloc");
    void* p = std::aligned_alloc(256, (bytes + 255) / 256 * 256 + 256);
    RETRO_CHECK(p != nullptr, "host backend: out of memory allocating ", bytes, " bytes");
    return p;
}
void HostNnBackend::release(void* p) noexcept { std::free(p); }

namespace {
struct HostGraph final : BackendGraph {
    std::vector<std::function<void()>> ops;
};
}  // namespace

void HostNnBackend::begin_capture() {
    RETRO_CHECK(!capturing_, "begin_capture: a capture is already open");
    capturing_ = true;
    recorded_.clear();
}
std::unique_ptr<BackendGraph> HostNnBackend::end_capture() {
    RETRO_CHECK(capturing_, "end_capture without begin_capture");
    capturing_ = false;
    auto g = std::make_unique<HostGraph>();
    g->ops = std::move(recorded_);
    recorded_.clear();
    return g;
}
void HostNnBackend::abort_capture() noexcept {
    capturing_ = false;
    recorded_.clear();
}
void HostNnBackend::launch_graph(const BackendGraph& graph) {
    refuse_while_capturing("launch_graph");
    for (const auto& op : dynamic_cast<const HostGraph&>(graph).ops) op();
}
void HostNnBackend::upload(void* dst, const void* src, std::size_t bytes) {
    refuse_while_capturing("upload");
    if (bytes) std::memcpy(dst, src, bytes);
}
void HostNnBackend::download(void* dst, const void* src, std::size_t bytes) {
    refuse_while_capturing("download");
    if (bytes) std::memcpy(dst, src, bytes);
}
void HostNnBackend::copy(void* dst, const void* src, std::size_t bytes) {
    run([=, this] {
        if (bytes && dst != src) std::memmove(dst, src, bytes);
    });
}
void HostNnBackend::zero(void* p, std::size_t bytes) {
    run([=, this] {
        if (bytes) std::memset(p, 0, bytes);
    });
}

namespace {
// A copy of x[0, n) rounded to bf16 and back (the GemmInputs::bf16 emulation).
std::vector<float> bf16_rounded(const float* x, std::int64_t n) {
    std::vector<float> r(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; i++) r[static_cast<std::size_t>(i)] = from_bf16(to_bf16(x[i]));
    return r;
}

// The values of bf16 bits x16[0, n).
std::vector<float> bf16_values(const std::uint16_t* x16, std::int64_t n) {
    std::vector<float> r(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; i++) r[static_cast<std::size_t>(i)] = from_bf16(bf16{x16[i]});
    return r;
}

// linear_forward / linear_backward now, in the mode bf16 or not (the ops' bodies)
void linear_forward_in(float* y, const float* x, const float* W, const float* b, std::int64_t N, std::int64_t I,
                       std::int64_t O, bool bf16) {
    if (bf16) {
        const auto xr = bf16_rounded(x, N * I), wr = bf16_rounded(W, O * I);
        nn::linear_forward(y, xr.data(), wr.data(), b, N, I, O);
        return;
    }
    nn::linear_forward(y, x, W, b, N, I, O);
}
void linear_backward_in(float* dx, float* dW, float* db, const float* dy, const float* x, const float* W,
                        std::int64_t N, std::int64_t I, std::int64_t O, bool bf16) {
    if (bf16) {   // dx and dW from rounded inputs, db from dy itself
        const auto dyr = bf16_rounded(dy, N * O), xr = bf16_rounded(x, N * I), wr = bf16_rounded(W, O * I);
        nn::linear_backward(dx, dW, static_cast<float*>(nullptr), dyr.data(), xr.data(), wr.data(), N, I, O);
        if (dW && db)
            for (std::int64_t n = 0; n < N; n++)
                for (std::int64_t o = 0; o < O; o++) db[o] += dy[n * O + o];
        return;
    }
    nn::linear_backward(dx, dW, db, dy, x, W, N, I, O);
}
}  // namespace

void HostNnBackend::linear_forward(float* y, const float* x, const float* W, const float* b, std::int64_t N,
                                   std::int64_t I, std::int64_t O) {
    const bool bf16 = gemm_inputs_ == GemmInputs::bf16;   // the mode when called (a graph keeps it)
    run([=] { linear_forward_in(y, x, W, b, N, I, O, bf16); });
}
void HostNnBackend::linear_gelu_forward_bf16(std::uint16_t* g16, float* h, const float* x, const float* W,
                                             const float* b, std::int64_t N, std::int64_t I, std::int64_t O) {
    RETRO_CHECK(h || N * O == 0, "linear_gelu_forward_bf16: h is required");
    const bool bf16 = gemm_inputs_ == GemmInputs::bf16;
    run([=] {
        linear_forward_in(h, x, W, b, N, I, O, bf16);
        std::vector<float> g(static_cast<std::size_t>(N * O));
        nn::gelu_forward(g.data(), h, N * O);
        for (std::int64_t i = 0; i < N * O; i++) g16[i] = to_bf16(g[static_cast<std::size_t>(i)]).bits;
    });
}
void HostNnBackend::linear_gelu_forward_bf16x(std::uint16_t* g16, float* h, const std::uint16_t* x16, const float* W,
                                              const float* b, std::int64_t N, std::int64_t I, std::int64_t O) {
    RETRO_CHECK(h || N * O == 0, "linear_gelu_forward_bf16x: h is required");
    const bool bf16 = gemm_inputs_ == GemmInputs::bf16;
    run([=] {
        linear_forward_in(h, bf16_values(x16, N * I).data(), W, b, N, I, O, bf16);
        std::vector<float> g(static_cast<std::size_t>(N * O));
        nn::gelu_forward(g.data(), h, N * O);
        for (std::int64_t i = 0; i < N * O; i++) g16[i] = to_bf16(g[static_cast<std::size_t>(i)]).bits;
    });
}
void HostNnBackend::linear_forward_bf16x(float* y, const std::uint16_t* x16, const float* W, const float* b,
                                         std::int64_t N, std::int64_t I, std::int64_t O) {
    const bool bf16 = gemm_inputs_ == GemmInputs::bf16;
    run([=] { linear_forward_in(y, bf16_values(x16, N * I).data(), W, b, N, I, O, bf16); });
}
void HostNnBackend::linear_backward_bf16x(float* dx, float* dW, float* db, const float* dy, const std::uint16_t* x16,
                                          const float* W, std::int64_t N, std::int64_t I, std::int64_t O) {
    const bool bf16 = gemm_inputs_ == GemmInputs::bf16;
    run([=] { linear_backward_in(dx, dW, db, dy, bf16_values(x16, N * I).data(), W, N, I, O, bf16); });
}
void HostNnBackend::linear_gelu_forward(float* g, float* h, const float* x, const float* W, const float* b,
                                        std::int64_t N, std::int64_t I, std::int64_t O) {
    float* pre = h ? h : g;   // the two ops (gelu in place when h is null)
    linear_forward(pre, x, W, b, N, I, O);
    gelu_forward(g, pre, N * O);
}
void HostNnBackend::linear_backward(float* dx, float* dW, float* db, const float* dy, const float* x, const float* W,
                                    std::int64_t N, std::int64_t I, std::int64_t O) {
    const bool bf16 = gemm_inputs_ == GemmInputs::bf16;   // the mode when called (a graph keeps it)
    run([=] { linear_backward_in(dx, dW, db, dy, x, W, N, I, O, bf16); });
}
void HostNnBackend::rmsnorm_forward(float* y, float* norm, const float* x, const float* gamma, std::int64_t N,
                                    std::int64_t C) {
    run([=, this] {
        nn::rmsnorm_forward(y, norm, x, gamma, N, C);
    });
}
void HostNnBackend::rmsnorm_backward(float* dx, float* dgamma, const float* dy, const float* x, const float* gamma,
                                     const float* norm, std::int64_t N, std::int64_t C) {
    run([=, this] {
        nn::rmsnorm_backward(dx, dgamma, dy, x, gamma, norm, N, C);
    });
}
void HostNnBackend::residual_rmsnorm_forward(float* x, float* y, float* norm, const float* a, const float* b,
                                             const float* gamma, std::int64_t N, std::int64_t C) {
    run([=, this] {
        nn::residual_sum(x, a, b, N * C);
        nn::rmsnorm_forward(y, norm, x, gamma, N, C);
    });
}
void HostNnBackend::rmsnorm_forward_bf16(std::uint16_t* y16, float* norm, const float* x, const float* gamma,
                                         std::int64_t N, std::int64_t C) {
    run([=, this] {
        std::vector<float> y(static_cast<std::size_t>(N * C));
        nn::rmsnorm_forward(y.data(), norm, x, gamma, N, C);
        for (std::int64_t i = 0; i < N * C; i++) y16[i] = to_bf16(y[static_cast<std::size_t>(i)]).bits;
    });
}
void HostNnBackend::residual_rmsnorm_forward_bf16(float* x, std::uint16_t* y16, float* norm, const float* a,
                                                  const float* b, const float* gamma, std::int64_t N, std::int64_t C) {
    run([=, this] {
        nn::residual_sum(x, a, b, N * C);
        std::vector<float> y(static_cast<std::size_t>(N * C));
        nn::rmsnorm_forward(y.data(), norm, x, gamma, N, C);
        for (std::int64_t i = 0; i < N * C; i++) y16[i] = to_bf16(y[static_cast<std::size_t>(i)]).bits;
    });
}
void HostNnBackend::rmsnorm_backward_add(float* dx, float* dgamma, const float* dy, const float* x, const float* gamma,
                                         const float* norm, std::int64_t N, std::int64_t C) {
    run([=, this] {
        scratch_.resize(static_cast<std::size_t>(N * C));
        nn::rmsnorm_backward(scratch_.data(), dgamma, dy, x, gamma, norm, N, C);
        nn::residual_add(dx, scratch_.data(), N * C);
    });
}
void HostNnBackend::gelu_forward(float* y, const float* x, std::int64_t N) {
    run([=, this] { nn::gelu_forward(y, x, N); });
}
void HostNnBackend::gelu_backward(float* dx, const float* dy, const float* x, std::int64_t N) {
    run([=, this] {
        nn::gelu_backward(dx, dy, x, N);
    });
}
void HostNnBackend::rotary_forward(float* y, const float* x, const RotaryView& t, std::int64_t B, std::int64_t N,
                                   std::int64_t H, std::int64_t D) {
    run([=, this] {
        RETRO_CHECK(t.rows == N, "rotary table has ", t.rows, " rows for ", N, " positions");
        nn::rotary_forward(y, x, t.cos, t.sin, t.rot_dim, B, N, H, D);
    });
}
void HostNnBackend::rotary_scale_forward(float* y, const float* x, const RotaryView& t, std::int64_t B, std::int64_t N,
                                         std::int64_t H, std::int64_t D, float s, std::int64_t scaled_heads) {
    run([=, this] {   // scale() then rotary_forward(), as the ops did before they were one
        RETRO_CHECK(t.rows == N, "rotary table has ", t.rows, " rows for ", N, " positions");
        RETRO_CHECK(scaled_heads >= 0 && scaled_heads <= H, "rotary_scale_forward: ", scaled_heads, " scaled heads of ", H);
        for (std::int64_t r = 0; r < B * N; r++)
            for (std::int64_t c = 0; c < H * D; c++)
                y[r * H * D + c] = c < scaled_heads * D ? x[r * H * D + c] * s : x[r * H * D + c];
        nn::rotary_forward(y, y, t.cos, t.sin, t.rot_dim, B, N, H, D);
    });
}
void HostNnBackend::rotary_backward_scale(float* dx, const float* dy, const RotaryView& t, std::int64_t B,
                                          std::int64_t N, std::int64_t H, std::int64_t D, float s) {
    run([=, this] {   // rotary_backward() then scale(), as the ops did before they were one
        RETRO_CHECK(t.rows == N, "rotary table has ", t.rows, " rows for ", N, " positions");
        nn::rotary_backward(dx, dy, t.cos, t.sin, t.rot_dim, B, N, H, D);
        for (std::int64_t i = 0; i < B * N * H * D; i++) dx[i] *= s;
    });
}
void HostNnBackend::rotary_backward(float* dx, const float* dy, const RotaryView& t, std::int64_t B, std::int64_t N,
                                    std::int64_t H, std::int64_t D) {
    run([=, this] {
        RETRO_CHECK(t.rows == N, "rotary table has ", t.rows, " rows for ", N, " positions");
        nn::rotary_backward(dx, dy, t.cos, t.sin, t.rot_dim, B, N, H, D);
    });
}
void HostNnBackend::scale(float* x, float s, std::int64_t n) {
    run([=, this] {
        for (std::int64_t i = 0; i < n; i++) x[i] *= s;
    });
}
namespace {
std::int64_t output_copy_floats(const AttentionShape& s) { return (s.B * s.Nq * s.H * s.D + 1) / 2; }
}  // namespace
std::int64_t HostNnBackend::attention_saved_floats(const AttentionShape& s, bool key_mask) const {
    const std::int64_t probs = NnBackend::attention_saved_floats(s, key_mask);
    return keeps_output_bf16() ? bf16_copy_at(probs) + output_copy_floats(s) : probs;
}
std::int64_t HostNnBackend::attention_output_bf16_offset(const AttentionShape& s, bool key_mask) const {
    if (!keeps_output_bf16()) return -1;
    const std::int64_t at = bf16_copy_at(NnBackend::attention_saved_floats(s, key_mask));   // after the probabilities
    // (a backend derived from this one that sizes probs otherwise — a test's stand-in for the CUDA stash — keeps the
    // output in fp32 unless its probs has room for the copy here)
    return attention_saved_floats(s, key_mask) >= at + output_copy_floats(s) ? at : -1;
}
void HostNnBackend::attention_forward(float* out, float* probs, const float* q, const float* k, const float* v,
                                      const float* null_k, const float* null_v, const std::uint8_t* key_mask,
                                      const AttentionShape& s) {
    // out null: only its bf16 copy, where attention_output_bf16_offset puts it (the mode when called)
    const std::int64_t o16_at = out ? -1 : attention_output_bf16_offset(s, key_mask != nullptr);
    RETRO_CHECK(out || o16_at >= 0, "attention_forward: out is null outside the bf16 activations mode");
    run([=, this] {
        if (out) return nn::attention_forward(out, probs, q, k, v, null_k, null_v, key_mask, s);
        const std::int64_t n = s.B * s.Nq * s.H * s.D;
        std::vector<float> o(static_cast<std::size_t>(n));
        nn::attention_forward(o.data(), probs, q, k, v, null_k, null_v, key_mask, s);
        auto* o16 = reinterpret_cast<std::uint16_t*>(probs + o16_at);
        for (std::int64_t i = 0; i < n; i++) o16[i] = to_bf16(o[static_cast<std::size_t>(i)]).bits;
    });
}
void HostNnBackend::attention_backward(float* dq, float* dk, float* dv, float* dnull_k, float* dnull_v,
                                       const float* dout, const float* probs, const float* q, const float* k,
                                       const float* v, const float* null_k, const float* null_v,
                                       const std::uint8_t* key_mask, const AttentionShape& s) {
    run([=, this] {
        nn::attention_backward(dq, dk, dv, dnull_k, dnull_v, dout, probs, q, k, v, null_k, null_v, key_mask, s);
    });
}
void HostNnBackend::attention_decode(float* out, const float* q, const DecodeCache& c, const std::int64_t* pos,
                                     const std::int64_t* seq, std::int64_t rows, std::int64_t H, std::int64_t D) {
    run([=, this] {
        RETRO_CHECK(D <= kAttentionDecodeMaxD, "attention_decode: head dimension ", D, " > ", kAttentionDecodeMaxD);
        const std::int64_t HD = H * D, L = c.L;
        std::vector<float> probs;
        for (std::int64_t i = 0; i < rows; i++) {   // nn::attention_forward per row (Nq = 1)
            RETRO_CHECK(pos[i] >= 0 && pos[i] < L, "attention_decode: position ", pos[i], " outside [0, ", L, ")");
            float* K = c.kcache + seq[i] * L * HD;
            float* Vc = c.vcache + seq[i] * L * HD;
            if (c.k_new) {
                std::memcpy(K + pos[i] * HD, c.k_new + i * HD, sizeof(float) * HD);
                std::memcpy(Vc + pos[i] * HD, c.v_new + i * HD, sizeof(float) * HD);
            }
            const bool plain = c.null_k == nullptr && c.key_mask == nullptr;   // the self-attention's causal cache
            const AttentionShape s{1, 1, pos[i] + 1, H, D, plain, c.null_k != nullptr};
            probs.resize(static_cast<std::size_t>(H * s.keys()));
            nn::attention_forward(out + i * HD, probs.data(), q + i * HD, K, Vc, c.null_k, c.null_v,
                                  c.key_mask ? c.key_mask + seq[i] * L : nullptr, s);
        }
    });
}
void HostNnBackend::embedding_forward(float* out, const std::int32_t* ids, const float* table, std::int64_t N,
                                      std::int64_t V, std::int64_t C) {
    run([=, this] {
        nn::embedding_forward(out, ids, table, N, V, C);
    });
}
void HostNnBackend::embedding_backward(float* dtable, const float* dout, const std::int32_t* ids, std::int64_t N,
                                       std::int64_t C) {
    run([=, this] {
        nn::embedding_backward(dtable, dout, ids, N, C);
    });
}
void HostNnBackend::position_add_forward(float* out, const float* pos, std::int64_t B, std::int64_t Tn,
                                         std::int64_t C) {
    run([=, this] {
        nn::position_add_forward(out, pos, B, Tn, C);
    });
}
void HostNnBackend::position_add_backward(float* dpos, const float* dout, std::int64_t B, std::int64_t Tn,
                                          std::int64_t C) {
    run([=, this] {
        nn::position_add_backward(dpos, dout, B, Tn, C);
    });
}
float HostNnBackend::cross_entropy_forward(float* lse, std::int64_t* valid, const float* logits,
                                           const std::int32_t* targets, std::int64_t N, std::int64_t V,
                                           std::int32_t ignore_index) {
    refuse_while_capturing("cross_entropy_forward");
    return nn::cross_entropy_forward(lse, valid, logits, targets, N, V, ignore_index);
}
void HostNnBackend::cross_entropy_backward(float* dlogits, float dloss, const float* logits, const float* lse,
                                           const std::int32_t* targets, std::int64_t N, std::int64_t V,
                                           std::int32_t ignore_index, std::int64_t valid) {
    run([=, this] {
        nn::cross_entropy_backward(dlogits, dloss, logits, lse, targets, N, V, ignore_index, valid);
    });
}
void HostNnBackend::residual_sum(float* dst, const float* a, const float* b, std::int64_t n) {
    run([=, this] {
        nn::residual_sum(dst, a, b, n);
    });
}
void HostNnBackend::residual_add(float* dst, const float* src, std::int64_t n) {
    run([=, this] { nn::residual_add(dst, src, n); });
}
void HostNnBackend::gather_rows(float* dst, const float* src, const std::int64_t* index, std::int64_t rows,
                                std::int64_t C) {
    run([=, this] {
        ranges(rows, rows * C, [&](std::int64_t b, std::int64_t e, int) {
            for (std::int64_t i = b; i < e; i++) {
                if (index[i] >= 0) std::memcpy(dst + i * C, src + index[i] * C, sizeof(float) * C);
                else std::memset(dst + i * C, 0, sizeof(float) * C);
            }
        });
    });
}
void HostNnBackend::gather_add_rows(float* dst, const float* src, const std::int64_t* index, std::int64_t rows,
                                    std::int64_t C) {
    run([=, this] {
        ranges(rows, rows * C, [&](std::int64_t b, std::int64_t e, int) {
            for (std::int64_t i = b; i < e; i++) {
                if (index[i] < 0) continue;
                const float* s = src + index[i] * C;
                float* d = dst + i * C;
                for (std::int64_t c = 0; c < C; c++) d[c] += s[c];
            }
        });
    });
}
void HostNnBackend::copy_head_forward(float* logits, const float* xn, const CopyCandidate* cand, std::int64_t rows,
                                      std::int64_t k, std::int64_t V, std::int64_t C, const float* bias,
                                      const float* weight) {
    run([=, this] {
        nn::copy_head_forward(logits, xn, cand, rows, k, V, C, bias, weight);
    });
}
void HostNnBackend::copy_head_backward(float* dxn, float* dbias, float* dweight, const float* dlogits, const float* xn,
                                       const CopyCandidate* cand, std::int64_t rows, std::int64_t k, std::int64_t V,
                                       std::int64_t C, const float* weight) {
    run([=, this] {
        nn::copy_head_backward(dxn, dbias, dweight, dlogits, xn, cand, rows, k, V, C, weight);
    });
}
void HostNnBackend::scatter_rows(float* dst, const float* src, const std::int64_t* index, std::int64_t rows,
                                 std::int64_t C) {
    run([=, this] {
        for (std::int64_t i = 0; i < rows; i++)
            if (index[i] >= 0) std::memcpy(dst + index[i] * C, src + i * C, sizeof(float) * C);
    });
}
double HostNnBackend::sum_squares(const float* x, std::int64_t n) {
    refuse_while_capturing("sum_squares");
    double sq = 0;
    for (std::int64_t i = 0; i < n; i++) sq += static_cast<double>(x[i]) * x[i];
    return sq;
}
void HostNnBackend::adamw_update(float* p, const float* g, float* m, float* v, const std::uint8_t* decay,
                                 std::int64_t n, const AdamWScalars& a) {
    run([=, this] {
        ranges(n, 10 * n, [&](std::int64_t b, std::int64_t e, int) {
            for (std::int64_t i = b; i < e; i++) {
                const float gi = g[i];
                if (decay[i]) p[i] *= a.decay;
                m[i] = m[i] + a.w1 * (gi - m[i]);
                v[i] = v[i] * a.b2 + a.w2 * (gi * gi);
                const float denom = std::sqrt(v[i]) / a.bc2_sqrt + a.eps;
                p[i] = p[i] + (-a.step_size) * (m[i] / denom);
            }
        });
    });
}

}  // namespace retro::nn
