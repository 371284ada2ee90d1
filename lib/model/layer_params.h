// Pointers into a flat RETRO parameter (or gradient) buffer, one struct per decoder and encoder layer,
// bound by RETRO-pytorch's state_dict names (model/params.h). Shared by RetroModel (training) and
// generate/cached_decoder (KV-cached inference) so both read the same tensors.
#pragma once
#include <cstdint>
#include <vector>

#include "model/config.h"
#include "model/params.h"
#include "nn/attention_layer.h"
#include "nn/feed_forward.h"

namespace retro {

template <typename T>
struct DecoderLayerParams {
    nn::AttentionParams<T> attn, cca;   // cca only when has_cca
    nn::FeedForwardParams<T> ff;
    T *g_attn = nullptr, *g_cca = nullptr, *g_ff = nullptr;   // RMSNorm gains
    std::int64_t index = 0;                                   // 0-based
    bool has_cca = false;
};

template <typename T>
struct EncoderLayerParams {
    nn::AttentionParams<T> attn, cross;   // cross only when has_cross
    nn::FeedForwardParams<T> ff;
    T *g_attn = nullptr, *g_cross = nullptr, *g_ff = nullptr;
    std::int64_t index = 0;
    bool has_cross = false;
};

template <typename T>
std::vector<DecoderLayerParams<T>> bind_decoder_layers(T* base, const ParamLayout& layout, const RetroConfig& config);
template <typename T>
std::vector<EncoderLayerParams<T>> bind_encoder_layers(T* base, const ParamLayout& layout, const RetroConfig& config);

}  // namespace retro
