// The shapes of RETRO's attention layers, derived from a RetroConfig in this one place (RETRO.md B.4-B.7) and
// used by RetroModel (forward and backward), the encoder (model/encoder.h) and the KV-cached decoder:
//   decoder self-attention  [B, n] x [B, n], dec_dim, causal, rotary 0..n-1
//   decoder CCA             n tokens, floor(n/cs) chunks of k neighbours of r tokens, dec_dim
//   encoder self-attention  [M, r] x [M, r], enc_dim, bidirectional (pad mask)
//   encoder cross-attention [M, r] x [M, cs] of the dec_dim-wide decoder chunk
//   feed-forward            inner width 4 * dim (RP's FeedForward mult)
#pragma once
#include <cstdint>

#include "model/config.h"
#include "nn/attention_layer.h"
#include "nn/chunked_cross_attention.h"

namespace retro {

nn::AttentionLayerShape decoder_self_shape(const RetroConfig& c, std::int64_t B, std::int64_t n);
nn::CcaShape decoder_cca_shape(const RetroConfig& c, std::int64_t B, std::int64_t n, std::int64_t k, std::int64_t r);
nn::AttentionLayerShape encoder_self_shape(const RetroConfig& c, std::int64_t M, std::int64_t r);
nn::AttentionLayerShape encoder_cross_shape(const RetroConfig& c, std::int64_t M, std::int64_t r);
inline std::int64_t ff_inner(std::int64_t dim) { return 4 * dim; }

}  // namespace retro
