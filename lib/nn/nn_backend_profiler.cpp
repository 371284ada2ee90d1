// ProfilingNnBackend (nn/nn_backend_profiler.h): every op forwarded to the inner backend and timed.
#include "nn/nn_backend_profiler.h"

#include <algorithm>

namespace retro::nn {
namespace {

std::string dims(std::initializer_list<std::int64_t> d) {
    std::string s;
    for (auto v : d) s += (s.empty() ? "" : "x") + std::to_string(v);
    return s;
}
std::string linear_shape(std::int64_t N, std::int64_t I, std::int64_t O) { return dims({N, I}) + "->" + std::to_string(O); }
std::string attention_shape(const AttentionShape& s) {
    return dims({s.B, s.H, s.Nq, s.keys(), s.D}) + (s.causal ? " causal" : "") + (s.null_kv ? " null" : "");
}
// q k^T and p v: 2 * Nq * keys * D each, per (item, head); the causal square counted whole (model/model_flops.h)
double attention_flops(const AttentionShape& s) { return 4.0 * double(s.B * s.H) * double(s.Nq * s.keys()) * double(s.D); }

}  // namespace

void ProfilingNnBackend::start() {
    hand_over_modes();
    inner_.synchronize();
    t0_ = std::chrono::steady_clock::now();
}

void ProfilingNnBackend::stop(const char* op, const std::string& shape, double flops) {
    inner_.synchronize();
    OpTiming& t = by_key_[std::string(op) + "|" + shape];
    t.op = op;
    t.shape = shape;
    t.calls++;
    t.flops += flops;
    t.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
}

std::vector<OpTiming> ProfilingNnBackend::timings() const {
    std::vector<OpTiming> out;
    for (const auto& [key, t] : by_key_) out.push_back(t);
    std::stable_sort(out.begin(), out.end(), [](const OpTiming& a, const OpTiming& b) { return a.seconds > b.seconds; });
    return out;
}

void ProfilingNnBackend::upload(void* dst, const void* src, std::size_t bytes) {
    timed("upload", "", 0, [&] { inner_.upload(dst, src, bytes); });
}
void ProfilingNnBackend::download(void* dst, const void* src, std::size_t bytes) {
    timed("download", "", 0, [&] { inner_.download(dst, src, bytes); });
}
void ProfilingNnBackend::copy(void* dst, const void* src, std::size_t bytes) {
    timed("copy", "", 0, [&] { inner_.copy(dst, src, bytes); });
}
void ProfilingNnBackend::zero(void* p, std::size_t bytes) {
    timed("zero", "", 0, [&] { inner_.zero(p, bytes); });
}

void ProfilingNnBackend::linear_forward(float* y, const float* x, const float* W, const float* b, std::int64_t N,
                                        std::int64_t I, std::int64_t O) {
    timed("linear_forward", linear_shape(N, I, O), 2.0 * N * I * O, [&] { inner_.linear_forward(y, x, W, b, N, I, O); });
}
void ProfilingNnBackend::linear_gelu_forward(float* g, float* h, const float* x, const float* W, const float* b,
                                             std::int64_t N, std::int64_t I, std::int64_t O) {
    timed("linear_gelu_forward", linear_shape(N, I, O), 2.0 * N * I * O,
          [&] { inner_.linear_gelu_forward(g, h, x, W, b, N, I, O); });
}
void ProfilingNnBackend::linear_gelu_forward_bf16(std::uint16_t* g16, float* h, const float* x, const float* W,
                                                  const float* b, std::int64_t N, std::int64_t I, std::int64_t O) {
    timed("linear_gelu_forward_bf16", linear_shape(N, I, O), 2.0 * N * I * O,
          [&] { inner_.linear_gelu_forward_bf16(g16, h, x, W, b, N, I, O); });
}
void ProfilingNnBackend::linear_forward_bf16x(float* y, const std::uint16_t* x16, const float* W, const float* b,
                                              std::int64_t N, std::int64_t I, std::int64_t O) {
    timed("linear_forward_bf16x", linear_shape(N, I, O), 2.0 * N * I * O,
          [&] { inner_.linear_forward_bf16x(y, x16, W, b, N, I, O); });
}
void ProfilingNnBackend::residual_rmsnorm_forward_bf16(float* x, std::uint16_t* y16, float* norm, const float* a,
                                                       const float* b, const float* gamma, std::int64_t N,
                                                       std::int64_t C) {
    timed("residual_rmsnorm_forward_bf16", dims({N, C}), 0,
          [&] { inner_.residual_rmsnorm_forward_bf16(x, y16, norm, a, b, gamma, N, C); });
}
void ProfilingNnBackend::linear_gelu_forward_bf16x(std::uint16_t* g16, float* h, const std::uint16_t* x16,
                                                   const float* W, const float* b, std::int64_t N, std::int64_t I,
                                                   std::int64_t O) {
    timed("linear_gelu_forward_bf16x", linear_shape(N, I, O), 2.0 * N * I * O,
          [&] { inner_.linear_gelu_forward_bf16x(g16, h, x16, W, b, N, I, O); });
}
void ProfilingNnBackend::gelu_linear_backward_bf16x(float* dx, float* dW, float* db, float* dg, const float* h,
                                                    const std::uint16_t* x16, const float* W, std::int64_t N,
                                                    std::int64_t I, std::int64_t O) {
    timed("gelu_linear_backward_bf16x", linear_shape(N, I, O), 2.0 * N * I * O * ((dx ? 1 : 0) + (dW ? 1 : 0)),
          [&] { inner_.gelu_linear_backward_bf16x(dx, dW, db, dg, h, x16, W, N, I, O); });
}
void ProfilingNnBackend::linear_backward_bf16x(float* dx, float* dW, float* db, const float* dy,
                                               const std::uint16_t* x16, const float* W, std::int64_t N, std::int64_t I,
                                               std::int64_t O) {
    timed("linear_backward_bf16x", linear_shape(N, I, O), 2.0 * N * I * O * ((dx ? 1 : 0) + (dW ? 1 : 0)),
          [&] { inner_.linear_backward_bf16x(dx, dW, db, dy, x16, W, N, I, O); });
}
void ProfilingNnBackend::linear_backward(float* dx, float* dW, float* db, const float* dy, const float* x,
                                         const float* W, std::int64_t N, std::int64_t I, std::int64_t O) {
    const double flops = 2.0 * N * I * O * ((dx ? 1 : 0) + (dW ? 1 : 0));
    timed("linear_backward", linear_shape(N, I, O), flops,
          [&] { inner_.linear_backward(dx, dW, db, dy, x, W, N, I, O); });
}
void ProfilingNnBackend::rmsnorm_linear_forward(float* y, float* xn, float* norm, const float* x, const float* gamma,
                                                const float* W, const float* b, std::int64_t N, std::int64_t I,
                                                std::int64_t O, bool gelu) {
    timed(gelu ? "rmsnorm_linear_gelu_forward" : "rmsnorm_linear_forward", linear_shape(N, I, O), 2.0 * N * I * O,
          [&] { inner_.rmsnorm_linear_forward(y, xn, norm, x, gamma, W, b, N, I, O, gelu); });
}
void ProfilingNnBackend::linear_residual_forward(float* out, float* t, const float* res, const float* x, const float* W,
                                                 const float* b, std::int64_t N, std::int64_t I, std::int64_t O) {
    timed("linear_residual_forward", linear_shape(N, I, O), 2.0 * N * I * O,
          [&] { inner_.linear_residual_forward(out, t, res, x, W, b, N, I, O); });
}
void ProfilingNnBackend::linear_rotary_forward(float* y, float* xn, float* norm, const float* x, const float* gamma,
                                               const float* W, const float* b, std::int64_t N, std::int64_t I,
                                               std::int64_t O, const LinearRotary& r) {
    timed(gamma ? "rmsnorm_linear_rotary_forward" : "linear_rotary_forward", linear_shape(N, I, O), 2.0 * N * I * O,
          [&] { inner_.linear_rotary_forward(y, xn, norm, x, gamma, W, b, N, I, O, r); });
}
void ProfilingNnBackend::gelu_linear_backward(float* dx, float* dW, float* db, float* dg, const float* h,
                                              const float* x, const float* W, std::int64_t N, std::int64_t I,
                                              std::int64_t O) {
    timed("gelu_linear_backward", linear_shape(N, I, O), 2.0 * N * I * O * ((dx ? 1 : 0) + (dW ? 1 : 0)),
          [&] { inner_.gelu_linear_backward(dx, dW, db, dg, h, x, W, N, I, O); });
}
void ProfilingNnBackend::linear_forward_shared(const SharedLinears& l, const float* x, std::int64_t N, std::int64_t I,
                                               std::int64_t O) {
    timed("linear_forward_shared", std::to_string(l.count) + "x" + linear_shape(N, I, O), 2.0 * l.count * N * I * O,
          [&] { inner_.linear_forward_shared(l, x, N, I, O); });
}
void ProfilingNnBackend::linear_backward_shared(float* dx, float* tmp, const SharedLinears& l, const float* x,
                                                std::int64_t N, std::int64_t I, std::int64_t O) {
    timed("linear_backward_shared", std::to_string(l.count) + "x" + linear_shape(N, I, O),
          2.0 * l.count * N * I * O * (dx ? 2 : 1), [&] { inner_.linear_backward_shared(dx, tmp, l, x, N, I, O); });
}
void ProfilingNnBackend::linear_forward_shared_bf16x(const SharedLinears& l, const std::uint16_t* x16, std::int64_t N,
                                                     std::int64_t I, std::int64_t O) {
    timed("linear_forward_shared_bf16x", std::to_string(l.count) + "x" + linear_shape(N, I, O),
          2.0 * l.count * N * I * O, [&] { inner_.linear_forward_shared_bf16x(l, x16, N, I, O); });
}
void ProfilingNnBackend::linear_backward_shared_bf16x(float* dx, float* tmp, const SharedLinears& l,
                                                      const std::uint16_t* x16, std::int64_t N, std::int64_t I,
                                                      std::int64_t O) {
    timed("linear_backward_shared_bf16x", std::to_string(l.count) + "x" + linear_shape(N, I, O),
          2.0 * l.count * N * I * O * (dx ? 2 : 1), [&] { inner_.linear_backward_shared_bf16x(dx, tmp, l, x16, N, I, O); });
}
void ProfilingNnBackend::rmsnorm_forward_bf16(std::uint16_t* y16, float* norm, const float* x, const float* gamma,
                                              std::int64_t N, std::int64_t C) {
    timed("rmsnorm_forward_bf16", dims({N, C}), 0, [&] { inner_.rmsnorm_forward_bf16(y16, norm, x, gamma, N, C); });
}
void ProfilingNnBackend::embedding_position_forward(float* out, const std::int32_t* ids, const float* table,
                                                    const std::int64_t* pos_index, const float* pos_table,
                                                    std::int64_t N, std::int64_t V, std::int64_t C) {
    timed("embedding_position_forward", "", 0,
          [&] { inner_.embedding_position_forward(out, ids, table, pos_index, pos_table, N, V, C); });
}
void ProfilingNnBackend::sample_rows(std::int32_t* ids, const float* logits, const std::int64_t* rows, std::int64_t n,
                                     std::int64_t V, std::int64_t ld, const SamplingParams& p, const double* u) {
    timed("sample_rows", dims({n, V}), 0, [&] { inner_.sample_rows(ids, logits, rows, n, V, ld, p, u); });
}
void ProfilingNnBackend::cross_entropy_linear_backward(float* dx, float* dW, float* db, float* dlogits, float dloss,
                                                       const float* logits, const float* lse,
                                                       const std::int32_t* targets, std::int32_t ignore_index,
                                                       std::int64_t valid, const float* x, const float* W,
                                                       std::int64_t N, std::int64_t I, std::int64_t V) {
    timed("cross_entropy_linear_backward", linear_shape(N, I, V), 2.0 * N * I * V * ((dx ? 1 : 0) + (dW ? 1 : 0)),
          [&] {
              inner_.cross_entropy_linear_backward(dx, dW, db, dlogits, dloss, logits, lse, targets, ignore_index,
                                                   valid, x, W, N, I, V);
          });
}
void ProfilingNnBackend::rmsnorm_forward(float* y, float* norm, const float* x, const float* gamma, std::int64_t N,
                                         std::int64_t C) {
    timed("rmsnorm_forward", dims({N, C}), 0, [&] { inner_.rmsnorm_forward(y, norm, x, gamma, N, C); });
}
void ProfilingNnBackend::rmsnorm_backward(float* dx, float* dgamma, const float* dy, const float* x,
                                          const float* gamma, const float* norm, std::int64_t N, std::int64_t C) {
    timed("rmsnorm_backward", dims({N, C}), 0, [&] { inner_.rmsnorm_backward(dx, dgamma, dy, x, gamma, norm, N, C); });
}
void ProfilingNnBackend::residual_rmsnorm_forward(float* x, float* y, float* norm, const float* a, const float* b,
                                                  const float* gamma, std::int64_t N, std::int64_t C) {
    timed("residual_rmsnorm_forward", dims({N, C}), 0,
          [&] { inner_.residual_rmsnorm_forward(x, y, norm, a, b, gamma, N, C); });
}
void ProfilingNnBackend::rmsnorm_backward_add(float* dx, float* dgamma, const float* dy, const float* x,
                                              const float* gamma, const float* norm, std::int64_t N, std::int64_t C) {
    timed("rmsnorm_backward_add", dims({N, C}), 0,
          [&] { inner_.rmsnorm_backward_add(dx, dgamma, dy, x, gamma, norm, N, C); });
}
void ProfilingNnBackend::gelu_forward(float* y, const float* x, std::int64_t N) {
    timed("gelu_forward", "", 0, [&] { inner_.gelu_forward(y, x, N); });
}
void ProfilingNnBackend::gelu_backward(float* dx, const float* dy, const float* x, std::int64_t N) {
    timed("gelu_backward", "", 0, [&] { inner_.gelu_backward(dx, dy, x, N); });
}
void ProfilingNnBackend::rotary_forward(float* y, const float* x, const RotaryView& t, std::int64_t B, std::int64_t N,
                                        std::int64_t H, std::int64_t D) {
    timed("rotary_forward", "", 0, [&] { inner_.rotary_forward(y, x, t, B, N, H, D); });
}
void ProfilingNnBackend::rotary_scale_forward(float* y, const float* x, const RotaryView& t, std::int64_t B,
                                              std::int64_t N, std::int64_t H, std::int64_t D, float s,
                                              std::int64_t scaled_heads) {
    timed("rotary_scale_forward", "", 0, [&] { inner_.rotary_scale_forward(y, x, t, B, N, H, D, s, scaled_heads); });
}
void ProfilingNnBackend::rotary_backward(float* dx, const float* dy, const RotaryView& t, std::int64_t B,
                                         std::int64_t N, std::int64_t H, std::int64_t D) {
    timed("rotary_backward", "", 0, [&] { inner_.rotary_backward(dx, dy, t, B, N, H, D); });
}
void ProfilingNnBackend::rotary_backward_scale(float* dx, const float* dy, const RotaryView& t, std::int64_t B,
                                               std::int64_t N, std::int64_t H, std::int64_t D, float s) {
    timed("rotary_backward_scale", "", 0, [&] { inner_.rotary_backward_scale(dx, dy, t, B, N, H, D, s); });
}
void ProfilingNnBackend::scale(float* x, float s, std::int64_t n) {
    timed("scale", "", 0, [&] { inner_.scale(x, s, n); });
}
void ProfilingNnBackend::attention_forward(float* out, float* probs, const float* q, const float* k, const float* v,
                                           const float* null_k, const float* null_v, const std::uint8_t* key_mask,
                                           const AttentionShape& s) {
    timed("attention_forward", attention_shape(s), attention_flops(s),
          [&] { inner_.attention_forward(out, probs, q, k, v, null_k, null_v, key_mask, s); });
}
void ProfilingNnBackend::attention_backward(float* dq, float* dk, float* dv, float* dnull_k, float* dnull_v,
                                            const float* dout, const float* probs, const float* q, const float* k,
                                            const float* v, const float* null_k, const float* null_v,
                                            const std::uint8_t* key_mask, const AttentionShape& s) {
    timed("attention_backward", attention_shape(s), 2 * attention_flops(s), [&] {
        inner_.attention_backward(dq, dk, dv, dnull_k, dnull_v, dout, probs, q, k, v, null_k, null_v, key_mask, s);
    });
}
void ProfilingNnBackend::attention_decode(float* out, const float* q, const DecodeCache& c, const std::int64_t* pos,
                                          const std::int64_t* seq, std::int64_t rows, std::int64_t H, std::int64_t D) {
    timed("attention_decode", dims({rows, H, c.L, D}) + (c.null_k ? " null" : "") + (c.k_new ? " append" : ""), 0,
          [&] { inner_.attention_decode(out, q, c, pos, seq, rows, H, D); });
}
void ProfilingNnBackend::embedding_forward(float* out, const std::int32_t* ids, const float* table, std::int64_t N,
                                           std::int64_t V, std::int64_t C) {
    timed("embedding_forward", "", 0, [&] { inner_.embedding_forward(out, ids, table, N, V, C); });
}
void ProfilingNnBackend::embedding_backward(float* dtable, const float* dout, const std::int32_t* ids, std::int64_t N,
                                            std::int64_t C) {
    timed("embedding_backward", "", 0, [&] { inner_.embedding_backward(dtable, dout, ids, N, C); });
}
void ProfilingNnBackend::position_add_forward(float* out, const float* pos, std::int64_t B, std::int64_t Tn,
                                              std::int64_t C) {
    timed("position_add_forward", "", 0, [&] { inner_.position_add_forward(out, pos, B, Tn, C); });
}
void ProfilingNnBackend::position_add_backward(float* dpos, const float* dout, std::int64_t B, std::int64_t Tn,
                                               std::int64_t C) {
    timed("position_add_backward", "", 0, [&] { inner_.position_add_backward(dpos, dout, B, Tn, C); });
}
float ProfilingNnBackend::cross_entropy_forward(float* lse, std::int64_t* valid, const float* logits,
                                                const std::int32_t* targets, std::int64_t N, std::int64_t V,
                                                std::int32_t ignore_index) {
    return timed("cross_entropy_forward", dims({N, V}), 0,
                 [&] { return inner_.cross_entropy_forward(lse, valid, logits, targets, N, V, ignore_index); });
}
void ProfilingNnBackend::cross_entropy_backward(float* dlogits, float dloss, const float* logits, const float* lse,
                                                const std::int32_t* targets, std::int64_t N, std::int64_t V,
                                                std::int32_t ignore_index, std::int64_t valid) {
    timed("cross_entropy_backward", dims({N, V}), 0, [&] {
        inner_.cross_entropy_backward(dlogits, dloss, logits, lse, targets, N, V, ignore_index, valid);
    });
}
void ProfilingNnBackend::residual_sum(float* dst, const float* a, const float* b, std::int64_t n) {
    timed("residual_sum", "", 0, [&] { inner_.residual_sum(dst, a, b, n); });
}
void ProfilingNnBackend::residual_add(float* dst, const float* src, std::int64_t n) {
    timed("residual_add", "", 0, [&] { inner_.residual_add(dst, src, n); });
}
void ProfilingNnBackend::gather_rows(float* dst, const float* src, const std::int64_t* index, std::int64_t rows,
                                     std::int64_t C) {
    timed("gather_rows", "", 0, [&] { inner_.gather_rows(dst, src, index, rows, C); });
}
void ProfilingNnBackend::gather_add_rows(float* dst, const float* src, const std::int64_t* index, std::int64_t rows,
                                         std::int64_t C) {
    timed("gather_add_rows", "", 0, [&] { inner_.gather_add_rows(dst, src, index, rows, C); });
}
void ProfilingNnBackend::copy_head_forward(float* logits, const float* xn, const CopyCandidate* cand,
                                           std::int64_t rows, std::int64_t k, std::int64_t V, std::int64_t C,
                                           const float* bias, const float* weight) {
    timed("copy_head_forward", dims({rows, k, C}), 0,
          [&] { inner_.copy_head_forward(logits, xn, cand, rows, k, V, C, bias, weight); });
}
void ProfilingNnBackend::copy_head_backward(float* dxn, float* dbias, float* dweight, const float* dlogits,
                                            const float* xn, const CopyCandidate* cand, std::int64_t rows,
                                            std::int64_t k, std::int64_t V, std::int64_t C, const float* weight) {
    timed("copy_head_backward", dims({rows, k, C}), 0,
          [&] { inner_.copy_head_backward(dxn, dbias, dweight, dlogits, xn, cand, rows, k, V, C, weight); });
}
void ProfilingNnBackend::scatter_rows(float* dst, const float* src, const std::int64_t* index, std::int64_t rows,
                                      std::int64_t C) {
    timed("scatter_rows", "", 0, [&] { inner_.scatter_rows(dst, src, index, rows, C); });
}
double ProfilingNnBackend::sum_squares(const float* x, std::int64_t n) {
    return timed("sum_squares", "", 0, [&] { return inner_.sum_squares(x, n); });
}
void ProfilingNnBackend::adamw_update(float* p, const float* g, float* m, float* v, const std::uint8_t* decay,
                                      std::int64_t n, const AdamWScalars& a) {
    timed("adamw_update", "", 0, [&] { inner_.adamw_update(p, g, m, v, decay, n, a); });
}

}  // namespace retro::nn
