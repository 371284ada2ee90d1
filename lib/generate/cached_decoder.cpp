#include "generate/cached_decoder.h"

#include <algorithm>

#include "core/error.h"
#include "generate/decode_rows.h"
#include "model/layer_shapes.h"
#include "nn/copy_head.h"
#include "nn/embedding.h"
#include "nn/feed_forward.h"
#include "nn/linear.h"
#include "nn/residual.h"
#include "nn/rmsnorm.h"

namespace retro {

namespace {

template <typename T>
void rmsnorm(std::vector<T>& y, const std::vector<T>& x, const T* gamma, std::int64_t N, std::int64_t C) {
    std::vector<T> norm(static_cast<std::size_t>(N));
    y.resize(x.size());
    nn::rmsnorm_forward(y.data(), norm.data(), x.data(), gamma, N, C);
}

template <typename T>
void residual_sum(std::vector<T>& dst, const std::vector<T>& a, const std::vector<T>& b) {
    dst.resize(a.size());
    nn::residual_sum(dst.data(), a.data(), b.data(), static_cast<std::int64_t>(a.size()));
}

}  // namespace

template <typename T>
CachedDecoder<T>::CachedDecoder(const RetroModel<T>& model, std::int64_t sequences, bool retrieval,
                                const nn::DecodeWeightsBf16* bf16_weights)
    : p_(model.bound()), c_(model.config()), bf16_(bf16_weights) {
    RETRO_CHECK(sequences > 0, "decoder needs at least one sequence");
    first_cca_ = c_.first_cca_layer() - 1;
    retrieval_ = retrieval && first_cca_ >= 0;
    k_ = c_.num_neighbours;
    r_ = c_.retrieved_len();
    const auto S = static_cast<std::size_t>(sequences), depth = p_.decoder.size();
    seqs_.resize(S);
    kv_.assign(depth, std::vector<nn::KvCache<T>>(S));
    cca_kv_.assign(depth, std::vector<nn::CcaKvCache<T>>(S));
    last_row_.assign(S, -1);
}

template <typename T>
void CachedDecoder<T>::add_neighbours(std::int64_t s, const std::int32_t* retrieved) {
    auto& q = seqs_[static_cast<std::size_t>(s)];
    for (std::int64_t i = 0; i < k_ * r_; i++)
        if (retrieved[i] < 0 || retrieved[i] >= c_.num_tokens)
            user_error_in("neighbours", cat("retrieved token id ", retrieved[i], " outside the vocabulary [0, ",
                                            c_.num_tokens, ")"));
    q.retrieved.insert(q.retrieved.end(), retrieved, retrieved + k_ * r_);
}

template <typename T>
void CachedDecoder<T>::reset(std::int64_t s) {
    auto& q = seqs_[static_cast<std::size_t>(s)];
    q.n = 0;
    q.encoded = 0;
    q.ctx.clear();
    q.retrieved.clear();
    q.tokens.clear();
    for (std::size_t i = 0; i < kv_.size(); i++) {
        kv_[i][static_cast<std::size_t>(s)].clear();
        cca_kv_[i][static_cast<std::size_t>(s)].clear();
    }
}

template <typename T>
void CachedDecoder<T>::step(const std::vector<std::vector<std::int32_t>>& tokens, bool all_logits) {
    RETRO_CHECK(static_cast<std::int64_t>(tokens.size()) == sequences(), "decoder step: tokens for ", tokens.size(),
                " sequences, the decoder has ", sequences());
    // Batch invariance (header): the sequences that feed one token go together, their linears row by row; each one
    // that feeds more (a prompt) goes alone, as it would in a batch of one.
    std::vector<std::int64_t> alone;
    bool singles = false;
    for (std::int64_t s = 0; s < sequences(); s++) {
        const std::size_t n = tokens[static_cast<std::size_t>(s)].size();
        if (n > 1) alone.push_back(s);
        singles = singles || n == 1;
    }
    if (alone.empty()) {
        const nn::LinearSumsScope row_by_row(nn::LinearSums::row_invariant);
        return step_group(tokens, all_logits);
    }
    if (alone.size() == 1 && !singles) return step_group(tokens, all_logits);

    // several groups: each one's rows of logits kept per sequence, then laid out in sequence order
    const std::int64_t S = sequences(), V = c_.num_tokens;
    std::vector<std::vector<T>> rows_of(static_cast<std::size_t>(S));
    std::vector<std::vector<std::int32_t>> part(tokens.size());
    auto run = [&](const std::vector<std::int64_t>& members, bool row_invariant) {
        for (auto& p : part) p.clear();
        for (const std::int64_t s : members) part[static_cast<std::size_t>(s)] = tokens[static_cast<std::size_t>(s)];
        {
            const nn::LinearSumsScope rows(row_invariant ? nn::LinearSums::row_invariant : nn::LinearSums::thread_invariant);
            step_group(part, all_logits);
        }
        for (const std::int64_t s : members) {
            const std::int64_t last = last_row_[static_cast<std::size_t>(s)];
            if (last < 0) continue;
            const std::int64_t first = all_logits ? row_begin_[static_cast<std::size_t>(s)] : last;
            rows_of[static_cast<std::size_t>(s)].assign(logits_.begin() + first * V, logits_.begin() + (last + 1) * V);
        }
    };
    for (const std::int64_t s : alone) run({s}, false);
    if (singles) {
        std::vector<std::int64_t> members;
        for (std::int64_t s = 0; s < S; s++)
            if (tokens[static_cast<std::size_t>(s)].size() == 1) members.push_back(s);
        run(members, true);
    }
    logits_.clear();
    std::int64_t row = 0;
    for (std::int64_t s = 0; s < S; s++) {
        const auto& r = rows_of[static_cast<std::size_t>(s)];
        logits_.insert(logits_.end(), r.begin(), r.end());
        row += static_cast<std::int64_t>(r.size()) / V;
        last_row_[static_cast<std::size_t>(s)] = r.empty() ? -1 : row - 1;
    }
}

template <typename T>
void CachedDecoder<T>::step_group(const std::vector<std::vector<std::int32_t>>& tokens, bool all_logits) {
    const nn::DecodeWeightsScope weights(bf16_);   // null: every linear reads its fp32 weights
    const std::int64_t S = sequences(), Ce = c_.enc_dim, Cd = c_.dec_dim, V = c_.num_tokens;
    std::vector<std::int64_t> lengths, chunks;
    for (std::int64_t s = 0; s < S; s++) {
        lengths.push_back(seqs_[static_cast<std::size_t>(s)].n);
        if (retrieval_) chunks.push_back(neighbour_chunks(s));
    }
    DecodeRows rows = decode_rows(tokens, lengths, chunks, c_);
    row_seq_ = std::move(rows.seq);
    row_pos_ = std::move(rows.pos);
    row_begin_ = std::move(rows.begin);
    const std::vector<std::int32_t>& ids = rows.ids;
    const std::int64_t R = static_cast<std::int64_t>(row_seq_.size());
    std::fill(last_row_.begin(), last_row_.end(), -1);
    logits_.clear();
    if (R == 0) return;

    // embeddings: token_emb[id] + pos_emb[pos], then to the decoder width
    std::vector<T> e(static_cast<std::size_t>(R * Ce)), x;
    nn::embedding_forward(e.data(), ids.data(), p_.token_emb, R, V, Ce);
    nn::position_rows_add_forward(e.data(), p_.pos_emb, row_pos_.data(), R, Ce);
    if (p_.to_dec_w) {
        x.resize(static_cast<std::size_t>(R * Cd));
        nn::linear_forward(x.data(), e.data(), p_.to_dec_w, p_.to_dec_b, R, Ce, Cd);
    } else {
        x = std::move(e);
    }

    const auto rot = nn::rotary_table<T>(row_pos_, c_.rot_dim());   // each row at its position
    const auto self = decoder_self_shape(c_, 1, R);
    const auto cca = decoder_cca_shape(c_, 1, 0, k_, r_);            // per-row CCA: the chunk count is unused
    std::vector<T> xn, y(x.size()), x1, x2;
    nn::FeedForwardCache<T> ff_cache;
    for (std::size_t li = 0; li < p_.decoder.size(); li++) {
        const auto& L = p_.decoder[li];
        rmsnorm(xn, x, L.g_attn, R, Cd);
        nn::attention_layer_step(y.data(), xn.data(), row_begin_, kv_[li], rot, L.attn, self);
        residual_sum(x1, x, y);
        if (L.has_cca && retrieval_) {
            if (L.index == first_cca_) {   // the encoder's context: this layer's x1, kept per sequence
                for (std::int64_t s = 0; s < S; s++) {
                    auto& q = seqs_[static_cast<std::size_t>(s)];
                    const auto b = row_begin_[static_cast<std::size_t>(s)], en = row_begin_[static_cast<std::size_t>(s + 1)];
                    q.ctx.insert(q.ctx.end(), x1.begin() + b * Cd, x1.begin() + en * Cd);
                }
                encode_finished_chunks();
            }
            rmsnorm(xn, x1, L.g_cca, R, Cd);
            nn::cca_rows_forward(y.data(), xn.data(), R, row_seq_.data(), row_pos_.data(), cca_kv_[li], L.cca, cca);
            residual_sum(x2, x1, y);
        } else {
            x2 = x1;
        }
        rmsnorm(xn, x2, L.g_ff, R, Cd);
        nn::feed_forward_forward(y.data(), ff_cache, xn.data(), L.ff, R, Cd, ff_inner(Cd));
        residual_sum(x, x2, y);
    }
    for (std::int64_t s = 0; s < S; s++) {
        auto& q = seqs_[static_cast<std::size_t>(s)];
        const auto b = row_begin_[static_cast<std::size_t>(s)], en = row_begin_[static_cast<std::size_t>(s + 1)];
        q.n += en - b;
        if (c_.copy_head) q.tokens.insert(q.tokens.end(), ids.begin() + b, ids.begin() + en);
    }

    // logits of every row, or of each advancing sequence's last row
    std::vector<T> xs;
    std::vector<std::int64_t> src;   // the step row of each output row
    std::int64_t out_rows = R;
    if (all_logits) {
        xs = std::move(x);
        for (std::int64_t i = 0; i < R; i++) src.push_back(i);
        for (std::int64_t s = 0; s < S; s++)
            if (row_begin_[static_cast<std::size_t>(s + 1)] > row_begin_[static_cast<std::size_t>(s)])
                last_row_[static_cast<std::size_t>(s)] = row_begin_[static_cast<std::size_t>(s + 1)] - 1;
    } else {
        out_rows = 0;
        for (std::int64_t s = 0; s < S; s++) {
            const auto en = row_begin_[static_cast<std::size_t>(s + 1)];
            if (en == row_begin_[static_cast<std::size_t>(s)]) continue;
            xs.insert(xs.end(), x.begin() + (en - 1) * Cd, x.begin() + en * Cd);
            src.push_back(en - 1);
            last_row_[static_cast<std::size_t>(s)] = out_rows++;
        }
    }
    rmsnorm(xn, xs, p_.dec_norm_out, out_rows, Cd);
    logits_.resize(static_cast<std::size_t>(out_rows * V));
    nn::linear_forward(logits_.data(), xn.data(), p_.to_logits_w, p_.to_logits_b, out_rows, Cd, V);
    if (c_.copy_head && retrieval_) add_copy_head(src, xn);
}

template <typename T>
void CachedDecoder<T>::add_copy_head(const std::vector<std::int64_t>& src, const std::vector<T>& xn) {
    const std::int64_t cs = c_.chunk_size, rows = static_cast<std::int64_t>(src.size());
    std::vector<nn::CopyCandidate> cand(static_cast<std::size_t>(rows * k_));
    for (std::int64_t i = 0; i < rows; i++) {
        const std::int64_t row = src[static_cast<std::size_t>(i)], pos = row_pos_[static_cast<std::size_t>(row)];
        const auto& q = seqs_[static_cast<std::size_t>(row_seq_[static_cast<std::size_t>(row)])];
        if (pos < cs - 1) continue;
        const std::int64_t u = (pos + 1) / cs - 1;   // the chunk CCA read at pos (it checked that it is there)
        nn::copy_candidates(cand.data() + i * k_, q.tokens.data(), pos, q.retrieved.data() + u * k_ * r_, k_, r_,
                            c_.pad_id);
    }
    nn::copy_head_forward(logits_.data(), xn.data(), cand.data(), rows, k_, c_.num_tokens, c_.dec_dim, p_.copy_bias,
                          p_.copy_weight);
}

template <typename T>
void CachedDecoder<T>::encode_finished_chunks() {
    // one encoder batch a sequence (its chunks finished in this step), its linears through sgemm's tiles even in a
    // step of decode rows: the same calls as when the sequence is decoded alone
    const nn::LinearSumsScope tiles(nn::LinearSums::thread_invariant);
    for (std::int64_t s = 0; s < sequences(); s++) {
        const auto& q = seqs_[static_cast<std::size_t>(s)];
        const std::int64_t fed = q.n + row_begin_[static_cast<std::size_t>(s + 1)] - row_begin_[static_cast<std::size_t>(s)];
        if (fed / c_.chunk_size > q.encoded) encode_chunks(s, q.encoded, fed / c_.chunk_size - q.encoded);
    }
}

template <typename T>
void CachedDecoder<T>::encode_chunks(std::int64_t s, std::int64_t u0, std::int64_t J) {
    const std::int64_t cs = c_.chunk_size, Cd = c_.dec_dim, KR = k_ * r_, HD = c_.inner_dim();
    auto& q = seqs_[static_cast<std::size_t>(s)];
    // J chunks: M = J*k neighbours of r tokens
    const std::int64_t M = J * k_, R = M * r_;
    std::vector<std::int32_t> ids(q.retrieved.begin() + u0 * KR, q.retrieved.begin() + (u0 + J) * KR);
    std::vector<std::uint8_t> mask(ids.size());
    std::vector<T> ctx(static_cast<std::size_t>(M * cs * Cd));
    for (std::int64_t j = 0; j < J; j++)
        encoder_context(ctx.data() + j * k_ * cs * Cd, q.ctx.data() + (u0 + j) * cs * Cd, k_, cs, Cd);
    for (std::size_t i = 0; i < ids.size(); i++) mask[i] = ids[i] != c_.pad_id;
    std::vector<T> E(static_cast<std::size_t>(R * Cd));
    encoder_forward(E.data(), encoder_, ids.data(), mask.data(), ctx.data(), M, r_, p_, c_);

    // each CCA layer's keys and values of E_u, kept with the pad mask
    const auto cca = decoder_cca_shape(c_, 1, 0, k_, r_);
    std::vector<T> K(static_cast<std::size_t>(R * HD)), Vv(K.size());
    for (std::size_t li = 0; li < p_.decoder.size(); li++) {
        const auto& L = p_.decoder[li];
        if (!L.has_cca) continue;
        nn::cca_context_forward(K.data(), Vv.data(), E.data(), J, L.cca, cca);
        auto& kv = cca_kv_[li][static_cast<std::size_t>(s)];
        kv.k.insert(kv.k.end(), K.begin(), K.end());
        kv.v.insert(kv.v.end(), Vv.begin(), Vv.end());
        kv.mask.insert(kv.mask.end(), mask.begin(), mask.end());
    }
    q.encoded = u0 + J;
}

std::unique_ptr<nn::DecodeWeightsBf16> linear_weights_bf16(const RetroModel<float>& model) {
    RETRO_CHECK(nn::bf16_decode_available(), "bf16 decode weights on a CPU without AVX-512 or AVX2+FMA");
    auto table = std::make_unique<nn::DecodeWeightsBf16>();
    for (const ParamEntry& e : model.layout().entries())
        if (e.init == PARAM_INIT_LINEAR_WEIGHT) table->add(model.params().data() + e.offset, e.numel);
    return table;
}

template class CachedDecoder<float>;
template class CachedDecoder<double>;

}  // namespace retro
