#include "model/retro.h"

#include <algorithm>
#include <limits>
#include <memory>

#include "core/error.h"
#include "model/layer_shapes.h"
#include "model/param_groups.h"
#include "nn/copy_head.h"
#include "nn/cross_entropy.h"
#include "nn/embedding.h"
#include "nn/linear.h"
#include "nn/residual.h"
#include "nn/rmsnorm.h"

namespace retro {

template <typename T>
RetroModel<T>::RetroModel(const RetroConfig& config) : config_(config), layout_(config) {
    config_.validate("model config");
    params_.assign(static_cast<std::size_t>(layout_.total()), T(0));
    grads_.assign(params_.size(), T(0));
    p_ = bind_params(params_.data(), layout_, config_);
    g_ = bind_params(grads_.data(), layout_, config_);
    dec_.resize(p_.decoder.size());
}

template <typename T>
void RetroModel<T>::set_trainable(const std::vector<std::uint8_t>& per_entry) {
    const BackwardSkips b = param_backward_skips(layout_, config_, per_entry);
    lowest_trainable_ = b.lowest_trainable;
    head_trainable_ = b.head_trainable;
    encoder_trainable_ = b.encoder_trainable;
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

    embed_.resize(static_cast<std::size_t>(B * n * Ce));
    nn::embedding_forward(embed_.data(), inputs_.data(), p_.token_emb, B * n, V, Ce);
    nn::position_add_forward(embed_.data(), p_.pos_emb, B, n, Ce);
    std::vector<T> x(static_cast<std::size_t>(B * n * Cd));
    if (p_.to_dec_w)
        nn::linear_forward(x.data(), embed_.data(), p_.to_dec_w, p_.to_dec_b, B * n, Ce, Cd);
    else
        x = embed_;

    rot_dec_ = nn::rotary_table_range<T>(n, c.rot_dim());
    if (retrieval_) {
        retrieved_ = batch.retrieved;
        for (auto id : retrieved_)
            if (id < 0 || id >= V)
                user_error_in("batch", cat("retrieved token id ", id, " outside the vocabulary [0, ", V, ")"));
        mask_.resize(retrieved_.size());
        for (std::size_t i = 0; i < retrieved_.size(); i++) mask_[i] = retrieved_[i] != c.pad_id;
    }

    const auto self = decoder_self_shape(c, B, n);
    const auto cca = decoder_cca_shape(c, B, n, k_, r_);
    const std::int64_t N = B * n, sz = N * Cd;
    std::vector<T> tmp(static_cast<std::size_t>(sz));
    bool encoded = false;
    for (std::size_t i = 0; i < dec_.size(); i++) {
        const auto& L = p_.decoder[i];
        auto& A = dec_[i];
        A.x0 = x;
        A.n0.resize(x.size());
        A.r0.resize(static_cast<std::size_t>(N));
        nn::rmsnorm_forward(A.n0.data(), A.r0.data(), A.x0.data(), L.g_attn, N, Cd);
        nn::attention_layer_forward(tmp.data(), A.attn_cache, A.n0.data(), (const T*)nullptr, nullptr, &rot_dec_,
                                    &rot_dec_, L.attn, self);
        A.x1.resize(x.size());
        nn::residual_sum(A.x1.data(), A.x0.data(), tmp.data(), sz);
        if (L.has_cca && retrieval_) {
            if (!encoded) {   // the encoder's context: raw residual stream, chunk u repeated per neighbour
                ctx_.resize(static_cast<std::size_t>(M_ * cs * Cd));
                for (std::int64_t b = 0; b < B; b++)
                    for (std::int64_t u = 0; u < l_; u++)
                        encoder_context(ctx_.data() + (b * l_ + u) * k_ * cs * Cd, A.x1.data() + (b * n + u * cs) * Cd,
                                        k_, cs, Cd);
                E_.resize(static_cast<std::size_t>(M_ * r_ * Cd));
                encoder_forward(E_.data(), enc_, retrieved_.data(), mask_.data(), ctx_.data(), M_, r_, p_, c);
                encoded = true;
            }
            A.n1.resize(x.size());
            A.r1.resize(static_cast<std::size_t>(N));
            nn::rmsnorm_forward(A.n1.data(), A.r1.data(), A.x1.data(), L.g_cca, N, Cd);
            nn::cca_forward(tmp.data(), A.cca_cache, A.n1.data(), E_.data(), mask_.data(), L.cca, cca);
            A.x2.resize(x.size());
            nn::residual_sum(A.x2.data(), A.x1.data(), tmp.data(), sz);
        } else {
            A.x2 = A.x1;
        }
        A.n2.resize(x.size());
        A.r2.resize(static_cast<std::size_t>(N));
        nn::rmsnorm_forward(A.n2.data(), A.r2.data(), A.x2.data(), L.g_ff, N, Cd);
        nn::feed_forward_forward(tmp.data(), A.ff_cache, A.n2.data(), L.ff, N, Cd, ff_inner(Cd));
        nn::residual_sum(x.data(), A.x2.data(), tmp.data(), sz);
    }
    x_final_ = x;
    xn_final_.resize(x.size());
    rms_final_.resize(static_cast<std::size_t>(N));
    nn::rmsnorm_forward(xn_final_.data(), rms_final_.data(), x_final_.data(), p_.dec_norm_out, N, Cd);
    logits_.resize(static_cast<std::size_t>(N * V));
    nn::linear_forward(logits_.data(), xn_final_.data(), p_.to_logits_w, p_.to_logits_b, N, Cd, V);
    copy_active_ = retrieval_ && c.copy_head;
    if (copy_active_) {   // nn/copy_head.h: the gate on what followed the longest match in a read neighbour
        nn::copy_candidates_batch(copy_cand_, inputs_.data(), B, n, retrieved_.data(), l_, k_, r_, cs, c.pad_id);
        nn::copy_head_forward(logits_.data(), xn_final_.data(), copy_cand_.data(), N, k_, V, Cd, p_.copy_bias,
                              p_.copy_weight);
    }
    lse_.resize(static_cast<std::size_t>(N));
    return nn::cross_entropy_forward(lse_.data(), &valid_, logits_.data(), labels_.data(), N, V, c.pad_id);
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
    nn::linear_backward(dxn.data(), head_trainable_ ? g_.to_logits_w : nullptr, g_.to_logits_b, dlogits.get(),
                        xn_final_.data(), p_.to_logits_w, N, Cd, V);
    if (copy_active_)
        nn::copy_head_backward(dxn.data(), g_.copy_bias, g_.copy_weight, dlogits.get(), xn_final_.data(),
                               copy_cand_.data(), N, k_, V, Cd, p_.copy_weight);
    dlogits.reset();
    nn::rmsnorm_backward(dx.data(), g_.dec_norm_out, dxn.data(), x_final_.data(), p_.dec_norm_out, rms_final_.data(), N,
                         Cd);

    const auto self = decoder_self_shape(c, B, n);
    const auto cca = decoder_cca_shape(c, B, n, k_, r_);
    std::vector<T> dE, dE_part;
    if (retrieval_) {
        dE.assign(E_.size(), T(0));
        dE_part.resize(E_.size());
    }
    const std::int64_t first = c.first_cca_layer() - 1;
    auto frozen_from = [&](std::int64_t block) { return lowest_trainable_ > block; };   // nothing trains at or below
    for (std::int64_t i = c.dec_depth - 1; i >= 0; i--) {
        const auto& L = p_.decoder[static_cast<std::size_t>(i)];
        const auto& G = g_.decoder[static_cast<std::size_t>(i)];
        auto& A = dec_[static_cast<std::size_t>(i)];
        if (frozen_from(3 * i + 3)) return;
        nn::feed_forward_backward(dn.data(), G.ff, dx.data(), A.ff_cache, L.ff, N, Cd, ff_inner(Cd));
        nn::rmsnorm_backward(dtmp.data(), G.g_ff, dn.data(), A.x2.data(), L.g_ff, A.r2.data(), N, Cd);
        nn::residual_add(dx.data(), dtmp.data(), sz);
        if (frozen_from(3 * i + 2)) return;
        if (L.has_cca && retrieval_) {
            nn::cca_backward(dn.data(), dE_part.data(), G.cca, dx.data(), A.cca_cache, L.cca, cca);
            nn::residual_add(dE.data(), dE_part.data(), static_cast<std::int64_t>(dE.size()));
            nn::rmsnorm_backward(dtmp.data(), G.g_cca, dn.data(), A.x1.data(), L.g_cca, A.r1.data(), N, Cd);
            nn::residual_add(dx.data(), dtmp.data(), sz);
            // the encoder (unless it and everything below are frozen), then its context gradient back onto
            // chunk u, summed over k neighbours
            if (i == first && (encoder_trainable_ || !frozen_from(3 * i + 1))) {
                std::vector<T> dctx(ctx_.size());
                encoder_backward(dctx.data(), g_, dE.data(), enc_, p_, c);
                for (std::int64_t m = 0; m < M_; m++) {
                    const std::int64_t b = m / (l_ * k_), u = (m / k_) % l_;
                    nn::residual_add(dx.data() + (b * n + u * cs) * Cd, dctx.data() + m * cs * Cd, cs * Cd);
                }
            }
        }
        if (frozen_from(3 * i + 1)) return;
        nn::attention_layer_backward(dn.data(), (T*)nullptr, G.attn, dx.data(), A.attn_cache, L.attn, self);
        nn::rmsnorm_backward(dtmp.data(), G.g_attn, dn.data(), A.x0.data(), L.g_attn, A.r0.data(), N, Cd);
        nn::residual_add(dx.data(), dtmp.data(), sz);
    }
    if (frozen_from(0)) return;
    std::vector<T> dembed;
    const T* de = dx.data();
    if (p_.to_dec_w) {
        dembed.resize(static_cast<std::size_t>(N * Ce));
        nn::linear_backward(dembed.data(), g_.to_dec_w, g_.to_dec_b, dx.data(), embed_.data(), p_.to_dec_w, N, Ce, Cd);
        de = dembed.data();
    }
    nn::position_add_backward(g_.pos_emb, de, B, n, Ce);
    nn::embedding_backward(g_.token_emb, de, inputs_.data(), N, Ce);
}

template class RetroModel<float>;
template class RetroModel<double>;

}  // namespace retro
