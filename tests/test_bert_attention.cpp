// bert_attention_head (lib/embed/bert_attention.h): the fused AVX-512 kernels and the cblas path
// against a double-precision softmax(scale·QK^T)V on random heads laid out as in the encoder's QKV
// buffer (row stride > 3·d, heads at an offset), for head sizes around the 16-lane tiles and
// sequence lengths around the 12-row and 16/32-key tiles; nothing outside the output head's
// columns may be written. The same with a relative-position bias added to the scores (T5's, scale 1).
#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "embed/bert_attention.h"
#include "test_util.h"

using namespace retro;

namespace {

struct HeadCase {
    int len, d;
    std::int64_t ld, ldc;
    std::vector<float> qkv, ctx;
    const float* q() const { return qkv.data() + 5; }   // the head starts 5 floats into each row
    const float* k() const { return q() + d + 3; }
    const float* v() const { return k() + d + 7; }
};

HeadCase make_case(int len, int d, std::uint32_t seed, float spread) {
    HeadCase c{len, d, 3 * d + 29, d + 9, {}, {}};
    std::mt19937 g(seed);
    std::normal_distribution<float> n(0.0f, spread);
    // exactly up to the last V element, so a read past it is a heap overflow under ASan or valgrind
    c.qkv.resize(static_cast<std::size_t>(len - 1) * c.ld + 15 + 3 * static_cast<std::size_t>(d));
    for (auto& x : c.qkv) x = n(g);
    c.ctx.assign(static_cast<std::size_t>(len) * c.ldc, 12345.0f);
    return c;
}

// max over rows and columns of |got - want| / (max |want| of the row + 1e-30)
double max_rel_error(const HeadCase& c, float scale, const std::vector<float>& bias = {}) {
    double worst = 0;
    std::vector<double> s(c.len);
    for (int i = 0; i < c.len; ++i) {
        double m = -1e300;
        for (int j = 0; j < c.len; ++j) {
            double dot = 0;
            for (int t = 0; t < c.d; ++t) dot += double(c.q()[i * c.ld + t]) * c.k()[j * c.ld + t];
            s[j] = scale * dot + (bias.empty() ? 0.0 : double(bias[c.len - 1 + j - i]));
            m = std::max(m, s[j]);
        }
        double sum = 0;
        for (int j = 0; j < c.len; ++j) sum += (s[j] = std::exp(s[j] - m));
        std::vector<double> want(c.d, 0.0);
        double row_max = 0;
        for (int t = 0; t < c.d; ++t) {
            for (int j = 0; j < c.len; ++j) want[t] += s[j] / sum * c.v()[j * c.ld + t];
            row_max = std::max(row_max, std::abs(want[t]));
        }
        for (int t = 0; t < c.d; ++t)
            worst = std::max(worst, std::abs(c.ctx[i * c.ldc + t] - want[t]) / (row_max + 1e-30));
        for (std::int64_t t = c.d; t < c.ldc; ++t)
            if (c.ctx[i * c.ldc + t] != 12345.0f) return 1e9;   // wrote outside the head
    }
    return worst;
}

}  // namespace

TEST_CASE("bert attention: fused and cblas heads equal a double softmax(QK^T)V at every tile edge") {
    const int lens[] = {1, 2, 11, 12, 13, 16, 17, 31, 32, 33, 68, 130};
    const int dims[] = {8, 16, 24, 32, 48, 64, 80};
    for (bool fused : {true, false}) {
        bert_attention_set_fused(fused);
        double worst = 0;
        AttentionScratch scratch;   // one for all cases, as a thread's in the encoder: sizes go up and down
        for (int d : dims)
            for (int len : lens)
                for (float spread : {0.3f, 3.0f}) {   // flat and peaked softmax rows
                    HeadCase c = make_case(len, d, static_cast<std::uint32_t>(len * 131 + d), spread);
                    const float scale = 1.0f / std::sqrt(static_cast<float>(d));
                    bert_attention_head(c.q(), c.k(), c.v(), c.ld, len, d, scale, c.ctx.data(), c.ldc, scratch);
                    const double err = max_rel_error(c, scale);
                    CAPTURE(fused);
                    CAPTURE(d);
                    CAPTURE(len);
                    CAPTURE(spread);
                    CHECK(err < 2e-5);
                    if (d <= 64) worst = std::max(worst, err);   // d = 80 takes the cblas path in both rounds
                }
        const std::string note = fused && !bert_attention_fused_available(32) ? " (no AVX-512F: the cblas path ran)" : "";
        MESSAGE((fused ? "fused" : "cblas") << " attention: worst relative error " << worst << note);
    }
    bert_attention_set_fused(true);
}

TEST_CASE("bert attention: a relative-position bias (T5) is added to the scores on both paths") {
    const int lens[] = {1, 2, 12, 13, 17, 33, 68};
    const int dims[] = {8, 16, 64, 80};
    for (bool fused : {true, false}) {
        bert_attention_set_fused(fused);
        AttentionScratch scratch;
        for (int d : dims)
            for (int len : lens)
                for (float scale : {1.0f, 0.25f}) {
                    HeadCase c = make_case(len, d, static_cast<std::uint32_t>(len * 7 + d), 1.0f);
                    std::mt19937 g(static_cast<std::uint32_t>(len + 99 * d));
                    std::normal_distribution<float> n(0.0f, 2.0f);
                    std::vector<float> bias(2 * static_cast<std::size_t>(len) - 1);
                    for (auto& b : bias) b = n(g);   // not symmetric: j - i and i - j differ
                    bert_attention_head(c.q(), c.k(), c.v(), c.ld, len, d, scale, c.ctx.data(), c.ldc, scratch, bias.data());
                    CAPTURE(fused);
                    CAPTURE(d);
                    CAPTURE(len);
                    CAPTURE(scale);
                    CHECK(max_rel_error(c, scale, bias) < 2e-5);
                }
    }
    bert_attention_set_fused(true);
}

TEST_CASE("bert attention: a long head is taken a block of query rows at a time, its scratch far under len x len") {
    // fused blocks are 96 rows at 257 keys, 24 at 2,100; cblas blocks 256 rows: every length here spans several
    const int lens[] = {97, 257, 700, 2100};
    const int dims[] = {32, 64, 80};
    for (bool fused : {true, false}) {
        bert_attention_set_fused(fused);
        for (int d : dims)
            for (int len : lens)
                for (bool with_bias : {false, true}) {
                    if (with_bias && len > 700) continue;   // the double reference's time
                    HeadCase c = make_case(len, d, static_cast<std::uint32_t>(len * 13 + d), 1.0f);
                    std::vector<float> bias;
                    if (with_bias) {
                        std::mt19937 g(static_cast<std::uint32_t>(len + 5 * d));
                        std::normal_distribution<float> n(0.0f, 2.0f);
                        bias.resize(2 * static_cast<std::size_t>(len) - 1);
                        for (auto& b : bias) b = n(g);
                    }
                    const float scale = 1.0f / std::sqrt(static_cast<float>(d));
                    AttentionScratch scratch;
                    bert_attention_head(c.q(), c.k(), c.v(), c.ld, len, d, scale, c.ctx.data(), c.ldc, scratch,
                                        with_bias ? bias.data() : nullptr);
                    CAPTURE(fused);
                    CAPTURE(d);
                    CAPTURE(len);
                    CAPTURE(with_bias);
                    CHECK(max_rel_error(c, scale, bias) < 2e-5);
                    const std::size_t held = scratch.kt.size() + scratch.p.size() + scratch.sum.size();
                    CHECK(held <= bert_attention_scratch_floats(len, d));
                    if (len >= 700) CHECK(held * 2 < static_cast<std::size_t>(len) * len);
                }
    }
    bert_attention_set_fused(true);
}
