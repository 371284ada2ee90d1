#include "model/layer_params.h"

#include <string>

namespace retro {

namespace {
template <typename T>
struct Binder {
    T* base;
    const ParamLayout& layout;
    T* at(const std::string& name) const { return base + layout.offset(name); }
    nn::AttentionParams<T> attention(const std::string& p, bool null_kv) const {
        nn::AttentionParams<T> a;
        a.to_q = at(p + "to_q.weight");
        a.to_k = at(p + "to_k.weight");
        a.to_v = at(p + "to_v.weight");
        a.to_out_w = at(p + "to_out.weight");
        a.to_out_b = at(p + "to_out.bias");
        if (null_kv) {
            a.null_k = at(p + "null_k");
            a.null_v = at(p + "null_v");
        }
        return a;
    }
    nn::FeedForwardParams<T> ff(const std::string& p) const {
        return {at(p + "ff.0.weight"), at(p + "ff.0.bias"), at(p + "ff.3.weight"), at(p + "ff.3.bias")};
    }
};
template <typename T>
std::vector<DecoderLayerParams<T>> bind_decoder_layers(const Binder<T>& b, const RetroConfig& c) {
    std::vector<DecoderLayerParams<T>> layers(static_cast<std::size_t>(c.dec_depth));
    for (std::int64_t i = 0; i < c.dec_depth; i++) {
        auto& L = layers[static_cast<std::size_t>(i)];
        const std::string p = "decoder.layers." + std::to_string(i) + ".";
        L.index = i;
        L.attn = b.attention(p + "0.fn.", false);
        L.g_attn = b.at(p + "0.norm.gamma");
        L.has_cca = c.dec_has_cross(i + 1);
        if (L.has_cca) {
            L.cca = b.attention(p + "1.fn.cross_attn.", true);
            L.g_cca = b.at(p + "1.norm.gamma");
        }
        L.ff = b.ff(p + "2.fn.");
        L.g_ff = b.at(p + "2.norm.gamma");
    }
    return layers;
}

template <typename T>
std::vector<EncoderLayerParams<T>> bind_encoder_layers(const Binder<T>& b, const RetroConfig& c) {
    std::vector<EncoderLayerParams<T>> layers(static_cast<std::size_t>(c.enc_depth));
    for (std::int64_t i = 0; i < c.enc_depth; i++) {
        auto& L = layers[static_cast<std::size_t>(i)];
        const std::string p = "encoder.layers." + std::to_string(i) + ".";
        L.index = i;
        L.attn = b.attention(p + "0.fn.", false);
        L.g_attn = b.at(p + "0.norm.gamma");
        L.has_cross = c.enc_has_cross(i + 1);
        if (L.has_cross) {
            L.cross = b.attention(p + "1.fn.", false);
            L.g_cross = b.at(p + "1.norm.gamma");
        }
        L.ff = b.ff(p + "2.fn.");
        L.g_ff = b.at(p + "2.norm.gamma");
    }
    return layers;
}

}  // namespace

template <typename T>
RetroParams<T> bind_params(T* base, const ParamLayout& layout, const RetroConfig& c) {
    const Binder<T> b{base, layout};
    RetroParams<T> p;
    p.token_emb = b.at("token_emb.weight");
    p.pos_emb = b.at("pos_emb.weight");
    if (c.enc_dim != c.dec_dim) {
        p.to_dec_w = b.at("to_decoder_model_dim.weight");
        p.to_dec_b = b.at("to_decoder_model_dim.bias");
    }
    p.encoder = bind_encoder_layers(b, c);
    p.enc_norm_out = b.at("encoder.norm_out.gamma");
    p.enc_project_w = b.at("encoder.project_out.weight");
    p.enc_project_b = b.at("encoder.project_out.bias");
    p.decoder = bind_decoder_layers(b, c);
    p.dec_norm_out = b.at("decoder.norm_out.gamma");
    p.to_logits_w = c.tie_embeddings ? p.token_emb : b.at("to_logits.weight");   // tied: the same tensor, so the
                                                                                  // head's gradient adds to token_emb's
    p.to_logits_b = b.at("to_logits.bias");
    if (c.copy_head) {
        p.copy_bias = b.at("copy_head.bias");
        p.copy_weight = b.at("copy_head.weight");
    }
    return p;
}

template RetroParams<float> bind_params<float>(float*, const ParamLayout&, const RetroConfig&);
template RetroParams<double> bind_params<double>(double*, const ParamLayout&, const RetroConfig&);

}  // namespace retro
