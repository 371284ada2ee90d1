// The op registry's cases of the bf16 activations (nn/nn_backend.h's *_bf16 / *_bf16x ops: activations that only
// linear layers read, stored as the bf16 their GEMMs round them to), registered by ops_nn_backend.cpp; and the shape
// label the backend cases share.
// provides: nn_cases::dims, ff_bf16_case, ff_input_bf16_case, attn_input_bf16_case
#pragma once
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>

#include "op_registry.h"

namespace retro::ops {
namespace nn_cases {
// "N8 I16 O4": a case's shape label
inline std::string dims(std::initializer_list<std::pair<const char*, std::int64_t>> d) {
    std::string s;
    for (const auto& [k, v] : d) {
        if (!s.empty()) s += ' ';
        s += k;
        s += std::to_string(v);
    }
    return s;
}
}  // namespace nn_cases

std::unique_ptr<Case> ff_bf16_case(std::int64_t N, std::int64_t I, std::int64_t O, std::uint64_t seed);
std::unique_ptr<Case> ff_input_bf16_case(std::int64_t N, std::int64_t I, std::int64_t O, std::uint64_t seed);
std::unique_ptr<Case> attn_input_bf16_case(int count, std::int64_t N, std::int64_t I, std::int64_t O, bool packed,
                                           std::uint64_t seed);

}  // namespace retro::ops
