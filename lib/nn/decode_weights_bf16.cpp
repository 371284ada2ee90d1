// Implementation of decode_weights_bf16.h.
#include "nn/decode_weights_bf16.h"

#include <atomic>

#include "core/dtype.h"
#include "nn/gemv_avx512.h"

namespace retro::nn {

namespace {
std::atomic<const DecodeWeightsBf16*> g_installed{nullptr};
}  // namespace

bool bf16_decode_available() { return gemv_best_kernels() != nullptr; }

void DecodeWeightsBf16::add(const float* w, std::int64_t numel) {
    Tensor t;
    t.numel = numel;
    t.bf16.resize(static_cast<std::size_t>(numel));
    for (std::int64_t i = 0; i < numel; ++i) t.bf16[static_cast<std::size_t>(i)] = f32_to_bf16(w[i]);
    if (tensors_.insert_or_assign(w, std::move(t)).second) bytes_ += numel * 2;   // (a tensor added again: once)
}

const std::uint16_t* DecodeWeightsBf16::find(const float* w, std::int64_t count) const {
    auto it = tensors_.upper_bound(w);   // the first tensor starting after w: the one before may hold it
    if (it == tensors_.begin()) return nullptr;
    --it;
    const std::int64_t at = w - it->first;
    if (at + count > it->second.numel) return nullptr;
    return it->second.bf16.data() + at;
}

DecodeWeightsScope::DecodeWeightsScope(const DecodeWeightsBf16* table) : previous_(g_installed.exchange(table)) {}
DecodeWeightsScope::~DecodeWeightsScope() { g_installed.store(previous_); }

const DecodeWeightsBf16* decode_weights_bf16() { return g_installed.load(std::memory_order_relaxed); }

}  // namespace retro::nn
