#include "generate/cached_decoder.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/error.h"
#include "nn/blas.h"
#include "nn/chunked_cross_attention.h"
#include "nn/embedding.h"
#include "nn/linear.h"
#include "nn/parallel.h"
#include "nn/rmsnorm.h"

namespace retro {

namespace {

std::vector<std::int64_t> iota(std::int64_t n) {
    std::vector<std::int64_t> v(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; i++) v[static_cast<std::size_t>(i)] = i;
    return v;
}

template <typename T>
void rmsnorm(std::vector<T>& y, const std::vector<T>& x, const T* gamma, std::int64_t N, std::int64_t C) {
    std::vector<T> norm(static_cast<std::size_t>(N));
    y.resize(x.size());
    nn::rmsnorm_forward(y.data(), norm.data(), x.data(), gamma, N, C);
}

// One head of attention for m query rows: keys 0..nk-1 (rows of K/V with leading dimension ld), an optional
// null key/value in front, and per row the number of leading keys it may see (`visible`, causal) or a key
// mask. The same steps as nn::attention_forward (null score by a dot product, -max fill, max-subtracted exp,
// P V by GEMM, then the null value), so results agree with the full forward to rounding.
template <typename T>
void attend_head(T* O, std::int64_t ldo, const T* Q, std::int64_t ldq, std::int64_t m, const T* K, const T* V,
                 std::int64_t ld, std::int64_t nk, std::int64_t D, const T* null_k, const T* null_v,
                 const std::int64_t* visible, const std::uint8_t* mask, std::vector<T>& P) {
    const std::int64_t off = null_k ? 1 : 0, W = nk + off;
    const T mask_value = -std::numeric_limits<T>::max();
    P.resize(static_cast<std::size_t>(m * W));
    nn::gemm(false, true, m, nk, D, T(1), Q, ldq, K, ld, T(0), P.data() + off, W);
    for (std::int64_t i = 0; i < m; i++) {
        T* row = P.data() + i * W;
        auto vis = [&](std::int64_t j) { return visible ? j < visible[i] : mask[j] != 0; };
        if (null_k) {
            T acc = 0;
            for (std::int64_t d = 0; d < D; d++) acc += Q[i * ldq + d] * null_k[d];
            row[0] = acc;
        }
        T mx = null_k ? row[0] : mask_value;
        bool any = null_k != nullptr;
        for (std::int64_t j = 0; j < nk; j++) {
            if (vis(j)) {
                mx = any ? std::max(mx, row[off + j]) : row[off + j];
                any = true;
            } else {
                row[off + j] = mask_value;
            }
        }
        if (!any) {   // every key masked (cannot happen with a null key or causally): uniform, as the full forward
            for (std::int64_t j = 0; j < W; j++) row[j] = T(1) / static_cast<T>(W);
            continue;
        }
        T sum = 0;
        for (std::int64_t j = 0; j < W; j++) {
            const bool v = j < off || vis(j - off);
            row[j] = v ? std::exp(row[j] - mx) : T(0);
            sum += row[j];
        }
        const T inv = T(1) / sum;
        for (std::int64_t j = 0; j < W; j++) row[j] *= inv;
    }
    nn::gemm(false, false, m, D, nk, T(1), P.data() + off, W, V, ld, T(0), O, ldo);
    if (null_v)
        for (std::int64_t i = 0; i < m; i++) {
            const T p0 = P[static_cast<std::size_t>(i * W)];
            for (std::int64_t d = 0; d < D; d++) O[i * ldo + d] += p0 * null_v[d];
        }
}

template <typename T>
void add_rows(std::vector<T>& dst, const std::vector<T>& a, const std::vector<T>& b) {
    dst.resize(a.size());
    const std::int64_t n = static_cast<std::int64_t>(a.size());
    nn::ranges(n, n, [&](std::int64_t s, std::int64_t e, int) {
        for (std::int64_t i = s; i < e; i++) dst[i] = a[i] + b[i];
    });
}

}  // namespace

template <typename T>
CachedDecoder<T>::CachedDecoder(const RetroModel<T>& model, std::int64_t sequences, bool retrieval)
    : model_(model), c_(model.config()) {
    RETRO_CHECK(sequences > 0, "decoder needs at least one sequence");
    T* base = const_cast<T*>(model.params().data());   // read only
    dec_ = bind_decoder_layers(base, model.layout(), c_);
    enc_ = bind_encoder_layers(base, model.layout(), c_);
    first_cca_ = c_.first_cca_layer() - 1;
    retrieval_ = retrieval && first_cca_ >= 0;
    k_ = c_.num_neighbours;
    r_ = c_.retrieved_len();
    seqs_.resize(static_cast<std::size_t>(sequences));
    for (auto& s : seqs_) {
        s.k.resize(dec_.size());
        s.v.resize(dec_.size());
        s.ck.resize(dec_.size());
        s.cv.resize(dec_.size());
    }
    last_row_.assign(seqs_.size(), -1);
    rot_enc_ = nn::rotary_table<T>(iota(r_), c_.rot_dim());
    rot_enc_ctx_ = nn::rotary_table<T>(iota(c_.chunk_size), c_.rot_dim());
    rot_cca_k_ = nn::rotary_table<T>(nn::cca_key_positions(k_, r_), c_.rot_dim());
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
    q.mask.clear();
    for (std::size_t i = 0; i < dec_.size(); i++) {
        q.k[i].clear();
        q.v[i].clear();
        q.ck[i].clear();
        q.cv[i].clear();
    }
}

template <typename T>
void CachedDecoder<T>::step(const std::vector<std::vector<std::int32_t>>& tokens, bool all_logits) {
    const std::int64_t S = sequences(), Ce = c_.enc_dim, Cd = c_.dec_dim, V = c_.num_tokens, cs = c_.chunk_size;
    RETRO_CHECK(static_cast<std::int64_t>(tokens.size()) == S, "step: ", tokens.size(), " token lists for ", S,
                " sequences");
    rows_.clear();
    row_begin_.assign(static_cast<std::size_t>(S + 1), 0);
    std::vector<std::int32_t> ids;
    for (std::int64_t s = 0; s < S; s++) {
        const auto& q = seqs_[static_cast<std::size_t>(s)];
        const std::int64_t m = static_cast<std::int64_t>(tokens[static_cast<std::size_t>(s)].size());
        if (q.n + m > c_.max_seq_len)
            user_error_in("generation", cat("sequence ", s, " would reach ", q.n + m,
                                            " tokens; the model's max_seq_len is ", c_.max_seq_len));
        for (std::int64_t i = 0; i < m; i++) {
            const std::int32_t id = tokens[static_cast<std::size_t>(s)][static_cast<std::size_t>(i)];
            if (id < 0 || id >= V)
                user_error_in("generation", cat("token id ", id, " outside the vocabulary [0, ", V, ")"));
            rows_.push_back({s, q.n + i});
            ids.push_back(id);
        }
        row_begin_[static_cast<std::size_t>(s + 1)] = static_cast<std::int64_t>(rows_.size());
        // chunk u must have neighbours before its last token (position u*cs + cs - 1) is fed
        if (retrieval_)
            RETRO_CHECK((q.n + m) / cs <= neighbour_chunks(s), "sequence ", s, " reaches chunk ", (q.n + m) / cs,
                        " with neighbours for ", neighbour_chunks(s), " chunks");
    }
    const std::int64_t R = static_cast<std::int64_t>(rows_.size());
    std::fill(last_row_.begin(), last_row_.end(), -1);
    logits_.clear();
    if (R == 0) return;

    // embeddings: token_emb[id] + pos_emb[pos], then to the decoder width
    std::vector<T> e(static_cast<std::size_t>(R * Ce)), x;
    nn::embedding_forward(e.data(), ids.data(), model_.params().data() + model_.layout().offset("token_emb.weight"),
                          R, V, Ce);
    const T* pos = model_.params().data() + model_.layout().offset("pos_emb.weight");
    std::vector<std::int64_t> positions(static_cast<std::size_t>(R));
    for (std::int64_t i = 0; i < R; i++) {
        positions[static_cast<std::size_t>(i)] = rows_[static_cast<std::size_t>(i)].pos;
        const T* p = pos + rows_[static_cast<std::size_t>(i)].pos * Ce;
        for (std::int64_t c = 0; c < Ce; c++) e[static_cast<std::size_t>(i * Ce + c)] += p[c];
    }
    const auto at = [&](const char* name) { return model_.params().data() + model_.layout().offset(name); };
    if (Ce != Cd) {
        x.resize(static_cast<std::size_t>(R * Cd));
        nn::linear_forward(x.data(), e.data(), at("to_decoder_model_dim.weight"), at("to_decoder_model_dim.bias"), R,
                           Ce, Cd);
    } else {
        x = std::move(e);
    }
    rot_rows_ = nn::rotary_table<T>(positions, c_.rot_dim());

    std::vector<T> xn, y, x1, x2;
    std::vector<std::uint8_t> touched;
    nn::FeedForwardCache<T> ff_cache;
    for (const auto& L : dec_) {
        rmsnorm(xn, x, L.g_attn, R, Cd);
        self_attention(L, xn, y);
        add_rows(x1, x, y);
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
            chunked_cross_attention(L, xn, y, touched);
            x2 = x1;
            for (std::int64_t i = 0; i < R; i++)
                if (touched[static_cast<std::size_t>(i)])
                    for (std::int64_t c = 0; c < Cd; c++) x2[i * Cd + c] = x1[i * Cd + c] + y[i * Cd + c];
        } else {
            x2 = x1;
        }
        rmsnorm(xn, x2, L.g_ff, R, Cd);
        y.resize(x2.size());
        nn::feed_forward_forward(y.data(), ff_cache, xn.data(), L.ff, R, Cd, 4 * Cd);
        add_rows(x, x2, y);
    }
    for (std::int64_t s = 0; s < S; s++)
        seqs_[static_cast<std::size_t>(s)].n +=
            row_begin_[static_cast<std::size_t>(s + 1)] - row_begin_[static_cast<std::size_t>(s)];

    // logits of every row, or of each advancing sequence's last row
    std::vector<T> xs;
    std::int64_t out_rows = R;
    if (all_logits) {
        xs = std::move(x);
        for (std::int64_t s = 0; s < S; s++)
            if (row_begin_[static_cast<std::size_t>(s + 1)] > row_begin_[static_cast<std::size_t>(s)])
                last_row_[static_cast<std::size_t>(s)] = row_begin_[static_cast<std::size_t>(s + 1)] - 1;
    } else {
        out_rows = 0;
        for (std::int64_t s = 0; s < S; s++) {
            const auto en = row_begin_[static_cast<std::size_t>(s + 1)];
            if (en == row_begin_[static_cast<std::size_t>(s)]) continue;
            xs.insert(xs.end(), x.begin() + (en - 1) * Cd, x.begin() + en * Cd);
            last_row_[static_cast<std::size_t>(s)] = out_rows++;
        }
    }
    rmsnorm(xn, xs, at("decoder.norm_out.gamma"), out_rows, Cd);
    logits_.resize(static_cast<std::size_t>(out_rows * V));
    nn::linear_forward(logits_.data(), xn.data(), at("to_logits.weight"), at("to_logits.bias"), out_rows, Cd, V);
}

template <typename T>
void CachedDecoder<T>::self_attention(const DecoderLayerParams<T>& L, const std::vector<T>& xn, std::vector<T>& y) {
    const std::int64_t R = static_cast<std::int64_t>(rows_.size()), Cd = c_.dec_dim, H = c_.heads, D = c_.dim_head,
                       HD = H * D, S = sequences();
    std::vector<T> q(static_cast<std::size_t>(R * HD)), k(q.size()), v(q.size()), o(q.size());
    nn::linear_forward(q.data(), xn.data(), L.attn.to_q, (const T*)nullptr, R, Cd, HD);
    const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(D)));
    for (auto& e : q) e *= scale;
    nn::rotary_forward(q.data(), q.data(), rot_rows_, 1, R, H, D);
    nn::linear_forward(k.data(), xn.data(), L.attn.to_k, (const T*)nullptr, R, Cd, HD);
    nn::rotary_forward(k.data(), k.data(), rot_rows_, 1, R, H, D);
    nn::linear_forward(v.data(), xn.data(), L.attn.to_v, (const T*)nullptr, R, Cd, HD);
    const auto li = static_cast<std::size_t>(L.index);
    for (std::int64_t s = 0; s < S; s++) {
        auto& sq = seqs_[static_cast<std::size_t>(s)];
        const auto b = row_begin_[static_cast<std::size_t>(s)], e = row_begin_[static_cast<std::size_t>(s + 1)];
        sq.k[li].insert(sq.k[li].end(), k.begin() + b * HD, k.begin() + e * HD);
        sq.v[li].insert(sq.v[li].end(), v.begin() + b * HD, v.begin() + e * HD);
    }
    std::int64_t work = 0;
    for (std::int64_t s = 0; s < S; s++)
        work += (row_begin_[static_cast<std::size_t>(s + 1)] - row_begin_[static_cast<std::size_t>(s)]) *
                static_cast<std::int64_t>(seqs_[static_cast<std::size_t>(s)].k[li].size()) * 4;
    nn::BlasSingleThread single;
    nn::for_each(S * H, work, [&](std::int64_t sh) {
        const std::int64_t s = sh / H, h = sh % H;
        const auto& sq = seqs_[static_cast<std::size_t>(s)];
        const auto b = row_begin_[static_cast<std::size_t>(s)], m = row_begin_[static_cast<std::size_t>(s + 1)] - b;
        if (m == 0) return;
        const std::int64_t nk = static_cast<std::int64_t>(sq.k[li].size()) / HD;
        std::vector<std::int64_t> visible(static_cast<std::size_t>(m));
        for (std::int64_t i = 0; i < m; i++) visible[static_cast<std::size_t>(i)] = rows_[static_cast<std::size_t>(b + i)].pos + 1;
        std::vector<T> P;
        attend_head(o.data() + b * HD + h * D, HD, q.data() + b * HD + h * D, HD, m, sq.k[li].data() + h * D,
                    sq.v[li].data() + h * D, HD, nk, D, (const T*)nullptr, (const T*)nullptr, visible.data(),
                    nullptr, P);
    });
    y.resize(static_cast<std::size_t>(R * Cd));
    nn::linear_forward(y.data(), o.data(), L.attn.to_out_w, L.attn.to_out_b, R, HD, Cd);
}

template <typename T>
void CachedDecoder<T>::encode_finished_chunks() {
    const std::int64_t cs = c_.chunk_size, Ce = c_.enc_dim, Cd = c_.dec_dim, S = sequences();
    struct Job {
        std::int64_t s, u;
    };
    std::vector<Job> jobs;
    for (std::int64_t s = 0; s < S; s++) {
        const auto& q = seqs_[static_cast<std::size_t>(s)];
        const std::int64_t fed = q.n + row_begin_[static_cast<std::size_t>(s + 1)] - row_begin_[static_cast<std::size_t>(s)];
        for (std::int64_t u = q.encoded; u < fed / cs; u++) jobs.push_back({s, u});
    }
    if (jobs.empty()) return;
    const std::int64_t J = static_cast<std::int64_t>(jobs.size()), M = J * k_, R = M * r_, sz = R * Ce;
    std::vector<std::int32_t> ids(static_cast<std::size_t>(R));
    std::vector<std::uint8_t> mask(ids.size());
    std::vector<T> ctx(static_cast<std::size_t>(M * cs * Cd));
    for (std::int64_t j = 0; j < J; j++) {
        const auto& q = seqs_[static_cast<std::size_t>(jobs[j].s)];
        std::copy_n(q.retrieved.begin() + jobs[j].u * k_ * r_, k_ * r_, ids.begin() + j * k_ * r_);
        for (std::int64_t nb = 0; nb < k_; nb++)   // chunk u's context, repeated for each neighbour
            std::copy_n(q.ctx.begin() + jobs[j].u * cs * Cd, cs * Cd, ctx.begin() + (j * k_ + nb) * cs * Cd);
    }
    for (std::size_t i = 0; i < ids.size(); i++) mask[i] = ids[i] != c_.pad_id;

    // the encoder, as RetroModel::encoder_forward (RETRO.md B.7)
    const auto at = [&](const char* name) { return model_.params().data() + model_.layout().offset(name); };
    std::vector<T> h(static_cast<std::size_t>(sz)), hn, tmp(h.size()), h1, h2;
    nn::embedding_forward(h.data(), ids.data(), at("token_emb.weight"), R, c_.num_tokens, Ce);
    nn::AttentionLayerShape self;
    self.B = M;
    self.Nq = self.Nk = r_;
    self.dim = self.context_dim = Ce;
    self.heads = c_.heads;
    self.dim_head = c_.dim_head;
    nn::AttentionLayerShape cross = self;
    cross.Nk = cs;
    cross.context_dim = Cd;
    cross.self = false;
    nn::AttentionLayerCache<T> cache;
    nn::FeedForwardCache<T> ff_cache;
    for (const auto& L : enc_) {
        rmsnorm(hn, h, L.g_attn, R, Ce);
        nn::attention_layer_forward(tmp.data(), cache, hn.data(), (const T*)nullptr, mask.data(), &rot_enc_, &rot_enc_,
                                    L.attn, self);
        add_rows(h1, h, tmp);
        if (L.has_cross) {
            rmsnorm(hn, h1, L.g_cross, R, Ce);
            nn::attention_layer_forward(tmp.data(), cache, hn.data(), (const T*)ctx.data(), nullptr, &rot_enc_,
                                        &rot_enc_ctx_, L.cross, cross);
            add_rows(h2, h1, tmp);
        } else {
            h2 = h1;
        }
        rmsnorm(hn, h2, L.g_ff, R, Ce);
        nn::feed_forward_forward(tmp.data(), ff_cache, hn.data(), L.ff, R, Ce, 4 * Ce);
        add_rows(h, h2, tmp);
    }
    rmsnorm(hn, h, at("encoder.norm_out.gamma"), R, Ce);
    std::vector<T> E(static_cast<std::size_t>(R * Cd));
    nn::linear_forward(E.data(), hn.data(), at("encoder.project_out.weight"), at("encoder.project_out.bias"), R, Ce, Cd);

    // each CCA layer's keys (rotated at 0..r-1 per neighbour) and values of E_u, kept per sequence
    const std::int64_t HD = c_.inner_dim(), KR = k_ * r_;
    std::vector<T> K(static_cast<std::size_t>(R * HD)), Vv(K.size());
    for (const auto& L : dec_) {
        if (!L.has_cca) continue;
        nn::linear_forward(K.data(), E.data(), L.cca.to_k, (const T*)nullptr, R, Cd, HD);
        nn::rotary_forward(K.data(), K.data(), rot_cca_k_, J, KR, c_.heads, c_.dim_head);
        nn::linear_forward(Vv.data(), E.data(), L.cca.to_v, (const T*)nullptr, R, Cd, HD);
        const auto li = static_cast<std::size_t>(L.index);
        for (std::int64_t j = 0; j < J; j++) {
            auto& q = seqs_[static_cast<std::size_t>(jobs[j].s)];
            q.ck[li].insert(q.ck[li].end(), K.begin() + j * KR * HD, K.begin() + (j + 1) * KR * HD);
            q.cv[li].insert(q.cv[li].end(), Vv.begin() + j * KR * HD, Vv.begin() + (j + 1) * KR * HD);
        }
    }
    for (std::int64_t j = 0; j < J; j++) {
        auto& q = seqs_[static_cast<std::size_t>(jobs[j].s)];
        q.mask.insert(q.mask.end(), mask.begin() + j * KR, mask.begin() + (j + 1) * KR);
        q.encoded = jobs[j].u + 1;
    }
}

template <typename T>
void CachedDecoder<T>::chunked_cross_attention(const DecoderLayerParams<T>& L, const std::vector<T>& xn,
                                               std::vector<T>& y, std::vector<std::uint8_t>& touched) {
    const std::int64_t R = static_cast<std::int64_t>(rows_.size()), cs = c_.chunk_size, Cd = c_.dec_dim,
                       H = c_.heads, D = c_.dim_head, HD = H * D, KR = k_ * r_;
    touched.assign(static_cast<std::size_t>(R), 0);
    // rows that read a chunk (p >= cs - 1), grouped by (sequence, chunk) in row order
    std::vector<std::int64_t> sel, qpos;
    struct Group {
        std::int64_t s, u, first, count;   // first/count over sel
    };
    std::vector<Group> groups;
    const auto qtable = nn::cca_query_positions(cs);
    for (std::int64_t i = 0; i < R; i++) {
        const auto& row = rows_[static_cast<std::size_t>(i)];
        if (row.pos < cs - 1) continue;
        const std::int64_t u = (row.pos + 1) / cs - 1, t = row.pos - (u * cs + cs - 1);
        if (groups.empty() || groups.back().s != row.seq || groups.back().u != u)
            groups.push_back({row.seq, u, static_cast<std::int64_t>(sel.size()), 0});
        groups.back().count++;
        sel.push_back(i);
        qpos.push_back(qtable[static_cast<std::size_t>(t)]);
        touched[static_cast<std::size_t>(i)] = 1;
    }
    const std::int64_t Rs = static_cast<std::int64_t>(sel.size());
    if (Rs == 0) return;
    std::vector<T> xs(static_cast<std::size_t>(Rs * Cd)), q(static_cast<std::size_t>(Rs * HD)), o(q.size()),
        ys(xs.size());
    for (std::int64_t i = 0; i < Rs; i++) std::copy_n(xn.begin() + sel[i] * Cd, Cd, xs.begin() + i * Cd);
    nn::linear_forward(q.data(), xs.data(), L.cca.to_q, (const T*)nullptr, Rs, Cd, HD);
    const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(D)));
    for (auto& e : q) e *= scale;
    nn::rotary_forward(q.data(), q.data(), nn::rotary_table<T>(qpos, c_.rot_dim()), 1, Rs, H, D);
    const auto li = static_cast<std::size_t>(L.index);
    const std::int64_t G = static_cast<std::int64_t>(groups.size());
    nn::BlasSingleThread single;
    nn::for_each(G * H, Rs * KR * D * 4, [&](std::int64_t gh) {
        const auto& g = groups[static_cast<std::size_t>(gh / H)];
        const std::int64_t h = gh % H;
        const auto& sq = seqs_[static_cast<std::size_t>(g.s)];
        std::vector<T> P;
        attend_head(o.data() + g.first * HD + h * D, HD, q.data() + g.first * HD + h * D, HD, g.count,
                    sq.ck[li].data() + g.u * KR * HD + h * D, sq.cv[li].data() + g.u * KR * HD + h * D, HD, KR, D,
                    L.cca.null_k + h * D, L.cca.null_v + h * D, nullptr, sq.mask.data() + g.u * KR, P);
    });
    nn::linear_forward(ys.data(), o.data(), L.cca.to_out_w, L.cca.to_out_b, Rs, HD, Cd);
    y.assign(static_cast<std::size_t>(R * Cd), T(0));
    for (std::int64_t i = 0; i < Rs; i++) std::copy_n(ys.begin() + i * Cd, Cd, y.begin() + sel[i] * Cd);
}

template class CachedDecoder<float>;
template class CachedDecoder<double>;

}  // namespace retro
