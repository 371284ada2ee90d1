// ProfilingNnBackend: an NnBackend that runs every op on another one and times it, for "profile before optimising"
// on a GPU machine without nsys (retro-bench train --profile). Each op is bracketed by synchronize() calls, so its
// wall time is the op's own (its kernels and launches), at the cost of one host/device round trip per op: the
// profiled step is slower than a plain one and only the split between ops is meaningful. Ops are grouped by name and
// shape (a linear layer's N x I -> O, an attention's B x H x Nq x keys), with FLOPs for the GEMM-shaped ones.
// provides: ProfilingNnBackend, OpTiming
#pragma once
#include <chrono>
#include <map>
#include <string>
#include <type_traits>
#include <vector>

#include "nn/nn_backend.h"

namespace retro::nn {

struct OpTiming {
    std::string op;      // "linear_forward", "attention_backward", ...
    std::string shape;   // "8192x768->3072", "" where the shape does not matter
    long long calls = 0;
    double seconds = 0;
    double flops = 0;    // for linear and attention ops (matmul FLOPs, as model/model_flops.h counts them)
};

class ProfilingNnBackend final : public NnBackend {
public:
    explicit ProfilingNnBackend(NnBackend& inner) : inner_(inner) {
        set_bf16_activations(inner.bf16_activations());   // (the layers read it from this object)
    }
    std::string name() const override { return inner_.name(); }

    // every op timed so far, largest total first; reset() forgets them (after warm-up steps)
    std::vector<OpTiming> timings() const;
    void reset() { by_key_.clear(); }

    void* alloc(std::size_t bytes) override { return inner_.alloc(bytes); }
    std::size_t scratch_device_bytes() const override { return inner_.scratch_device_bytes(); }
    void release(void* p) noexcept override { inner_.release(p); }
    void upload(void* dst, const void* host_src, std::size_t bytes) override;
    void download(void* host_dst, const void* src, std::size_t bytes) override;
    void copy(void* dst, const void* src, std::size_t bytes) override;
    void zero(void* p, std::size_t bytes) override;
    void synchronize() override { inner_.synchronize(); }
    // graphs are not profiled: each op is timed between two synchronizes, which a capture cannot hold
    void begin_capture() override { throw InternalError("ProfilingNnBackend: graphs are off while profiling"); }
    std::unique_ptr<BackendGraph> end_capture() override { return inner_.end_capture(); }
    void abort_capture() noexcept override { inner_.abort_capture(); }
    void launch_graph(const BackendGraph& graph) override { inner_.launch_graph(graph); }

    void linear_forward(float* y, const float* x, const float* W, const float* b, std::int64_t N, std::int64_t I,
                        std::int64_t O) override;
    void linear_gelu_forward(float* g, float* h, const float* x, const float* W, const float* b, std::int64_t N,
                             std::int64_t I, std::int64_t O) override;
    void linear_gelu_forward_bf16(std::uint16_t* g16, float* h, const float* x, const float* W, const float* b,
                                  std::int64_t N, std::int64_t I, std::int64_t O) override;
    void linear_forward_bf16x(float* y, const std::uint16_t* x16, const float* W, const float* b, std::int64_t N,
                              std::int64_t I, std::int64_t O) override;
    void linear_backward_bf16x(float* dx, float* dW, float* db, const float* dy, const std::uint16_t* x16,
                               const float* W, std::int64_t N, std::int64_t I, std::int64_t O) override;
    void residual_rmsnorm_forward_bf16(float* x, std::uint16_t* y16, float* norm, const float* a, const float* b,
                                       const float* gamma, std::int64_t N, std::int64_t C) override;
    void rmsnorm_forward_bf16(std::uint16_t* y16, float* norm, const float* x, const float* gamma, std::int64_t N,
                              std::int64_t C) override;
    void linear_forward_shared_bf16x(const SharedLinears& l, const std::uint16_t* x16, std::int64_t N, std::int64_t I,
                                     std::int64_t O) override;
    void linear_backward_shared_bf16x(float* dx, float* tmp, const SharedLinears& l, const std::uint16_t* x16,
                                      std::int64_t N, std::int64_t I, std::int64_t O) override;
    void linear_gelu_forward_bf16x(std::uint16_t* g16, float* h, const std::uint16_t* x16, const float* W,
                                   const float* b, std::int64_t N, std::int64_t I, std::int64_t O) override;
    void gelu_linear_backward_bf16x(float* dx, float* dW, float* db, float* dg, const float* h,
                                    const std::uint16_t* x16, const float* W, std::int64_t N, std::int64_t I,
                                    std::int64_t O) override;
    void linear_backward(float* dx, float* dW, float* db, const float* dy, const float* x, const float* W,
                         std::int64_t N, std::int64_t I, std::int64_t O) override;
    void rmsnorm_linear_forward(float* y, float* xn, float* norm, const float* x, const float* gamma, const float* W,
                                const float* b, std::int64_t N, std::int64_t I, std::int64_t O, bool gelu) override;
    void linear_residual_forward(float* out, float* t, const float* res, const float* x, const float* W, const float* b,
                                 std::int64_t N, std::int64_t I, std::int64_t O) override;
    void linear_rotary_forward(float* y, float* xn, float* norm, const float* x, const float* gamma, const float* W,
                               const float* b, std::int64_t N, std::int64_t I, std::int64_t O,
                               const LinearRotary& r) override;
    void gelu_linear_backward(float* dx, float* dW, float* db, float* dg, const float* h, const float* x,
                              const float* W, std::int64_t N, std::int64_t I, std::int64_t O) override;
    void embedding_position_forward(float* out, const std::int32_t* ids, const float* table,
                                    const std::int64_t* pos_index, const float* pos_table, std::int64_t N,
                                    std::int64_t V, std::int64_t C) override;
    void sample_rows(std::int32_t* ids, const float* logits, const std::int64_t* rows, std::int64_t n, std::int64_t V,
                     std::int64_t ld, const SamplingParams& p, const double* u) override;
    void cross_entropy_linear_backward(float* dx, float* dW, float* db, float* dlogits, float dloss,
                                       const float* logits, const float* lse, const std::int32_t* targets,
                                       std::int32_t ignore_index, std::int64_t valid, const float* x, const float* W,
                                       std::int64_t N, std::int64_t I, std::int64_t V) override;
    void linear_forward_shared(const SharedLinears& l, const float* x, std::int64_t N, std::int64_t I,
                               std::int64_t O) override;
    void linear_backward_shared(float* dx, float* tmp, const SharedLinears& l, const float* x, std::int64_t N,
                                std::int64_t I, std::int64_t O) override;
    void rmsnorm_forward(float* y, float* norm, const float* x, const float* gamma, std::int64_t N,
                         std::int64_t C) override;
    void rmsnorm_backward(float* dx, float* dgamma, const float* dy, const float* x, const float* gamma,
                          const float* norm, std::int64_t N, std::int64_t C) override;
    void residual_rmsnorm_forward(float* x, float* y, float* norm, const float* a, const float* b, const float* gamma,
                                  std::int64_t N, std::int64_t C) override;
    void rmsnorm_backward_add(float* dx, float* dgamma, const float* dy, const float* x, const float* gamma,
                              const float* norm, std::int64_t N, std::int64_t C) override;
    void gelu_forward(float* y, const float* x, std::int64_t N) override;
    void gelu_backward(float* dx, const float* dy, const float* x, std::int64_t N) override;
    void rotary_forward(float* y, const float* x, const RotaryView& t, std::int64_t B, std::int64_t N, std::int64_t H,
                        std::int64_t D) override;
    void rotary_backward(float* dx, const float* dy, const RotaryView& t, std::int64_t B, std::int64_t N,
                         std::int64_t H, std::int64_t D) override;
    void rotary_backward_scale(float* dx, const float* dy, const RotaryView& t, std::int64_t B, std::int64_t N,
                               std::int64_t H, std::int64_t D, float s) override;
    void rotary_scale_forward(float* y, const float* x, const RotaryView& t, std::int64_t B, std::int64_t N,
                              std::int64_t H, std::int64_t D, float s, std::int64_t scaled_heads) override;
    void scale(float* x, float s, std::int64_t n) override;
    // the inner backend's answer in the modes set on this object (as start() hands them over before each op)
    std::int64_t attention_saved_floats(const AttentionShape& s, bool key_mask) const override {
        hand_over_modes();
        return inner_.attention_saved_floats(s, key_mask);
    }
    std::int64_t attention_output_bf16_offset(const AttentionShape& s, bool key_mask) const override {
        hand_over_modes();
        return inner_.attention_output_bf16_offset(s, key_mask);
    }
    bool cross_entropy_linear_backward_uses_dlogits(bool with_dW, bool with_db) const override {
        hand_over_modes();
        return inner_.cross_entropy_linear_backward_uses_dlogits(with_dW, with_db);
    }
    void attention_forward(float* out, float* probs, const float* q, const float* k, const float* v,
                           const float* null_k, const float* null_v, const std::uint8_t* key_mask,
                           const AttentionShape& s) override;
    void attention_backward(float* dq, float* dk, float* dv, float* dnull_k, float* dnull_v, const float* dout,
                            const float* probs, const float* q, const float* k, const float* v, const float* null_k,
                            const float* null_v, const std::uint8_t* key_mask, const AttentionShape& s) override;
    void attention_decode(float* out, const float* q, const DecodeCache& c, const std::int64_t* pos,
                          const std::int64_t* seq, std::int64_t rows, std::int64_t H, std::int64_t D) override;
    void embedding_forward(float* out, const std::int32_t* ids, const float* table, std::int64_t N, std::int64_t V,
                           std::int64_t C) override;
    void embedding_backward(float* dtable, const float* dout, const std::int32_t* ids, std::int64_t N,
                            std::int64_t C) override;
    void position_add_forward(float* out, const float* pos, std::int64_t B, std::int64_t Tn, std::int64_t C) override;
    void position_add_backward(float* dpos, const float* dout, std::int64_t B, std::int64_t Tn,
                               std::int64_t C) override;
    float cross_entropy_forward(float* lse, std::int64_t* valid, const float* logits, const std::int32_t* targets,
                                std::int64_t N, std::int64_t V, std::int32_t ignore_index) override;
    void cross_entropy_backward(float* dlogits, float dloss, const float* logits, const float* lse,
                                const std::int32_t* targets, std::int64_t N, std::int64_t V, std::int32_t ignore_index,
                                std::int64_t valid) override;
    void residual_sum(float* dst, const float* a, const float* b, std::int64_t n) override;
    void residual_add(float* dst, const float* src, std::int64_t n) override;
    void gather_rows(float* dst, const float* src, const std::int64_t* index, std::int64_t rows,
                     std::int64_t C) override;
    void gather_add_rows(float* dst, const float* src, const std::int64_t* index, std::int64_t rows,
                         std::int64_t C) override;
    void copy_head_forward(float* logits, const float* xn, const CopyCandidate* cand, std::int64_t rows, std::int64_t k,
                           std::int64_t V, std::int64_t C, const float* bias, const float* weight) override;
    void copy_head_backward(float* dxn, float* dbias, float* dweight, const float* dlogits, const float* xn,
                            const CopyCandidate* cand, std::int64_t rows, std::int64_t k, std::int64_t V, std::int64_t C,
                            const float* weight) override;
    void scatter_rows(float* dst, const float* src, const std::int64_t* index, std::int64_t rows,
                      std::int64_t C) override;
    double sum_squares(const float* x, std::int64_t n) override;
    void adamw_update(float* p, const float* g, float* m, float* v, const std::uint8_t* decay, std::int64_t n,
                      const AdamWScalars& a) override;

private:
    // Runs f on the inner backend between two synchronize() calls and adds its wall time to (op, shape).
    template <typename F>
    auto timed(const char* op, const std::string& shape, double flops, F&& f) {
        start();
        if constexpr (std::is_void_v<std::invoke_result_t<F>>) {
            f();
            stop(op, shape, flops);
        } else {
            auto r = f();
            stop(op, shape, flops);
            return r;
        }
    }
    void start();
    void stop(const char* op, const std::string& shape, double flops);
    // the modes are set on this object; the inner backend runs the ops and answers the queries in them
    void hand_over_modes() const {
        inner_.set_gemm_inputs(gemm_inputs());
        inner_.set_fused_attention(fused_attention());
        inner_.set_bf16_activations(bf16_activations());
    }

    NnBackend& inner_;
    std::map<std::string, OpTiming> by_key_;
    std::chrono::steady_clock::time_point t0_;
};

}  // namespace retro::nn
