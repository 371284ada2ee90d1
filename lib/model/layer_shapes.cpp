#include "model/layer_shapes.h"

namespace retro {

namespace {
nn::AttentionLayerShape attention_shape(const RetroConfig& c, std::int64_t B, std::int64_t Nq, std::int64_t Nk,
                                        std::int64_t dim, std::int64_t context_dim) {
    nn::AttentionLayerShape s;
    s.B = B;
    s.Nq = Nq;
    s.Nk = Nk;
    s.dim = dim;
    s.context_dim = context_dim;
    s.heads = c.heads;
    s.dim_head = c.dim_head;
    return s;
}
}  // namespace

nn::AttentionLayerShape decoder_self_shape(const RetroConfig& c, std::int64_t B, std::int64_t n) {
    auto s = attention_shape(c, B, n, n, c.dec_dim, c.dec_dim);
    s.causal = true;
    return s;
}

nn::CcaShape decoder_cca_shape(const RetroConfig& c, std::int64_t B, std::int64_t n, std::int64_t k, std::int64_t r) {
    nn::CcaShape s;
    s.B = B;
    s.n = n;
    s.chunk = c.chunk_size;
    s.chunks = n / c.chunk_size;
    s.neighbours = k;
    s.retrieved = r;
    s.dim = c.dec_dim;
    s.heads = c.heads;
    s.dim_head = c.dim_head;
    s.rot_dim = c.rot_dim();
    s.aligned_queries = c.cca_query_positions == "aligned";
    return s;
}

nn::AttentionLayerShape encoder_self_shape(const RetroConfig& c, std::int64_t M, std::int64_t r) {
    return attention_shape(c, M, r, r, c.enc_dim, c.enc_dim);
}

nn::AttentionLayerShape encoder_cross_shape(const RetroConfig& c, std::int64_t M, std::int64_t r) {
    auto s = attention_shape(c, M, r, c.chunk_size, c.enc_dim, c.dec_dim);
    s.self = false;
    return s;
}

}  // namespace retro
