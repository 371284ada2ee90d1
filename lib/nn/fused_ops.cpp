// RETRO_UNFUSE's names and parsing (nn/fused_ops.h).
#include "nn/fused_ops.h"

#include <array>
#include <string>

#include "core/error.h"

namespace retro::nn {
namespace {

constexpr std::array<std::string_view, static_cast<std::size_t>(FusedOp::count)> kNames = {
    "rmsnorm_linear_forward", "linear_residual_forward", "linear_rotary_forward",        "embedding_position_forward",
    "linear_forward_shared",  "linear_backward_shared",  "gelu_linear_backward",         "cross_entropy_linear_backward",
    "rmsnorm_backward_one_pass", "flash_backward_one_block",  "feed_forward_bf16",            "linear_backward_dy_copy",
    "gemm_bias_epilogue", "sample_rows", "flash_two_stages", "flash_fast_steps", "attention_saved_floats"};

}  // namespace

std::string_view fused_op_name(FusedOp op) {
    return kNames.at(static_cast<std::size_t>(op));
}

unsigned unfused_ops_requested(const char* list) {
    if (!list) return 0;
    const std::string_view all = list;
    unsigned bits = 0;
    std::size_t at = 0;
    while (at <= all.size()) {
        const std::size_t comma = all.find(',', at);
        const std::size_t end = comma == std::string_view::npos ? all.size() : comma;
        std::string_view name = all.substr(at, end - at);
        at = end + 1;
        while (!name.empty() && name.front() == ' ') name.remove_prefix(1);
        while (!name.empty() && name.back() == ' ') name.remove_suffix(1);
        if (name.empty()) continue;
        if (name == "all") {
            bits = (1u << static_cast<unsigned>(FusedOp::count)) - 1u;
            continue;
        }
        std::size_t i = 0;
        while (i < kNames.size() && kNames[i] != name) ++i;
        if (i == kNames.size()) {
            std::string valid = "all";
            for (std::string_view n : kNames) valid += ", " + std::string(n);
            user_error("RETRO_UNFUSE=", all, ": '", name, "' is not one of: ", valid);
        }
        bits |= 1u << i;
    }
    return bits;
}

}  // namespace retro::nn
