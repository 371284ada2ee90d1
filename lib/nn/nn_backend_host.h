// HostNnBackend: nn/nn_backend.h on the CPU, in host memory, each op the nn/*.h function of the same name (so a
// model composed over NnBackend and run here gives the bits of the same composition over the nn ops directly).
// Graphs: while capturing, each op is recorded as a closure over the arguments it was called with (what a CUDA graph
// bakes in) and launch_graph replays them; the memory calls that a CUDA graph cannot hold throw, so code that is
// captured here is checked for the same rules the GPU imposes.
// provides: HostNnBackend
#pragma once
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "nn/nn_backend.h"

namespace retro::nn {

class HostNnBackend : public NnBackend {   // (not final: tests derive backends that answer otherwise)
public:
    std::string name() const override { return "cpu"; }
    void* alloc(std::size_t bytes) override;
    void release(void* p) noexcept override;
    void upload(void* dst, const void* host_src, std::size_t bytes) override;
    void download(void* host_dst, const void* src, std::size_t bytes) override;
    void copy(void* dst, const void* src, std::size_t bytes) override;
    void zero(void* p, std::size_t bytes) override;
    void synchronize() override { refuse_while_capturing("synchronize"); }
    void begin_capture() override;
    std::unique_ptr<BackendGraph> end_capture() override;
    void abort_capture() noexcept override;
    void launch_graph(const BackendGraph& graph) override;

    void linear_forward(float* y, const float* x, const float* W, const float* b, std::int64_t N, std::int64_t I,
                        std::int64_t O) override;
    void linear_gelu_forward(float* g, float* h, const float* x, const float* W, const float* b, std::int64_t N,
                             std::int64_t I, std::int64_t O) override;
    void linear_gelu_forward_bf16(std::uint16_t* g16, float* h, const float* x, const float* W, const float* b,
                                  std::int64_t N, std::int64_t I, std::int64_t O) override;
    void linear_forward_bf16x(float* y, const std::uint16_t* x16, const float* W, const float* b, std::int64_t N,
                              std::int64_t I, std::int64_t O) override;
    void rmsnorm_forward_bf16(std::uint16_t* y16, float* norm, const float* x, const float* gamma, std::int64_t N,
                              std::int64_t C) override;
    void residual_rmsnorm_forward_bf16(float* x, std::uint16_t* y16, float* norm, const float* a, const float* b,
                                       const float* gamma, std::int64_t N, std::int64_t C) override;
    void linear_gelu_forward_bf16x(std::uint16_t* g16, float* h, const std::uint16_t* x16, const float* W,
                                   const float* b, std::int64_t N, std::int64_t I, std::int64_t O) override;
    void linear_backward_bf16x(float* dx, float* dW, float* db, const float* dy, const std::uint16_t* x16,
                               const float* W, std::int64_t N, std::int64_t I, std::int64_t O) override;
    void linear_backward(float* dx, float* dW, float* db, const float* dy, const float* x, const float* W,
                         std::int64_t N, std::int64_t I, std::int64_t O) override;
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
    // In the bf16 GEMM mode with bf16 activations, the output's bf16 copy after the probabilities (the emulation of
    // the CUDA backend's bf16-only attention output, so that the layers' use of it is tested on every machine).
    std::int64_t attention_saved_floats(const AttentionShape& s, bool key_mask) const override;
    std::int64_t attention_output_bf16_offset(const AttentionShape& s, bool key_mask) const override;
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
    // the mode in which attention_forward keeps the output only as bf16 (attention_output_bf16_offset)
    bool keeps_output_bf16() const { return gemm_inputs() == GemmInputs::bf16 && bf16_activations(); }
    // Runs f now, or records it while capturing.
    template <typename F>
    void run(F&& f) {
        if (capturing_) recorded_.emplace_back(std::forward<F>(f));
        else f();
    }
    std::vector<float> scratch_;   // rmsnorm_backward_add's temporary
    std::vector<std::function<void()>> recorded_;
};

}  // namespace retro::nn
