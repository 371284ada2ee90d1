// The GPU backend's fused ops that RETRO_UNFUSE can set aside (kernels/nn_backend_cuda.cu): each then runs as the
// ops it stands for (NnBackend's definition in nn/nn_backend.h; rmsnorm_backward_one_pass: the two-kernel rmsnorm
// backward; flash_backward_one_block: the fused attention's dQ and dK/dV kernels where Nq <= 64; feed_forward_bf16:
// the feed-forward's gelu output stored in fp32, NnBackend::set_bf16_activations(false); linear_backward_dy_copy:
// linear_backward's bf16 dy rounded in a pass of its own, not written by db's column-sum pass; gemm_bias_epilogue:
// the bf16 GEMMs' bias as rows written before a beta-1 GEMM, not cuBLASLt's epilogue; sample_rows: the logits
// rows downloaded and the next tokens drawn on the host, not on the device; flash_two_stages: the fused attention's
// bf16 kernels with one load stage, as RETRO_FLASH_KERNELS=mma-1stage; flash_fast_steps: the fused attention's
// backward classifies every entry of every step, as before session 27's branch-free steps; attention_saved_floats:
// the training arena keeps every attention's probabilities, as before session 29, not only the fused one's stash), so that a fused kernel that fails or misbehaves on some device can be told apart from the rest and
// bypassed without a rebuild (docs/gpu.md). Host code, so that the parsing is tested on every build.
// provides: FusedOp, fused_op_name, unfused_ops_requested
#pragma once
#include <string_view>

namespace retro::nn {

enum class FusedOp : unsigned {
    rmsnorm_linear_forward,
    linear_residual_forward,
    linear_rotary_forward,
    embedding_position_forward,
    linear_forward_shared,
    linear_backward_shared,
    gelu_linear_backward,
    cross_entropy_linear_backward,
    rmsnorm_backward_one_pass,
    flash_backward_one_block,
    feed_forward_bf16,
    linear_backward_dy_copy,
    gemm_bias_epilogue,
    sample_rows,
    flash_two_stages,
    flash_fast_steps,
    attention_saved_floats,
    count
};

// The op's name in RETRO_UNFUSE (the NnBackend method's name).
std::string_view fused_op_name(FusedOp op);

// A bit per FusedOp named in `list` (RETRO_UNFUSE's value: names separated by commas, spaces around them allowed,
// or `all`; null or empty: none). An unknown name is a UserError naming the valid ones.
unsigned unfused_ops_requested(const char* list);

}  // namespace retro::nn
