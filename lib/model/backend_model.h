// BackendRetroModel: the RETRO model of model/retro.h (RETRO-pytorch 0.3.9's architecture, forward and backward)
// composed over an nn::NnBackend (nn/nn_backend.h), so that the same composition trains on the GPU (the CUDA
// backend, issue 21) and on the CPU (HostNnBackend). Its parameters and gradients are two flat buffers in the
// backend's memory with ParamLayout's offsets (one all-reduce can serve them, issue 20), and every activation
// lives in one arena planned before the first step: backend_model_plan() gives its bytes for a shape without
// allocating, so a too-large configuration is refused before anything is touched.
// The composition is RetroModel's, op for op and in the same order (embedding, pre-norm blocks, the encoder in the
// first CCA layer, CCA's shift as row gathers, with config copy_head the copy head's gates on candidates found on
// the host, cross-entropy), so on HostNnBackend it gives RetroModel<float>'s
// loss and gradients bit for bit (tests/test_backend_model.cpp); on the GPU each op is held to the CPU by the op
// harness. RetroModel<T> stays the double-capable reference (gradient checks, golden files).
// provides: BackendRetroModel, BackendBatchShape, backend_model_plan, backend_model_scratch_bound
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "model/config.h"
#include "model/layer_params.h"
#include "model/params.h"
#include "model/retro.h"
#include "nn/nn_backend.h"

namespace retro {

// The shape an arena is planned for: batch B of n input tokens, k neighbours of r tokens per chunk (retrieval
// on when `retrieval` and the config has CCA layers and n >= chunk size).
struct BackendBatchShape {
    std::int64_t B = 0, n = 0, k = 0, r = 0;
    bool retrieval = false;
    bool operator==(const BackendBatchShape&) const = default;
};

// Bytes of the activation arena for `shape` (parameters and gradients not included: 2 * 4 * layout.total()) on
// `be` in its current mode: each attention layer's saved probabilities as be->attention_saved_floats says (on the GPU
// in the fused bf16 mode only the fused backward's stash: at the 172M config 3.6 GB less at 8 x 1024 tokens), and the
// logits' gradient [N, V] only where be->cross_entropy_linear_backward_uses_dlogits (with the head's weights
// trainable or not) or the copy head needs it; null: the full probabilities and dlogits, an upper bound for a
// backend that keeps them (the CUDA backend's fused stash of an attention with few keys can be larger, up to twice
// the probabilities: retro-train and retro-bench train plan with their backend).
std::size_t backend_model_plan(const RetroConfig& config, const BackendBatchShape& shape,
                               const nn::NnBackend* be = nullptr, bool head_trainable = true);
// An upper bound on the scratch a backend grows for a training step of this shape: the CUDA backend's attention-
// backward ds (the size of the largest probabilities, or where `be` runs a layer fused only its Delta), cross-entropy's
// row losses, the column sums' and dgamma's partials, the embedding backward's sort, with bf16 GEMM inputs its four
// bf16 copies (each sized for the operands its slot holds), and kLibraryWorkspaceAllowance.
std::size_t backend_model_scratch_bound(const RetroConfig& config, const BackendBatchShape& shape, bool bf16_gemm,
                                        const nn::NnBackend* be = nullptr);   // be: as backend_model_plan's
// The part of that bound allowed for the libraries' own workspaces and handles (cuBLAS, cuBLASLt's 32 MiB): they
// size them themselves; the rest bounds NnBackend::scratch_device_bytes.
inline constexpr std::size_t kLibraryWorkspaceAllowance = std::size_t{64} << 20;

class BackendRetroModel {
public:
    // Allocates parameters and gradients (zeroed) in `backend` memory; `backend` must outlive the model.
    BackendRetroModel(const RetroConfig& config, nn::NnBackend& backend);
    ~BackendRetroModel();
    BackendRetroModel(const BackendRetroModel&) = delete;
    BackendRetroModel& operator=(const BackendRetroModel&) = delete;

    const RetroConfig& config() const { return config_; }
    const ParamLayout& layout() const { return layout_; }
    nn::NnBackend& backend() { return be_; }
    float* params() { return params_; }   // backend memory, layout().total() floats
    float* grads() { return grads_; }
    void upload_params(const std::vector<float>& host);
    void download_params(std::vector<float>& host);
    void download_grads(std::vector<float>& host);
    void zero_grad();
    // As RetroModel::set_trainable: backward skips work that feeds only frozen tensors.
    void set_trainable(const std::vector<std::uint8_t>& per_entry);

    // As RetroModel::forward / backward (loss = mean CE over non-pad labels; backward adds d loss / d params
    // times `scale` into grads()). Token ids are checked on the host; a new shape re-plans the arena.
    float forward(const RetroBatch& batch);
    void backward(float scale = 1.0f);
    void download_logits(std::vector<float>& host);   // [B, n, num_tokens] of the last forward
    std::int64_t label_count() const { return valid_; }
    std::size_t arena_bytes() const { return arena_bytes_; }

    struct Plan;   // the arena's buffers (backend_model.cpp)

private:
    void plan(const BackendBatchShape& shape);
    void encoder_forward();    // the plan's retrieved ids and context -> E
    void encoder_backward();   // the plan's dE -> dctx (=), encoder parameter gradients (+=)

    RetroConfig config_;
    ParamLayout layout_;
    nn::NnBackend& be_;
    float* params_ = nullptr;
    float* grads_ = nullptr;
    RetroParams<float> p_, g_;   // bound to the backend's parameter and gradient buffers
    void* arena_ = nullptr;
    std::size_t arena_bytes_ = 0;
    std::unique_ptr<Plan> plan_;
    BackendBatchShape shape_;
    struct PlanMode {   // the backend's mode the plan was made in (its attention's saved floats depend on it, the
                        // feed-forwards' g's size on the bf16 activations) and the head's trainability (with the
                        // mode: whether the plan holds dlogits)
        bool fused_attention = false;
        nn::NnBackend::GemmInputs gemm_inputs = nn::NnBackend::GemmInputs::fp32;
        bool bf16_activations = true;
        bool head_trainable = true;
        bool operator==(const PlanMode&) const = default;
    };
    PlanMode current_mode() const;   // the backend's mode now, and the head's trainability
    PlanMode mode_;
    std::int64_t valid_ = 0;
    std::int64_t lowest_trainable_ = 0;
    bool head_trainable_ = true, encoder_trainable_ = true;
};

}  // namespace retro
