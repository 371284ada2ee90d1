// The row-incremental entry points KV-cached decoding uses (nn/attention_kv_cache.h, cca_context_forward +
// cca_rows_forward of nn/chunked_cross_attention.h) against the whole-sequence ops training uses
// (attention_layer_forward, cca_forward), in double: rows fed in uneven pieces, two sequences of different
// lengths side by side, a partial last chunk, masked neighbours.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "nn/attention_kv_cache.h"
#include "nn/attention_layer.h"
#include "nn/chunked_cross_attention.h"
#include "nn/rotary.h"
#include "test_nn_gradcheck.h"

using namespace retro;
using namespace retro::nn;
using retro::test::random_doubles;
using Vec = std::vector<double>;

namespace {

double max_rel(const double* a, const double* ref, std::size_t n) {
    double diff = 0, scale = 0;
    for (std::size_t i = 0; i < n; i++) {
        diff = std::max(diff, std::abs(a[i] - ref[i]));
        scale = std::max(scale, std::abs(ref[i]));
    }
    return scale > 0 ? diff / scale : diff;
}

std::vector<std::int64_t> iota(std::int64_t n) {
    std::vector<std::int64_t> v(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; i++) v[static_cast<std::size_t>(i)] = i;
    return v;
}

}  // namespace

TEST_CASE("nn: KV-cached attention step equals the causal attention layer - fed in pieces") {
    std::mt19937 rng(70);
    AttentionLayerShape s;
    s.dim = 5;
    s.context_dim = 5;
    s.heads = 2;
    s.dim_head = 6;
    s.causal = true;
    const std::int64_t HD = s.inner(), C = s.dim, R = 4;
    Vec wq = random_doubles(HD * C, rng), wk = random_doubles(HD * C, rng), wv = random_doubles(HD * C, rng),
        wo = random_doubles(C * HD, rng), bo = random_doubles(C, rng);
    AttentionParams<double> p{wq.data(), wk.data(), wv.data(), wo.data(), bo.data(), nullptr, nullptr};
    const std::vector<std::int64_t> n = {9, 6};   // two sequences
    std::vector<Vec> x(2), full(2);
    for (int q = 0; q < 2; q++) {   // the reference: each whole sequence through attention_layer_forward
        x[q] = random_doubles(n[q] * C, rng);
        full[q].resize(x[q].size());
        AttentionLayerShape f = s;
        f.B = 1;
        f.Nq = f.Nk = n[q];
        const auto rot = rotary_table<double>(iota(n[q]), R);
        AttentionLayerCache<double> cache;
        attention_layer_forward(full[q].data(), cache, x[q].data(), (const double*)nullptr, nullptr, &rot, &rot, p, f);
    }
    // pieces per step: sequence 0 gets 3, 1, 0, 5 rows; sequence 1 gets 2, 2, 1, 1
    const std::vector<std::vector<std::int64_t>> pieces = {{3, 1, 0, 5}, {2, 2, 1, 1}};
    std::vector<KvCache<double>> caches(2);
    std::vector<std::int64_t> done = {0, 0};
    for (std::size_t step = 0; step < 4; step++) {
        std::vector<std::int64_t> row_begin = {0}, positions;
        Vec xs;
        for (int q = 0; q < 2; q++) {
            const std::int64_t m = pieces[q][step];
            xs.insert(xs.end(), x[q].begin() + done[q] * C, x[q].begin() + (done[q] + m) * C);
            for (std::int64_t i = 0; i < m; i++) positions.push_back(done[q] + i);
            row_begin.push_back(row_begin.back() + m);
        }
        const auto rot = rotary_table<double>(positions, R);
        Vec y(xs.size(), -7.0);
        attention_layer_step(y.data(), xs.data(), row_begin, caches, rot, p, s);
        for (int q = 0; q < 2; q++) {
            const std::int64_t m = pieces[q][step];
            CAPTURE(step);
            CAPTURE(q);
            CHECK(caches[q].positions(HD) == done[q] + m);
            if (m > 0)
                CHECK(max_rel(y.data() + row_begin[q] * C, full[q].data() + done[q] * C, static_cast<std::size_t>(m * C)) <=
                      1e-13);
            done[q] += m;
        }
    }
    CHECK(done == n);
}

TEST_CASE("nn: CCA rows over cached chunk keys/values equal cca_forward at every position") {
    std::mt19937 rng(71);
    bool aligned = false;   // the query rotary positions: RP's quirk, or cs-1+i
    SUBCASE("rp query positions") { aligned = false; }
    SUBCASE("aligned query positions") { aligned = true; }
    CcaShape s;
    s.B = 2;
    s.n = 11;   // cs = 3: chunks 0..2 complete, positions 9, 10 in group 2
    s.chunk = 3;
    s.chunks = s.n / s.chunk;
    s.neighbours = 2;
    s.retrieved = 4;
    s.dim = 5;
    s.heads = 2;
    s.dim_head = 6;
    s.rot_dim = 4;
    s.aligned_queries = aligned;
    const std::int64_t HD = 12, C = s.dim, l = s.chunks, KR = s.neighbours * s.retrieved, n = s.n;
    Vec wq = random_doubles(HD * C, rng), wk = random_doubles(HD * C, rng), wv = random_doubles(HD * C, rng),
        wo = random_doubles(C * HD, rng), bo = random_doubles(C, rng), nk = random_doubles(HD, rng),
        nv = random_doubles(HD, rng);
    AttentionParams<double> p{wq.data(), wk.data(), wv.data(), wo.data(), bo.data(), nk.data(), nv.data()};
    Vec x = random_doubles(s.B * n * C, rng), E = random_doubles(s.B * l * KR * C, rng), full(x.size());
    std::vector<std::uint8_t> mask(static_cast<std::size_t>(s.B * l * KR), 1);
    for (std::int64_t j = 0; j < s.retrieved; j++) mask[j] = 0;                   // (b0, u0): a -1 neighbour
    for (std::int64_t j = 0; j < KR; j++) mask[(s.B * l - 1) * KR + j] = 0;       // (b1, u2): no neighbours at all
    mask[KR + 6] = 0;                                                             // a missing continuation
    CcaCache<double> cache;
    cca_forward(full.data(), cache, x.data(), E.data(), mask.data(), p, s);

    // the decoder's way: each sequence's chunks projected once into its cache, then rows in pieces
    std::vector<CcaKvCache<double>> caches(static_cast<std::size_t>(s.B));
    Vec K(static_cast<std::size_t>(l * KR * HD)), V(K.size());
    for (std::int64_t b = 0; b < s.B; b++) {
        cca_context_forward(K.data(), V.data(), E.data() + b * l * KR * C, l, p, s);
        auto& c = caches[static_cast<std::size_t>(b)];
        c.k = K;
        c.v = V;
        c.mask.assign(mask.begin() + b * l * KR, mask.begin() + (b + 1) * l * KR);
        CHECK(c.chunks(KR) == l);
    }
    const std::vector<std::int64_t> cuts = {0, 4, 7, 8, n};   // rows [cuts[i], cuts[i+1]) of both sequences per call
    for (std::size_t piece = 0; piece + 1 < cuts.size(); piece++) {
        const std::int64_t first = cuts[piece], last = cuts[piece + 1];
        std::vector<std::int64_t> seq, pos;
        Vec xs;
        for (std::int64_t b = 0; b < s.B; b++)
            for (std::int64_t t = first; t < last; t++) {
                seq.push_back(b);
                pos.push_back(t);
                xs.insert(xs.end(), x.begin() + (b * n + t) * C, x.begin() + (b * n + t + 1) * C);
            }
        Vec y(xs.size(), -7.0);
        cca_rows_forward(y.data(), xs.data(), static_cast<std::int64_t>(seq.size()), seq.data(), pos.data(), caches, p,
                         s);
        for (std::size_t i = 0; i < seq.size(); i++) {
            CAPTURE(seq[i]);
            CAPTURE(pos[i]);
            const double* ref = full.data() + (seq[i] * n + pos[i]) * C;
            if (pos[i] < s.chunk - 1)
                CHECK(std::all_of(y.begin() + i * C, y.begin() + (i + 1) * C, [](double e) { return e == 0.0; }));
            else
                CHECK(max_rel(y.data() + i * C, ref, static_cast<std::size_t>(C)) <= 1e-13);
        }
    }
    // a row past the encoded chunks is a caller bug
    caches[0].mask.resize(static_cast<std::size_t>(KR));   // only chunk 0 left
    const std::int64_t seq0 = 0, pos5 = 5;
    Vec y(static_cast<std::size_t>(C));
    CHECK_THROWS(cca_rows_forward(y.data(), x.data(), 1, &seq0, &pos5, caches, p, s));
}
