#include "model/retro.h"

#include <algorithm>
#include <cstring>
#include <memory>

#include "core/error.h"
#include "nn/cross_entropy.h"
#include "nn/embedding.h"
#include "nn/linear.h"
#include "nn/parallel.h"
#include "nn/rmsnorm.h"

namespace retro {

namespace {
std::vector<std::int64_t> iota(std::int64_t n) {
    std::vector<std::int64_t> v(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; i++) v[i] = i;
    return v;
}
template <typename T>
void add_into(T* dst, const T* src, std::int64_t n) {
    nn::ranges(n, n, [&](std::int64_t b, std::int64_t e, int) {
        for (std::int64_t i = b; i < e; i++) dst[i] += src[i];
    });
}
template <typename T>
void sum_into(T* dst, const T* a, const T* b, std::int64_t n) {
    nn::ranges(n, n, [&](std::int64_t s, std::int64_t e, int) {
        for (std::int64_t i = s; i < e; i++) dst[i] = a[i] + b[i];
    });
}
}  // namespace

template <typename T>
RetroModel<T>::RetroModel(const RetroConfig& config) : config_(config), layout_(config) {
    config_.validate("model config");
    params_.assign(static_cast<std::size_t>(layout_.total()), T(0));
    grads_.assign(params_.size(), T(0));
    bind_layers(params_.data(), dec_, enc_);
    bind_layers(grads_.data(), dec_g_, enc_g_);
}

template <typename T>
void RetroModel<T>::bind_layers(T* base, std::vector<DecoderLayer>& dec, std::vector<EncoderLayer>& enc) {
    const auto dp = bind_decoder_layers(base, layout_, config_);
    dec.assign(dp.size(), DecoderLayer{});
    for (std::size_t i = 0; i < dp.size(); i++) static_cast<DecoderLayerParams<T>&>(dec[i]) = dp[i];
    const auto ep = bind_encoder_layers(base, layout_, config_);
    enc.assign(ep.size(), EncoderLayer{});
    for (std::size_t i = 0; i < ep.size(); i++) static_cast<EncoderLayerParams<T>&>(enc[i]) = ep[i];
}

template <typename T>
void RetroModel<T>::zero_grad() {
    std::fill(grads_.begin(), grads_.end(), T(0));
}

template <typename T>
T RetroModel<T>::forward(const RetroBatch& batch) {
    const auto& c = config_;
    const std::int64_t B = batch.B, n = batch.n, Ce = c.enc_dim, Cd = c.dec_dim, V = c.num_tokens, cs = c.chunk_size;
    RETRO_CHECK(B > 0 && n > 0, "empty batch");
    RETRO_CHECK(static_cast<std::int64_t>(batch.seq.size()) == B * (n + 1), "seq holds ", batch.seq.size(),
                " ids, expected B*(n+1) = ", B * (n + 1));
    if (n > c.max_seq_len)
        user_error_in("batch", cat("sequence length ", n, " exceeds the model's max_seq_len ", c.max_seq_len));
    B_ = B;
    n_ = n;
    retrieval_ = batch.has_retrieval() && c.first_cca_layer() > 0;
    l_ = n / cs;
    k_ = batch.k;
    r_ = batch.r;
    if (batch.has_retrieval()) {
        RETRO_CHECK(static_cast<std::int64_t>(batch.retrieved.size()) == B * l_ * k_ * r_, "retrieved holds ",
                    batch.retrieved.size(), " ids, expected B*l*k*r = ", B * l_ * k_ * r_);
        RETRO_CHECK(r_ >= cs, "retrieved length ", r_, " shorter than the chunk size ", cs);
    }
    if (retrieval_ && l_ == 0) retrieval_ = false;   // no complete chunk: CCA outputs 0, RP skips nothing else
    M_ = B * l_ * k_;

    inputs_.resize(static_cast<std::size_t>(B * n));
    labels_.resize(inputs_.size());
    for (std::int64_t b = 0; b < B; b++)
        for (std::int64_t t = 0; t < n; t++) {
            inputs_[b * n + t] = batch.seq[b * (n + 1) + t];
            labels_[b * n + t] = batch.seq[b * (n + 1) + t + 1];
        }
    for (auto id : batch.seq)
        if (id < 0 || id >= V) user_error_in("batch", cat("token id ", id, " outside the vocabulary [0, ", V, ")"));

    const T* tok = params_.data() + layout_.offset("token_emb.weight");
    embed_.resize(static_cast<std::size_t>(B * n * Ce));
    nn::embedding_forward(embed_.data(), inputs_.data(), tok, B * n, V, Ce);
    nn::position_add_forward(embed_.data(), params_.data() + layout_.offset("pos_emb.weight"), B, n, Ce);
    std::vector<T> x(static_cast<std::size_t>(B * n * Cd));
    if (Ce != Cd)
        nn::linear_forward(x.data(), embed_.data(), param("to_decoder_model_dim.weight"),
                           param("to_decoder_model_dim.bias"), B * n, Ce, Cd);
    else
        x = embed_;

    rot_dec_ = nn::rotary_table<T>(iota(n), c.rot_dim());
    if (retrieval_) {
        retrieved_ = batch.retrieved;
        for (auto id : retrieved_)
            if (id < 0 || id >= V)
                user_error_in("batch", cat("retrieved token id ", id, " outside the vocabulary [0, ", V, ")"));
        mask_.resize(retrieved_.size());
        for (std::size_t i = 0; i < retrieved_.size(); i++) mask_[i] = retrieved_[i] != c.pad_id;
        rot_enc_ = nn::rotary_table<T>(iota(r_), c.rot_dim());
        rot_enc_ctx_ = nn::rotary_table<T>(iota(cs), c.rot_dim());
    }

    nn::AttentionLayerShape self;
    self.B = B;
    self.Nq = self.Nk = n;
    self.dim = self.context_dim = Cd;
    self.heads = c.heads;
    self.dim_head = c.dim_head;
    self.causal = true;
    nn::CcaShape cca;
    cca.B = B;
    cca.n = n;
    cca.chunk = cs;
    cca.chunks = l_;
    cca.neighbours = k_;
    cca.retrieved = r_;
    cca.dim = Cd;
    cca.heads = c.heads;
    cca.dim_head = c.dim_head;
    cca.rot_dim = c.rot_dim();

    const std::int64_t N = B * n, sz = N * Cd;
    std::vector<T> tmp(static_cast<std::size_t>(sz));
    bool encoded = false;
    for (auto& L : dec_) {
        L.x0 = x;
        L.n0.resize(x.size());
        L.r0.resize(static_cast<std::size_t>(N));
        nn::rmsnorm_forward(L.n0.data(), L.r0.data(), L.x0.data(), L.g_attn, N, Cd);
        nn::attention_layer_forward(tmp.data(), L.attn_cache, L.n0.data(), (const T*)nullptr, nullptr, &rot_dec_,
                                    &rot_dec_, L.attn, self);
        L.x1.resize(x.size());
        sum_into(L.x1.data(), L.x0.data(), tmp.data(), sz);
        if (L.has_cca && retrieval_) {
            if (!encoded) {   // the encoder's context: raw residual stream, chunk u repeated per neighbour
                ctx_.resize(static_cast<std::size_t>(M_ * cs * Cd));
                for (std::int64_t m = 0; m < M_; m++) {
                    const std::int64_t b = m / (l_ * k_), u = (m / k_) % l_;
                    std::memcpy(ctx_.data() + m * cs * Cd, L.x1.data() + (b * n + u * cs) * Cd, sizeof(T) * cs * Cd);
                }
                encoder_forward();
                encoded = true;
            }
            L.n1.resize(x.size());
            L.r1.resize(static_cast<std::size_t>(N));
            nn::rmsnorm_forward(L.n1.data(), L.r1.data(), L.x1.data(), L.g_cca, N, Cd);
            nn::cca_forward(tmp.data(), L.cca_cache, L.n1.data(), E_.data(), mask_.data(), L.cca, cca);
            L.x2.resize(x.size());
            sum_into(L.x2.data(), L.x1.data(), tmp.data(), sz);
        } else {
            L.x2 = L.x1;
        }
        L.n2.resize(x.size());
        L.r2.resize(static_cast<std::size_t>(N));
        nn::rmsnorm_forward(L.n2.data(), L.r2.data(), L.x2.data(), L.g_ff, N, Cd);
        nn::feed_forward_forward(tmp.data(), L.ff_cache, L.n2.data(), L.ff, N, Cd, 4 * Cd);
        sum_into(x.data(), L.x2.data(), tmp.data(), sz);
    }
    x_final_ = x;
    xn_final_.resize(x.size());
    rms_final_.resize(static_cast<std::size_t>(N));
    nn::rmsnorm_forward(xn_final_.data(), rms_final_.data(), x_final_.data(), param("decoder.norm_out.gamma"), N, Cd);
    logits_.resize(static_cast<std::size_t>(N * V));
    nn::linear_forward(logits_.data(), xn_final_.data(), param("to_logits.weight"), param("to_logits.bias"), N, Cd, V);
    lse_.resize(static_cast<std::size_t>(N));
    return nn::cross_entropy_forward(lse_.data(), &valid_, logits_.data(), labels_.data(), N, V, c.pad_id);
}

template <typename T>
void RetroModel<T>::encoder_forward() {
    const auto& c = config_;
    const std::int64_t Ce = c.enc_dim, Cd = c.dec_dim, M = M_, r = r_, R = M * r, sz = R * Ce;
    std::vector<T> h(static_cast<std::size_t>(sz)), tmp(static_cast<std::size_t>(sz));
    nn::embedding_forward(h.data(), retrieved_.data(), param("token_emb.weight"), R, c.num_tokens, Ce);
    nn::AttentionLayerShape self;
    self.B = M;
    self.Nq = self.Nk = r;
    self.dim = self.context_dim = Ce;
    self.heads = c.heads;
    self.dim_head = c.dim_head;
    nn::AttentionLayerShape cross = self;
    cross.Nk = c.chunk_size;
    cross.context_dim = Cd;
    cross.self = false;
    for (auto& L : enc_) {
        L.h0 = h;
        L.n0.resize(h.size());
        L.r0.resize(static_cast<std::size_t>(R));
        nn::rmsnorm_forward(L.n0.data(), L.r0.data(), L.h0.data(), L.g_attn, R, Ce);
        nn::attention_layer_forward(tmp.data(), L.attn_cache, L.n0.data(), (const T*)nullptr, mask_.data(), &rot_enc_,
                                    &rot_enc_, L.attn, self);
        L.h1.resize(h.size());
        sum_into(L.h1.data(), L.h0.data(), tmp.data(), sz);
        if (L.has_cross) {
            L.n1.resize(h.size());
            L.r1.resize(static_cast<std::size_t>(R));
            nn::rmsnorm_forward(L.n1.data(), L.r1.data(), L.h1.data(), L.g_cross, R, Ce);
            nn::attention_layer_forward(tmp.data(), L.cross_cache, L.n1.data(), (const T*)ctx_.data(), nullptr,
                                        &rot_enc_, &rot_enc_ctx_, L.cross, cross);
            L.h2.resize(h.size());
            sum_into(L.h2.data(), L.h1.data(), tmp.data(), sz);
        } else {
            L.h2 = L.h1;
        }
        L.n2.resize(h.size());
        L.r2.resize(static_cast<std::size_t>(R));
        nn::rmsnorm_forward(L.n2.data(), L.r2.data(), L.h2.data(), L.g_ff, R, Ce);
        nn::feed_forward_forward(tmp.data(), L.ff_cache, L.n2.data(), L.ff, R, Ce, 4 * Ce);
        sum_into(h.data(), L.h2.data(), tmp.data(), sz);
    }
    E_pre_ = h;
    E_norm_.resize(h.size());
    E_rms_.resize(static_cast<std::size_t>(R));
    nn::rmsnorm_forward(E_norm_.data(), E_rms_.data(), E_pre_.data(), param("encoder.norm_out.gamma"), R, Ce);
    E_.resize(static_cast<std::size_t>(R * Cd));
    nn::linear_forward(E_.data(), E_norm_.data(), param("encoder.project_out.weight"),
                       param("encoder.project_out.bias"), R, Ce, Cd);
}

template <typename T>
void RetroModel<T>::backward(T scale) {
    const auto& c = config_;
    const std::int64_t B = B_, n = n_, N = B * n, Ce = c.enc_dim, Cd = c.dec_dim, V = c.num_tokens, cs = c.chunk_size,
                       sz = N * Cd;
    std::unique_ptr<T[]> dlogits(new T[static_cast<std::size_t>(N * V)]);   // every element written: no zero fill
    nn::cross_entropy_backward(dlogits.get(), scale, logits_.data(), lse_.data(), labels_.data(), N, V, c.pad_id,
                               valid_);
    std::vector<T> dxn(static_cast<std::size_t>(sz)), dx(dxn.size()), dn(dxn.size()), dtmp(dxn.size());
    nn::linear_backward(dxn.data(), grad("to_logits.weight"), grad("to_logits.bias"), dlogits.get(),
                        xn_final_.data(), param("to_logits.weight"), N, Cd, V);
    dlogits.reset();
    nn::rmsnorm_backward(dx.data(), grad("decoder.norm_out.gamma"), dxn.data(), x_final_.data(),
                         param("decoder.norm_out.gamma"), rms_final_.data(), N, Cd);

    nn::AttentionLayerShape self;
    self.B = B;
    self.Nq = self.Nk = n;
    self.dim = self.context_dim = Cd;
    self.heads = c.heads;
    self.dim_head = c.dim_head;
    self.causal = true;
    nn::CcaShape cca;
    cca.B = B;
    cca.n = n;
    cca.chunk = cs;
    cca.chunks = l_;
    cca.neighbours = k_;
    cca.retrieved = r_;
    cca.dim = Cd;
    cca.heads = c.heads;
    cca.dim_head = c.dim_head;
    cca.rot_dim = c.rot_dim();
    std::vector<T> dE, dE_part;
    if (retrieval_) {
        dE.assign(E_.size(), T(0));
        dE_part.resize(E_.size());
    }
    const std::int64_t first = c.first_cca_layer() - 1;
    for (std::int64_t i = c.dec_depth - 1; i >= 0; i--) {
        auto& L = dec_[i];
        auto& G = dec_g_[i];
        nn::feed_forward_backward(dn.data(), G.ff, dx.data(), L.ff_cache, L.ff, N, Cd, 4 * Cd);
        nn::rmsnorm_backward(dtmp.data(), G.g_ff, dn.data(), L.x2.data(), L.g_ff, L.r2.data(), N, Cd);
        add_into(dx.data(), dtmp.data(), sz);
        if (L.has_cca && retrieval_) {
            nn::cca_backward(dn.data(), dE_part.data(), G.cca, dx.data(), L.cca_cache, L.cca, cca);
            add_into(dE.data(), dE_part.data(), static_cast<std::int64_t>(dE.size()));
            nn::rmsnorm_backward(dtmp.data(), G.g_cca, dn.data(), L.x1.data(), L.g_cca, L.r1.data(), N, Cd);
            add_into(dx.data(), dtmp.data(), sz);
            if (i == first) encoder_backward(dE, dx);
        }
        nn::attention_layer_backward(dn.data(), (T*)nullptr, G.attn, dx.data(), L.attn_cache, L.attn, self);
        nn::rmsnorm_backward(dtmp.data(), G.g_attn, dn.data(), L.x0.data(), L.g_attn, L.r0.data(), N, Cd);
        add_into(dx.data(), dtmp.data(), sz);
    }
    std::vector<T> dembed;
    const T* de = dx.data();
    if (Ce != Cd) {
        dembed.resize(static_cast<std::size_t>(N * Ce));
        nn::linear_backward(dembed.data(), grad("to_decoder_model_dim.weight"), grad("to_decoder_model_dim.bias"),
                            dx.data(), embed_.data(), param("to_decoder_model_dim.weight"), N, Ce, Cd);
        de = dembed.data();
    }
    nn::position_add_backward(grad("pos_emb.weight"), de, B, n, Ce);
    nn::embedding_backward(grad("token_emb.weight"), de, inputs_.data(), N, Ce);
}

template <typename T>
void RetroModel<T>::encoder_backward(std::vector<T>& dE, std::vector<T>& dx) {
    const auto& c = config_;
    const std::int64_t Ce = c.enc_dim, Cd = c.dec_dim, M = M_, r = r_, R = M * r, sz = R * Ce, cs = c.chunk_size;
    std::vector<T> dEn(static_cast<std::size_t>(sz)), dh(dEn.size()), dn(dEn.size()), dtmp(dEn.size());
    nn::linear_backward(dEn.data(), grad("encoder.project_out.weight"), grad("encoder.project_out.bias"), dE.data(),
                        E_norm_.data(), param("encoder.project_out.weight"), R, Ce, Cd);
    nn::rmsnorm_backward(dh.data(), grad("encoder.norm_out.gamma"), dEn.data(), E_pre_.data(),
                         param("encoder.norm_out.gamma"), E_rms_.data(), R, Ce);
    nn::AttentionLayerShape self;
    self.B = M;
    self.Nq = self.Nk = r;
    self.dim = self.context_dim = Ce;
    self.heads = c.heads;
    self.dim_head = c.dim_head;
    nn::AttentionLayerShape cross = self;
    cross.Nk = cs;
    cross.context_dim = Cd;
    cross.self = false;
    std::vector<T> dctx(ctx_.size(), T(0)), dctx_part(ctx_.size());
    for (std::int64_t i = c.enc_depth - 1; i >= 0; i--) {
        auto& L = enc_[i];
        auto& G = enc_g_[i];
        nn::feed_forward_backward(dn.data(), G.ff, dh.data(), L.ff_cache, L.ff, R, Ce, 4 * Ce);
        nn::rmsnorm_backward(dtmp.data(), G.g_ff, dn.data(), L.h2.data(), L.g_ff, L.r2.data(), R, Ce);
        add_into(dh.data(), dtmp.data(), sz);
        if (L.has_cross) {
            nn::attention_layer_backward(dn.data(), dctx_part.data(), G.cross, dh.data(), L.cross_cache, L.cross, cross);
            add_into(dctx.data(), dctx_part.data(), static_cast<std::int64_t>(dctx.size()));
            nn::rmsnorm_backward(dtmp.data(), G.g_cross, dn.data(), L.h1.data(), L.g_cross, L.r1.data(), R, Ce);
            add_into(dh.data(), dtmp.data(), sz);
        }
        nn::attention_layer_backward(dn.data(), (T*)nullptr, G.attn, dh.data(), L.attn_cache, L.attn, self);
        nn::rmsnorm_backward(dtmp.data(), G.g_attn, dn.data(), L.h0.data(), L.g_attn, L.r0.data(), R, Ce);
        add_into(dh.data(), dtmp.data(), sz);
    }
    nn::embedding_backward(grad("token_emb.weight"), dh.data(), retrieved_.data(), R, Ce);
    // context gradient back onto the decoder stream: chunk u of item b, summed over its k neighbours
    for (std::int64_t m = 0; m < M; m++) {
        const std::int64_t b = m / (l_ * k_), u = (m / k_) % l_;
        add_into(dx.data() + (b * n_ + u * cs) * Cd, dctx.data() + m * cs * Cd, cs * Cd);
    }
}

template class RetroModel<float>;
template class RetroModel<double>;

}  // namespace retro
