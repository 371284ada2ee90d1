// Gradient checks in double (central differences, rel. err <= 1e-6) for every op in lib/nn, on random
// inputs including masked keys, fully masked rows, ignored targets and chunk-grid edge cases; plus
// float-vs-double and small exact-value checks of the forward passes.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "nn/attention.h"
#include "nn/attention_layer.h"
#include "nn/chunked_cross_attention.h"
#include "nn/copy_head.h"
#include "nn/cross_entropy.h"
#include "nn/embedding.h"
#include "nn/feed_forward.h"
#include "nn/gelu.h"
#include "nn/linear.h"
#include "nn/rmsnorm.h"
#include "nn/rotary.h"
#include "test_nn_gradcheck.h"

using namespace retro;
using namespace retro::nn;
using retro::test::dot;
using retro::test::random_doubles;
using Vec = std::vector<double>;

TEST_CASE("nn: embedding and positions gradient") {
    std::mt19937 rng(1);
    const std::int64_t V = 7, C = 5, B = 2, Tn = 4, N = B * Tn;
    std::vector<std::int32_t> ids = {0, 3, 3, 6, 1, 0, 3, 2};
    Vec table = random_doubles(V * C, rng), pos = random_doubles(Tn * C, rng), w = random_doubles(N * C, rng);
    Vec out(N * C);
    auto loss = [&] {
        embedding_forward(out.data(), ids.data(), table.data(), N, V, C);
        position_add_forward(out.data(), pos.data(), B, Tn, C);
        return dot(w, out.data());
    };
    loss();
    CHECK(out[1 * C + 2] == doctest::Approx(table[3 * C + 2] + pos[1 * C + 2]));
    Vec dtable(V * C, 0.0), dpos(Tn * C, 0.0);
    embedding_backward(dtable.data(), w.data(), ids.data(), N, C);
    position_add_backward(dpos.data(), w.data(), B, Tn, C);
    RETRO_GRAD_CHECK("table", loss, table.data(), dtable.data(), table.size());
    RETRO_GRAD_CHECK("pos", loss, pos.data(), dpos.data(), pos.size());
    CHECK(dtable[5 * C] == 0.0);   // id 5 unused
}

TEST_CASE("nn: rmsnorm matches RP and gradient") {
    std::mt19937 rng(2);
    const std::int64_t N = 5, C = 6;
    Vec x = random_doubles(N * C, rng), gamma = random_doubles(C, rng), w = random_doubles(N * C, rng);
    Vec y(N * C), norm(N);
    auto loss = [&] {
        rmsnorm_forward(y.data(), norm.data(), x.data(), gamma.data(), N, C);
        return dot(w, y.data());
    };
    loss();
    double ss = 0;
    for (int c = 0; c < C; c++) ss += x[C + c] * x[C + c];
    CHECK(y[C + 3] == doctest::Approx(x[C + 3] / (std::sqrt(ss) / std::sqrt(double(C))) * gamma[3]).epsilon(1e-14));
    Vec dx(N * C), dg(C, 0.0);
    rmsnorm_backward(dx.data(), dg.data(), w.data(), x.data(), gamma.data(), norm.data(), N, C);
    RETRO_GRAD_CHECK("x", loss, x.data(), dx.data(), x.size());
    RETRO_GRAD_CHECK("gamma", loss, gamma.data(), dg.data(), gamma.size());
}

TEST_CASE("nn: linear gradient with and without bias") {
    std::mt19937 rng(3);
    const std::int64_t N = 5, I = 4, O = 3;
    for (bool bias : {true, false}) {
        Vec x = random_doubles(N * I, rng), W = random_doubles(O * I, rng), b = random_doubles(O, rng),
            w = random_doubles(N * O, rng), y(N * O);
        auto loss = [&] {
            linear_forward(y.data(), x.data(), W.data(), bias ? b.data() : nullptr, N, I, O);
            return dot(w, y.data());
        };
        loss();
        CHECK(y[1 * O + 2] == doctest::Approx(x[I] * W[2 * I] + x[I + 1] * W[2 * I + 1] + x[I + 2] * W[2 * I + 2] +
                                              x[I + 3] * W[2 * I + 3] + (bias ? b[2] : 0.0)));
        Vec dx(N * I), dW(O * I, 0.0), db(O, 0.0);
        linear_backward(dx.data(), dW.data(), bias ? db.data() : nullptr, w.data(), x.data(), W.data(), N, I, O);
        RETRO_GRAD_CHECK("x", loss, x.data(), dx.data(), x.size());
        RETRO_GRAD_CHECK("W", loss, W.data(), dW.data(), W.size());
        if (bias) RETRO_GRAD_CHECK("b", loss, b.data(), db.data(), b.size());
    }
}

TEST_CASE("nn: gelu (erf) gradient") {
    std::mt19937 rng(4);
    const std::int64_t N = 40;
    Vec x = random_doubles(N, rng, 4.0), w = random_doubles(N, rng), y(N);
    auto loss = [&] {
        gelu_forward(y.data(), x.data(), N);
        return dot(w, y.data());
    };
    loss();
    CHECK(y[0] == doctest::Approx(0.5 * x[0] * (1 + std::erf(x[0] / std::sqrt(2.0)))));
    Vec dx(N);
    gelu_backward(dx.data(), w.data(), x.data(), N);
    RETRO_GRAD_CHECK("x", loss, x.data(), dx.data(), x.size());
}

TEST_CASE("nn: partial rotary gradient and identity at position 0") {
    std::mt19937 rng(5);
    const std::int64_t B = 2, N = 5, H = 2, D = 6, R = 4;
    auto table = rotary_table<double>({0, 3, 1, 17, 2}, R);
    Vec x = random_doubles(B * N * H * D, rng), w = random_doubles(x.size(), rng), y(x.size());
    auto loss = [&] {
        rotary_forward(y.data(), x.data(), table, B, N, H, D);
        return dot(w, y.data());
    };
    loss();
    for (int j = 0; j < H * D; j++) CHECK(y[j] == x[j]);          // position 0: identity
    CHECK(y[H * D + 4] == x[H * D + 4]);                            // dims >= R pass through
    const double a = 3.0;                                           // row 1, head 0, pair (0, 2), freq 1
    CHECK(y[H * D + 0] == doctest::Approx(x[H * D] * std::cos(a) - x[H * D + 2] * std::sin(a)));
    Vec dx(x.size());
    rotary_backward(dx.data(), w.data(), table, B, N, H, D);
    RETRO_GRAD_CHECK("x", loss, x.data(), dx.data(), x.size());
}

namespace {
void check_attention_core(AttentionShape s, const std::vector<std::uint8_t>* mask, unsigned seed) {
    std::mt19937 rng(seed);
    const std::int64_t HD = s.H * s.D;
    Vec q = random_doubles(s.B * s.Nq * HD, rng), k = random_doubles(s.B * s.Nk * HD, rng),
        v = random_doubles(k.size(), rng), nk = random_doubles(HD, rng), nv = random_doubles(HD, rng),
        w = random_doubles(q.size(), rng), out(q.size()), probs(s.B * s.H * s.Nq * s.keys());
    const std::uint8_t* m = mask ? mask->data() : nullptr;
    auto loss = [&] {
        attention_forward(out.data(), probs.data(), q.data(), k.data(), v.data(), nk.data(), nv.data(), m, s);
        return dot(w, out.data());
    };
    loss();
    Vec dq(q.size()), dk(k.size()), dv(v.size()), dnk(HD, 0.0), dnv(HD, 0.0);
    attention_backward(dq.data(), dk.data(), dv.data(), dnk.data(), dnv.data(), w.data(), probs.data(), q.data(),
                       k.data(), v.data(), nk.data(), nv.data(), m, s);
    RETRO_GRAD_CHECK("q", loss, q.data(), dq.data(), q.size());
    RETRO_GRAD_CHECK("k", loss, k.data(), dk.data(), k.size());
    RETRO_GRAD_CHECK("v", loss, v.data(), dv.data(), v.size());
    if (s.null_kv) {
        RETRO_GRAD_CHECK("null_k", loss, nk.data(), dnk.data(), nk.size());
        RETRO_GRAD_CHECK("null_v", loss, nv.data(), dnv.data(), nv.size());
    }
    // masked keys get exactly no gradient and no weight
    if (mask)
        for (std::int64_t b = 0; b < s.B; b++)
            for (std::int64_t j = 0; j < s.Nk; j++)
                if (!(*mask)[b * s.Nk + j]) {
                    bool all_masked = true;
                    for (std::int64_t jj = 0; jj < s.Nk; jj++) all_masked = all_masked && !(*mask)[b * s.Nk + jj];
                    for (std::int64_t c = 0; c < HD; c++) {
                        CHECK(dk[(b * s.Nk + j) * HD + c] == 0.0);
                        if (!all_masked || s.null_kv) CHECK(dv[(b * s.Nk + j) * HD + c] == 0.0);
                    }
                }
}
}  // namespace

TEST_CASE("nn: attention core gradient - causal / masked / fully masked / null k/v") {
    SUBCASE("causal self") { check_attention_core({2, 5, 5, 2, 3, true, false}, nullptr, 10); }
    SUBCASE("causal with fewer queries than keys (bottom-right aligned)") {
        check_attention_core({1, 3, 5, 2, 3, true, false}, nullptr, 11);
    }
    SUBCASE("bidirectional with pad mask and a fully masked item") {
        std::vector<std::uint8_t> mask = {1, 0, 1, 1, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1};
        check_attention_core({3, 5, 5, 2, 3, false, false}, &mask, 12);
    }
    SUBCASE("cross with null k/v, fully masked context") {
        std::vector<std::uint8_t> mask = {1, 1, 0, 1, 0, 1, 0, 0, 0, 0, 0, 0};
        check_attention_core({2, 4, 6, 2, 3, false, true}, &mask, 13);
    }
}

TEST_CASE("nn: fully masked row is a uniform average (RP's -finfo.max fill)") {
    AttentionShape s{1, 2, 3, 1, 2, false, false};
    std::vector<std::uint8_t> mask = {0, 0, 0};
    Vec q = {1, 2, 3, 4}, k = {1, 0, 0, 1, 5, 5}, v = {1, 2, 3, 4, 5, 6}, out(4), probs(6);
    attention_forward(out.data(), probs.data(), q.data(), k.data(), v.data(), (const double*)nullptr,
                      (const double*)nullptr, mask.data(), s);
    CHECK(out[0] == doctest::Approx(3.0));
    CHECK(out[1] == doctest::Approx(4.0));
}

TEST_CASE("nn: attention layer gradient - self causal rotary / cross / null k/v") {
    std::mt19937 rng(20);
    for (int variant = 0; variant < 3; variant++) {
        CAPTURE(variant);
        AttentionLayerShape s;
        s.B = 2;
        s.Nq = 4;
        s.Nk = variant == 0 ? 4 : 5;
        s.dim = 5;
        s.context_dim = variant == 0 ? 5 : 3;
        s.heads = 2;
        s.dim_head = 6;
        s.causal = variant == 0;
        s.null_kv = variant == 2;
        s.self = variant == 0;
        const std::int64_t HD = s.inner();
        Vec wq = random_doubles(HD * s.dim, rng), wk = random_doubles(HD * s.context_dim, rng),
            wv = random_doubles(HD * s.context_dim, rng), wo = random_doubles(s.dim * HD, rng),
            bo = random_doubles(s.dim, rng), nk = random_doubles(HD, rng), nv = random_doubles(HD, rng);
        Vec x = random_doubles(s.B * s.Nq * s.dim, rng), ctx = random_doubles(s.B * s.Nk * s.context_dim, rng);
        Vec w = random_doubles(x.size(), rng), y(x.size());
        std::vector<std::uint8_t> mask = {1, 0, 1, 1, 0, 0, 0, 0, 0, 0};
        auto qrot = rotary_table<double>(variant == 2 ? std::vector<std::int64_t>{6, 0, 0, 0}
                                                      : std::vector<std::int64_t>{0, 1, 2, 3},
                                         4);
        auto krot = rotary_table<double>(variant == 0 ? std::vector<std::int64_t>{0, 1, 2, 3}
                                                      : std::vector<std::int64_t>{0, 1, 2, 0, 1},
                                         4);
        AttentionParams<double> p{wq.data(), wk.data(), wv.data(), wo.data(), bo.data(),
                                  s.null_kv ? nk.data() : nullptr, s.null_kv ? nv.data() : nullptr};
        AttentionLayerCache<double> cache;
        const std::uint8_t* m = variant >= 1 ? mask.data() : nullptr;
        auto loss = [&] {
            attention_layer_forward(y.data(), cache, x.data(), s.self ? nullptr : ctx.data(), m, &qrot, &krot, p, s);
            return dot(w, y.data());
        };
        loss();
        Vec gwq(wq.size(), 0.0), gwk(wk.size(), 0.0), gwv(wv.size(), 0.0), gwo(wo.size(), 0.0), gbo(bo.size(), 0.0),
            gnk(HD, 0.0), gnv(HD, 0.0), dx(x.size()), dctx(ctx.size());
        AttentionParams<double> g{gwq.data(), gwk.data(), gwv.data(), gwo.data(), gbo.data(), gnk.data(), gnv.data()};
        attention_layer_backward(dx.data(), s.self ? nullptr : dctx.data(), g, w.data(), cache, p, s);
        RETRO_GRAD_CHECK("x", loss, x.data(), dx.data(), x.size());
        if (!s.self) RETRO_GRAD_CHECK("context", loss, ctx.data(), dctx.data(), ctx.size());
        RETRO_GRAD_CHECK("to_q", loss, wq.data(), gwq.data(), wq.size());
        RETRO_GRAD_CHECK("to_k", loss, wk.data(), gwk.data(), wk.size());
        RETRO_GRAD_CHECK("to_v", loss, wv.data(), gwv.data(), wv.size());
        RETRO_GRAD_CHECK("to_out.weight", loss, wo.data(), gwo.data(), wo.size());
        RETRO_GRAD_CHECK("to_out.bias", loss, bo.data(), gbo.data(), bo.size());
        if (s.null_kv) {
            RETRO_GRAD_CHECK("null_k", loss, nk.data(), gnk.data(), nk.size());
            RETRO_GRAD_CHECK("null_v", loss, nv.data(), gnv.data(), nv.size());
        }
    }
}

TEST_CASE("nn: feed-forward gradient") {
    std::mt19937 rng(30);
    const std::int64_t N = 4, dim = 3, inner = 12;
    Vec w1 = random_doubles(inner * dim, rng), b1 = random_doubles(inner, rng), w2 = random_doubles(dim * inner, rng),
        b2 = random_doubles(dim, rng), x = random_doubles(N * dim, rng), w = random_doubles(N * dim, rng), y(N * dim);
    FeedForwardParams<double> p{w1.data(), b1.data(), w2.data(), b2.data()};
    FeedForwardCache<double> cache;
    auto loss = [&] {
        feed_forward_forward(y.data(), cache, x.data(), p, N, dim, inner);
        return dot(w, y.data());
    };
    loss();
    Vec g1(w1.size(), 0.0), gb1(b1.size(), 0.0), g2(w2.size(), 0.0), gb2(b2.size(), 0.0), dx(x.size());
    FeedForwardParams<double> g{g1.data(), gb1.data(), g2.data(), gb2.data()};
    feed_forward_backward(dx.data(), g, w.data(), cache, p, N, dim, inner);
    RETRO_GRAD_CHECK("x", loss, x.data(), dx.data(), x.size());
    RETRO_GRAD_CHECK("ff.0.weight", loss, w1.data(), g1.data(), w1.size());
    RETRO_GRAD_CHECK("ff.0.bias", loss, b1.data(), gb1.data(), b1.size());
    RETRO_GRAD_CHECK("ff.3.weight", loss, w2.data(), g2.data(), w2.size());
    RETRO_GRAD_CHECK("ff.3.bias", loss, b2.data(), gb2.data(), b2.size());
}

TEST_CASE("nn: cross-entropy with ignore index gradient") {
    std::mt19937 rng(40);
    const std::int64_t N = 6, V = 5;
    std::vector<std::int32_t> t = {1, 0, 4, 0, 2, 3};   // 0 = ignored
    Vec logits = random_doubles(N * V, rng, 3.0), lse(N);
    std::int64_t valid = 0;
    auto loss = [&] { return cross_entropy_forward(lse.data(), &valid, logits.data(), t.data(), N, V, 0); };
    const double l = loss();
    CHECK(valid == 4);
    double ref = 0;
    for (int n : {0, 2, 4, 5}) {
        double s = 0;
        for (int v = 0; v < V; v++) s += std::exp(logits[n * V + v]);
        ref += std::log(s) - logits[n * V + t[n]];
    }
    CHECK(l == doctest::Approx(ref / 4).epsilon(1e-12));
    Vec d(N * V);
    cross_entropy_backward(d.data(), 1.0, logits.data(), lse.data(), t.data(), N, V, 0, valid);
    RETRO_GRAD_CHECK("logits", loss, logits.data(), d.data(), logits.size());
    for (int v = 0; v < V; v++) CHECK(d[1 * V + v] == 0.0);
}

TEST_CASE("nn: cross-entropy is the same for a row's logits shifted far below or above 0 - float and double") {
    // softmax and its log-sum-exp are invariant to adding a constant to a row: rows shifted by -300 .. +300 (float: every
    // exp of a logit itself under- or overflows; double: -800) give the unshifted loss and gradient. (The per-row max
    // subtracted before the exps is what keeps them in range.)
    std::mt19937 rng(41);
    const std::int64_t N = 4, V = 37;
    const std::vector<std::int32_t> t = {3, 0, 36, 11};
    const Vec base = random_doubles(N * V, rng, 3.0);
    auto run = [&](auto zero, double shift, std::vector<double>& grad) {
        using T = decltype(zero);
        std::vector<T> logits(base.size()), lse(static_cast<std::size_t>(N)), d(base.size());
        for (std::size_t i = 0; i < base.size(); ++i) logits[i] = static_cast<T>(base[i] + shift);
        std::int64_t valid = 0;
        const T loss = cross_entropy_forward(lse.data(), &valid, logits.data(), t.data(), N, V, -1);
        cross_entropy_backward(d.data(), T(1), logits.data(), lse.data(), t.data(), N, V, -1, valid);
        grad.assign(d.begin(), d.end());
        return static_cast<double>(loss);
    };
    std::vector<double> g0, g;
    const double want = run(0.0, 0.0, g0);
    for (const double shift : {-800.0, -300.0, -90.0, 60.0, 300.0}) {
        CAPTURE(shift);
        CHECK(run(0.0, shift, g) == doctest::Approx(want).epsilon(1e-9));
        for (std::size_t i = 0; i < g.size(); ++i) CHECK(g[i] == doctest::Approx(g0[i]).epsilon(1e-9).scale(1e-12));
        if (shift < -400) continue;   // (beyond float)
        CHECK(run(0.0f, shift, g) == doctest::Approx(want).epsilon(2e-4));
        double worst = 0;
        for (std::size_t i = 0; i < g.size(); ++i) worst = std::max(worst, std::abs(g[i] - g0[i]));
        CHECK(worst < 1e-4);
    }
}

TEST_CASE("nn: chunked cross-attention gradient and chunk grid") {
    std::mt19937 rng(50);
    for (std::int64_t n : {9, 11, 2}) {   // multiple of cs, partial last chunk, shorter than a chunk
        CAPTURE(n);
        CcaShape s;
        s.B = 2;
        s.n = n;
        s.chunk = 3;
        s.chunks = n / 3;
        s.neighbours = 2;
        s.retrieved = 4;
        s.dim = 5;
        s.heads = 2;
        s.dim_head = 6;
        s.rot_dim = 4;
        const std::int64_t HD = 12, l = s.chunks, KR = s.neighbours * s.retrieved;
        Vec wq = random_doubles(HD * s.dim, rng), wk = random_doubles(HD * s.dim, rng),
            wv = random_doubles(HD * s.dim, rng), wo = random_doubles(s.dim * HD, rng), bo = random_doubles(s.dim, rng),
            nk = random_doubles(HD, rng), nv = random_doubles(HD, rng);
        Vec x = random_doubles(s.B * n * s.dim, rng), E = random_doubles(s.B * l * KR * s.dim, rng);
        Vec w = random_doubles(x.size(), rng), y(x.size());
        std::vector<std::uint8_t> mask(static_cast<std::size_t>(s.B * l * KR), 1);
        if (l > 0) {
            for (std::int64_t j = 0; j < s.retrieved; j++) mask[j] = 0;   // (b0, u0): first neighbour is -1
            for (std::int64_t j = 0; j < KR; j++) mask[(s.B * l - 1) * KR + j] = 0;   // last chunk: no neighbours
            mask[KR + 6] = 0;                                                      // a missing continuation
        }
        AttentionParams<double> p{wq.data(), wk.data(), wv.data(), wo.data(), bo.data(), nk.data(), nv.data()};
        CcaCache<double> cache;
        auto loss = [&] {
            cca_forward(y.data(), cache, x.data(), E.data(), mask.data(), p, s);
            return dot(w, y.data());
        };
        loss();
        // positions before cs-1 get nothing; everything else gets the output bias at least
        for (std::int64_t b = 0; b < s.B; b++)
            for (std::int64_t t = 0; t < n; t++) {
                bool zero = true;
                for (std::int64_t c = 0; c < s.dim; c++) zero = zero && y[(b * n + t) * s.dim + c] == 0.0;
                CHECK(zero == (t < s.chunk - 1 || l == 0));
            }
        Vec gwq(wq.size(), 0.0), gwk(wk.size(), 0.0), gwv(wv.size(), 0.0), gwo(wo.size(), 0.0), gbo(bo.size(), 0.0),
            gnk(HD, 0.0), gnv(HD, 0.0), dx(x.size()), dE(E.size());
        AttentionParams<double> g{gwq.data(), gwk.data(), gwv.data(), gwo.data(), gbo.data(), gnk.data(), gnv.data()};
        cca_backward(dx.data(), dE.data(), g, w.data(), cache, p, s);
        if (l == 0) {
            for (double e : dx) CHECK(e == 0.0);
            continue;
        }
        RETRO_GRAD_CHECK("x", loss, x.data(), dx.data(), x.size());
        RETRO_GRAD_CHECK("E", loss, E.data(), dE.data(), E.size());
        RETRO_GRAD_CHECK("to_q", loss, wq.data(), gwq.data(), wq.size());
        RETRO_GRAD_CHECK("to_k", loss, wk.data(), gwk.data(), wk.size());
        RETRO_GRAD_CHECK("to_v", loss, wv.data(), gwv.data(), wv.size());
        RETRO_GRAD_CHECK("to_out.weight", loss, wo.data(), gwo.data(), wo.size());
        RETRO_GRAD_CHECK("to_out.bias", loss, bo.data(), gbo.data(), bo.size());
        RETRO_GRAD_CHECK("null_k", loss, nk.data(), gnk.data(), nk.size());
        RETRO_GRAD_CHECK("null_v", loss, nv.data(), gnv.data(), nv.size());
        // chunk grid: perturbing chunk u's neighbours changes exactly positions (u+1)cs-1 .. min((u+2)cs-2, n-1)
        loss();
        for (std::int64_t u = 0; u < l; u++) {
            Vec y0 = y;
            Vec E2 = E;
            for (std::int64_t j = 0; j < KR * s.dim; j++) E[(u)*KR * s.dim + j] += 0.5;   // batch item 0, chunk u
            loss();
            for (std::int64_t t = 0; t < n; t++) {
                bool changed = false;
                for (std::int64_t c = 0; c < s.dim; c++) changed = changed || y[t * s.dim + c] != y0[t * s.dim + c];
                const bool expect = t >= (u + 1) * s.chunk - 1 && t <= (u + 2) * s.chunk - 2;
                CAPTURE(u);
                CAPTURE(t);
                CHECK(changed == expect);
            }
            E = E2;
            loss();
        }
    }
}

TEST_CASE("nn: CCA rotary query positions copy RP's quirk, or are aligned at cs-1+i") {
    auto q = cca_query_positions(4);
    CHECK(q == std::vector<std::int64_t>{6, 0, 0, 0});
    CHECK(cca_query_positions(4, true) == std::vector<std::int64_t>{3, 4, 5, 6});
    auto k = cca_key_positions(2, 3);
    CHECK(k == std::vector<std::int64_t>{0, 1, 2, 0, 1, 2});
}

TEST_CASE("nn: float ops agree with double") {
    std::mt19937 rng(60);
    AttentionLayerShape s;
    s.B = 2; s.Nq = 6; s.Nk = 6; s.dim = 8; s.context_dim = 8; s.heads = 2; s.dim_head = 8; s.causal = true;
    const std::int64_t HD = 16;
    Vec wq = random_doubles(HD * 8, rng), wk = random_doubles(HD * 8, rng), wv = random_doubles(HD * 8, rng),
        wo = random_doubles(8 * HD, rng), bo = random_doubles(8, rng), x = random_doubles(2 * 6 * 8, rng), y(x.size());
    auto to_f = [](const Vec& v) { return std::vector<float>(v.begin(), v.end()); };
    auto fwq = to_f(wq), fwk = to_f(wk), fwv = to_f(wv), fwo = to_f(wo), fbo = to_f(bo), fx = to_f(x);
    std::vector<float> fy(x.size());
    auto rot = rotary_table<double>({0, 1, 2, 3, 4, 5}, 8);
    auto frot = rotary_table<float>({0, 1, 2, 3, 4, 5}, 8);
    AttentionLayerCache<double> c;
    AttentionLayerCache<float> fc;
    attention_layer_forward(y.data(), c, x.data(), (const double*)nullptr, nullptr, &rot, &rot,
                            AttentionParams<double>{wq.data(), wk.data(), wv.data(), wo.data(), bo.data()}, s);
    attention_layer_forward(fy.data(), fc, fx.data(), (const float*)nullptr, nullptr, &frot, &frot,
                            AttentionParams<float>{fwq.data(), fwk.data(), fwv.data(), fwo.data(), fbo.data()}, s);
    double md = 0, mx = 0;
    for (std::size_t i = 0; i < y.size(); i++) {
        md = std::max(md, std::abs(y[i] - fy[i]));
        mx = std::max(mx, std::abs(y[i]));
    }
    CHECK(md / mx < 1e-5);
}

namespace {
// The copy head's candidate by its definition (nn/copy_head.h), searched the other way round: the longest L first,
// then the last j whose L tokens all match (pads never match) and whose next token is not a pad.
nn::CopyCandidate brute_copy_candidate(const std::vector<std::int32_t>& h, std::int64_t p, const std::int32_t* N,
                                       std::int64_t r, std::int32_t pad) {
    for (std::int64_t L = std::min<std::int64_t>(nn::kCopyMaxMatch, p + 1); L >= 1; L--)
        for (std::int64_t j = r - 2; j >= L - 1; j--) {
            if (N[j + 1] == pad) continue;
            bool all = true;
            for (std::int64_t t = 0; t < L && all; t++) all = N[j - t] != pad && N[j - t] == h[static_cast<std::size_t>(p - t)];
            if (all) return {N[j + 1], static_cast<std::int32_t>(nn::copy_bucket(L)), static_cast<std::int32_t>(L)};
        }
    return {};
}
}  // namespace

TEST_CASE("nn: copy head candidates against a brute-force search") {
    // by hand: history ... 5 6 7 | neighbour 1 5 6 7 9 5 6 7 0 -> the later 5 6 7 is followed by a pad, the first by 9
    const std::vector<std::int32_t> h = {3, 5, 6, 7}, N = {1, 5, 6, 7, 9, 5, 6, 7, 0};
    nn::CopyCandidate c;
    nn::copy_candidates(&c, h.data(), 3, N.data(), 1, static_cast<std::int64_t>(N.size()), 0);
    CHECK(c.token == 9);
    CHECK(c.length == 3);
    CHECK(c.bucket == 2);
    const std::vector<std::int32_t> none = {1, 2, 4, 8};   // no token of the history: no candidate
    nn::copy_candidates(&c, h.data(), 3, none.data(), 1, 4, 0);
    CHECK(c.token == -1);
    CHECK(c.bucket == -1);
    // buckets: 1, 2, 3, 4, 5-6, 7-8, 9-12, 13-16, 17-24, 25-32, 33-48, 49-64
    const std::int64_t edges[][2] = {{1, 0}, {4, 3}, {5, 4}, {6, 4}, {8, 5}, {9, 6}, {16, 7}, {17, 8}, {32, 9},
                                     {33, 10}, {48, 10}, {64, 11}};
    for (const auto& e : edges) CHECK(nn::copy_bucket(e[0]) == e[1]);
    // random histories over a 4-token vocabulary (0 = pad) against random neighbours, k = 3, r = 10 and 70 (past
    // the 64-token cap: a neighbour that repeats the history)
    std::mt19937 rng(5);
    for (std::int64_t r : {10, 70})
        for (int trial = 0; trial < 200; trial++) {
            const std::int64_t k = 3, p = static_cast<std::int64_t>(rng() % 80);
            std::vector<std::int32_t> hist(static_cast<std::size_t>(p + 1)), nb(static_cast<std::size_t>(k * r));
            for (auto& x : hist) x = 1 + static_cast<std::int32_t>(rng() % 3);
            for (auto& x : nb) x = static_cast<std::int32_t>(rng() % 4);
            if (trial % 5 == 0)   // neighbour 0 holds the history's tail verbatim
                for (std::int64_t t = 0; t + 1 < r && t <= p; t++) nb[static_cast<std::size_t>(r - 2 - t)] = hist[static_cast<std::size_t>(p - t)];
            std::vector<nn::CopyCandidate> got(static_cast<std::size_t>(k));
            nn::copy_candidates(got.data(), hist.data(), p, nb.data(), k, r, 0);
            for (std::int64_t m = 0; m < k; m++) {
                const auto want = brute_copy_candidate(hist, p, nb.data() + m * r, r, 0);
                INFO("r " << r << " trial " << trial << " neighbour " << m);
                CHECK(got[static_cast<std::size_t>(m)].token == want.token);
                CHECK(got[static_cast<std::size_t>(m)].length == want.length);
                CHECK(got[static_cast<std::size_t>(m)].bucket == want.bucket);
            }
        }
}

TEST_CASE("nn: copy head gates are the documented 16 x bias + weight . xn, added per candidate, and their gradients") {
    // nn/copy_head.h by hand on small exact values (every product and sum below is exact in double): two rows, three
    // candidates a row (one none, two naming the same token: their gates both add), buckets 0, 1 and 11
    const std::int64_t rows = 2, k = 3, V = 5, C = 2;
    std::vector<double> bias(nn::kCopyBuckets, 0.0), weight(nn::kCopyBuckets * C, 0.0);
    bias[0] = 0.25;
    bias[1] = -0.5;
    bias[11] = 0.125;
    weight[0 * C + 0] = 1.0;  weight[0 * C + 1] = 2.0;
    weight[1 * C + 0] = -3.0; weight[1 * C + 1] = 0.5;
    weight[11 * C + 0] = 4.0; weight[11 * C + 1] = -1.0;
    const std::vector<double> xn = {1.5, -2.0, 0.5, 3.0};
    std::vector<nn::CopyCandidate> cand(rows * k);
    cand[0] = {2, 1, 2};    // row 0: token 2, bucket 1
    cand[1] = {};           // none
    cand[2] = {4, 0, 1};    // token 4, bucket 0
    cand[3] = {3, 11, 60};  // row 1: token 3 twice, buckets 11 and 0
    cand[4] = {3, 0, 1};
    cand[5] = {};
    std::vector<double> logits(rows * V);
    for (std::size_t i = 0; i < logits.size(); i++) logits[i] = 0.0625 * static_cast<double>(i);
    std::vector<double> want = logits;
    // gate = 16 bias[b] + weight[b] . xn[row]
    want[0 * V + 2] += 16 * -0.5 + (-3.0 * 1.5 + 0.5 * -2.0);                 // -8 - 5.5
    want[0 * V + 4] += 16 * 0.25 + (1.0 * 1.5 + 2.0 * -2.0);                  // 4 - 2.5
    want[1 * V + 3] += 16 * 0.125 + (4.0 * 0.5 + -1.0 * 3.0) + 16 * 0.25 + (1.0 * 0.5 + 2.0 * 3.0);
    nn::copy_head_forward(logits.data(), xn.data(), cand.data(), rows, k, V, C, bias.data(), weight.data());
    for (std::size_t i = 0; i < logits.size(); i++) {
        CAPTURE(i);
        CHECK(logits[i] == want[i]);
    }
    // backward: dbias[b] += 16 g, dweight[b] += g xn, dxn += g weight[b] (g = dlogits at the candidate), += into what
    // the buffers hold
    std::vector<double> dlogits(rows * V, 0.0);
    dlogits[0 * V + 2] = 0.5;
    dlogits[0 * V + 4] = -1.0;
    dlogits[1 * V + 3] = 2.0;
    dlogits[1 * V + 0] = 7.0;   // no candidate there: no gradient from it
    std::vector<double> dbias(nn::kCopyBuckets, 1.0), dweight(nn::kCopyBuckets * C, 0.0), dxn(rows * C, 0.0);
    nn::copy_head_backward(dxn.data(), dbias.data(), dweight.data(), dlogits.data(), xn.data(), cand.data(), rows, k, V,
                           C, weight.data());
    std::vector<double> want_dbias(nn::kCopyBuckets, 1.0), want_dweight(nn::kCopyBuckets * C, 0.0);
    want_dbias[1] += 16 * 0.5;
    want_dbias[0] += 16 * -1.0 + 16 * 2.0;
    want_dbias[11] += 16 * 2.0;
    want_dweight[1 * C + 0] = 0.5 * 1.5;   want_dweight[1 * C + 1] = 0.5 * -2.0;
    want_dweight[0 * C + 0] = -1.0 * 1.5 + 2.0 * 0.5;
    want_dweight[0 * C + 1] = -1.0 * -2.0 + 2.0 * 3.0;
    want_dweight[11 * C + 0] = 2.0 * 0.5;  want_dweight[11 * C + 1] = 2.0 * 3.0;
    const std::vector<double> want_dxn = {0.5 * -3.0 + -1.0 * 1.0, 0.5 * 0.5 + -1.0 * 2.0,
                                          2.0 * 4.0 + 2.0 * 1.0, 2.0 * -1.0 + 2.0 * 2.0};
    CHECK(dbias == want_dbias);
    CHECK(dweight == want_dweight);
    CHECK(dxn == want_dxn);
    // float: the same gates (exact in float too)
    std::vector<float> lf(rows * V), xf(xn.begin(), xn.end()), bf(bias.begin(), bias.end()), wf(weight.begin(), weight.end());
    for (std::size_t i = 0; i < lf.size(); i++) lf[i] = 0.0625f * static_cast<float>(i);
    nn::copy_head_forward(lf.data(), xf.data(), cand.data(), rows, k, V, C, bf.data(), wf.data());
    for (std::size_t i = 0; i < lf.size(); i++) CHECK(static_cast<double>(lf[i]) == want[i]);
}

TEST_CASE("nn: rmsnorm clamps a tiny RMS at eps 1e-8 (RP's clamp, not an added eps) and passes no gradient through a clamped one") {
    // RP: norm = ||x|| C^-1/2, y = x / norm.clamp(min=1e-8) * g; torch's clamp passes no gradient below its bound.
    // Rows of RMS 1e-7 (above eps), 1e-9 (below: clamped) and 0; the gradient checks above use rows of RMS ~0.5,
    // where neither an added eps nor eps 1e-6 shows.
    const std::int64_t N = 3, C = 4;
    const double eps = 1e-8;
    Vec x = {1e-7, -1e-7, 1e-7, -1e-7, 2e-9, 0, 0, 0, 0, 0, 0, 0}, gamma = {1, 2, 3, 4}, y(N * C), norm(N);
    rmsnorm_forward(y.data(), norm.data(), x.data(), gamma.data(), N, C);
    const double rms[N] = {1e-7, 1e-9, 0};
    for (std::int64_t n = 0; n < N; n++)
        for (std::int64_t c = 0; c < C; c++) {
            CAPTURE(n);
            CAPTURE(c);
            const double want = x[n * C + c] / std::max(rms[n], eps) * gamma[c];
            CHECK(y[n * C + c] == doctest::Approx(want).epsilon(1e-12));
        }
    // backward against the derivative of y = x g / r, r = ||x|| / sqrt(C): dx_j = g_j dy_j / r - x_j S / (r^3 C) with
    // S = sum_c g_c dy_c x_c, where r >= eps; g_j dy_j / eps where the clamp holds
    const Vec dy = {0.3, -0.7, 0.2, 0.9, 0.5, -0.1, 0.4, -0.6, 0.8, 0.1, -0.3, 0.2};
    Vec dx(N * C), dg(C, 0.0);
    rmsnorm_backward(dx.data(), dg.data(), dy.data(), x.data(), gamma.data(), norm.data(), N, C);
    for (std::int64_t n = 0; n < N; n++) {
        double S = 0;
        for (std::int64_t c = 0; c < C; c++) S += gamma[c] * dy[n * C + c] * x[n * C + c];
        for (std::int64_t c = 0; c < C; c++) {
            CAPTURE(n);
            CAPTURE(c);
            const double r = rms[n];
            const double want = r >= eps ? gamma[c] * dy[n * C + c] / r - x[n * C + c] * S / (r * r * r * C)
                                         : gamma[c] * dy[n * C + c] / eps;
            CHECK(dx[n * C + c] == doctest::Approx(want).epsilon(1e-12));
        }
    }
    for (std::int64_t c = 0; c < C; c++) {
        double want = 0;
        for (std::int64_t n = 0; n < N; n++) want += dy[n * C + c] * x[n * C + c] / std::max(rms[n], eps);
        CHECK(dg[c] == doctest::Approx(want).epsilon(1e-12));
    }
}
