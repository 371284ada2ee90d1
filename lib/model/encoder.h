// The RETRO encoder over retrieved neighbours (RETRO.md B.7), forward and backward: the one implementation,
// used by RetroModel (training, every chunk of a batch) and CachedDecoder (decoding, each chunk once when it
// is finished). M neighbours of r tokens each:
//   h = token_emb[ids]                                                     [M, r, enc_dim], no absolute positions
//   layer j: h += SelfAttn(RMS h; key mask = ids != pad, rotary 0..r-1)
//            h += CrossAttn(RMS h, ctx; q rotary 0..r-1, k rotary 0..cs-1)   on enc_cross_attn_layers
//            h += FFN(RMS h)
//   E = project_out(RMS h)                                                 [M, r, dec_dim]
// ctx [M, cs, dec_dim]: for each neighbour, the raw decoder residual stream of its chunk (the first CCA
// layer's x after self-attention), written by encoder_context.
// backward: dctx (=); parameter gradients, token_emb's included (+=).
#pragma once
#include <cstdint>
#include <vector>

#include "model/config.h"
#include "model/layer_params.h"
#include "nn/attention_layer.h"
#include "nn/feed_forward.h"
#include "nn/rotary.h"

namespace retro {

// Activations of the last encoder_forward, for encoder_backward. The inputs (ids, mask, ctx) are not copied:
// they must outlive the backward call.
template <typename T>
struct EncoderCache {
    struct Layer {
        std::vector<T> h0, n0, r0, h1, n1, r1, h2, n2, r2;   // residual stream, normed, RMS per block
        nn::AttentionLayerCache<T> attn, cross;
        nn::FeedForwardCache<T> ff;
    };
    std::vector<Layer> layers;
    std::vector<T> pre, norm, rms;   // the stream before the final RMSNorm, after it, its RMS
    const std::int32_t* ids = nullptr;
    std::int64_t M = 0, r = 0;
    nn::RotaryTable<T> rot, rot_ctx;   // positions 0..r-1 (neighbour tokens), 0..cs-1 (context)
};

// ctx rows for one chunk's k neighbours: the chunk's cs rows of the decoder stream, repeated k times.
template <typename T>
void encoder_context(T* ctx, const T* chunk_rows, std::int64_t k, std::int64_t cs, std::int64_t dec_dim);

// E [M * r, dec_dim]; ids, mask [M, r]; ctx [M, cs, dec_dim].
template <typename T>
void encoder_forward(T* E, EncoderCache<T>& cache, const std::int32_t* ids, const std::uint8_t* mask, const T* ctx,
                     std::int64_t M, std::int64_t r, const RetroParams<T>& p, const RetroConfig& c);
template <typename T>
void encoder_backward(T* dctx, const RetroParams<T>& grads, const T* dE, EncoderCache<T>& cache,
                      const RetroParams<T>& p, const RetroConfig& c);

}  // namespace retro
