// Pointers into a flat RETRO parameter (or gradient) buffer, bound by RETRO-pytorch's state_dict names
// (model/params.h): one struct per decoder and encoder layer, and RetroParams for the whole model. Shared by
// RetroModel (training; bound twice, to the parameters and to the gradients), the encoder (model/encoder.h)
// and generate/cached_decoder (KV-cached inference), so all read the same tensors and none looks names up.
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
struct RetroParams {
    T *token_emb = nullptr, *pos_emb = nullptr;
    T *to_dec_w = nullptr, *to_dec_b = nullptr;              // to_decoder_model_dim; null when enc_dim == dec_dim
    std::vector<EncoderLayerParams<T>> encoder;
    T *enc_norm_out = nullptr, *enc_project_w = nullptr, *enc_project_b = nullptr;
    std::vector<DecoderLayerParams<T>> decoder;
    T *dec_norm_out = nullptr, *to_logits_w = nullptr, *to_logits_b = nullptr;
    T *copy_bias = nullptr, *copy_weight = nullptr;   // config copy_head (nn/copy_head.h); null without
};

template <typename T>
RetroParams<T> bind_params(T* base, const ParamLayout& layout, const RetroConfig& config);

}  // namespace retro
