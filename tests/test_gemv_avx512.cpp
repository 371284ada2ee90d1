// The decode step's GEMV kernels (lib/nn/gemv_avx512.h: AVX-512's and AVX2's, each where the CPU has it), fp32 and
// bf16 weights, against a double sum_k W[o,k]*x[k]
// (the bf16 weights widened exactly), for row counts 1-100 and column counts on both sides of its 16- and 32-column
// steps, with a leading dimension wider than the rows, accumulate on and off, and a sentinel after y;
// linear_forward's few-row path (which calls it) against the same reference with its bias; the transposed GEMV
// (x·W, attention's p V) likewise; attention_head_forward's few-query-row path (both GEMVs) against the double
// attention; the bf16 table's lookup (nn/decode_weights_bf16.h); and CachedDecoder's bf16 step against its fp32 step.
// The tests of the paths that call the kernels (linear, attention, CachedDecoder) run again in a child process under
// RETRO_GEMV=avx2, which picks the AVX2 kernels on an AVX-512 CPU.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "generate/cached_decoder.h"
#include "model/params.h"
#include "nn/attention.h"
#include "nn/decode_weights_bf16.h"
#include "nn/gemv_avx512.h"
#include "nn/linear.h"
#include "test_util.h"

using namespace retro;

namespace {

// Worst |got - want| / (1e-5 · (Σ_k |W x| + |y0|) + 1e-30) over the outputs: pass below 1 (fp32 rounding of an
// I-term sum stays far inside it).
double worst_error(const std::vector<float>& W, std::int64_t O, std::int64_t I, std::int64_t ldw, const std::vector<float>& x,
                   const std::vector<float>& y0, const std::vector<float>& got, bool accumulate) {
    double worst = 0;
    for (std::int64_t o = 0; o < O; ++o) {
        double want = accumulate ? y0[static_cast<std::size_t>(o)] : 0.0, scale = accumulate ? std::fabs(want) : 0.0;
        for (std::int64_t k = 0; k < I; ++k) {
            const double t = double(W[static_cast<std::size_t>(o * ldw + k)]) * x[static_cast<std::size_t>(k)];
            want += t;
            scale += std::fabs(t);
        }
        worst = std::max(worst, std::fabs(got[static_cast<std::size_t>(o)] - want) / (1e-5 * scale + 1e-30));
    }
    return worst;
}

// The kernel sets this CPU has (AVX-512's, AVX2's): each test below runs for every one; a CPU with neither says so.
std::vector<nn::GemvKernels> kernel_sets() {
    std::vector<nn::GemvKernels> sets;
    if (nn::gemv_avx512_available())
        sets.push_back({"avx512", nn::gemv_rows_avx512, nn::gemv_rows_bf16_avx512, nn::gemv_t_rows_avx512});
    if (nn::gemv_avx2_available()) sets.push_back({"avx2", nn::gemv_rows_avx2, nn::gemv_rows_bf16_avx2, nn::gemv_t_rows_avx2});
    if (sets.empty()) {
        MESSAGE("skipped: neither AVX-512 nor AVX2+FMA on this CPU (linear_forward and attention use OpenBLAS)");
        test::g_skipped = true;
    }
    return sets;
}

}  // namespace

TEST_CASE("gemv avx512: every row and column edge equals a double W·x for 1-8 x rows, the same bits whatever their count") {
  for (const nn::GemvKernels& k : kernel_sets()) {
    const std::string isa = k.isa;
    CAPTURE(isa);
    std::mt19937 g(7);
    std::normal_distribution<float> n(0.0f, 1.0f);
    for (const std::int64_t O : {1, 7, 8, 9, 17, 100}) {
        for (const std::int64_t I : {1, 7, 8, 9, 15, 16, 17, 24, 31, 32, 33, 40, 48, 512, 515}) {   // (AVX2: 8/16 steps)
            for (const bool accumulate : {false, true}) {
                CAPTURE(O);
                CAPTURE(I);
                CAPTURE(accumulate);
                const std::int64_t ldw = I + 3, ldx = I + 1, ldy = O + 2, N = nn::kGemvMaxRows;
                std::vector<float> W(static_cast<std::size_t>(O * ldw)), x(static_cast<std::size_t>(N * ldx)),
                    y0(static_cast<std::size_t>(N * ldy));
                for (auto& v : W) v = n(g) * 0.05f;
                for (auto& v : x) v = n(g);
                for (auto& v : y0) v = n(g);
                std::vector<float> all = y0;   // all 8 rows in one call
                k.rows(W.data(), O, I, ldw, x.data(), ldx, N, all.data(), ldy, accumulate);
                for (std::int64_t r = 0; r < N; ++r) {
                    CAPTURE(r);
                    const std::vector<float> xr(x.begin() + r * ldx, x.begin() + r * ldx + I),
                        y0r(y0.begin() + r * ldy, y0.begin() + r * ldy + O), got(all.begin() + r * ldy, all.begin() + r * ldy + O);
                    CHECK(worst_error(W, O, I, ldw, xr, y0r, got, accumulate) < 1.0);
                    for (std::int64_t o = O; o < ldy; ++o)   // the gap between rows of y is left alone
                        CHECK(all[static_cast<std::size_t>(r * ldy + o)] == y0[static_cast<std::size_t>(r * ldy + o)]);
                }
                for (const std::int64_t rows : {1, 3, 5}) {   // fewer rows at once: the same bits per row
                    std::vector<float> part = y0;
                    k.rows(W.data(), O, I, ldw, x.data(), ldx, rows, part.data(), ldy, accumulate);
                    CHECK(std::equal(part.begin(), part.begin() + rows * ldy, all.begin()));
                }
            }
        }
    }
  }
}

TEST_CASE("gemv avx512: linear_forward's few-row path equals a double x·W^T + b") {
    std::mt19937 g(11);
    std::normal_distribution<float> n(0.0f, 1.0f);
    for (const std::int64_t N : {1, 3, 4, 5, 8}) {
        const std::int64_t I = 512, O = 203;
        std::vector<float> W(static_cast<std::size_t>(O * I)), b(static_cast<std::size_t>(O)), x(static_cast<std::size_t>(N * I)),
            y(static_cast<std::size_t>(N * O));
        for (auto& v : W) v = n(g) * 0.05f;
        for (auto& v : b) v = n(g);
        for (auto& v : x) v = n(g);
        nn::linear_forward(y.data(), x.data(), W.data(), b.data(), N, I, O);
        for (std::int64_t r = 0; r < N; ++r) {
            const std::vector<float> xr(x.begin() + r * I, x.begin() + (r + 1) * I), yr(y.begin() + r * O, y.begin() + (r + 1) * O);
            CAPTURE(r);
            CHECK(worst_error(W, O, I, I, xr, b, yr, true) < 1.0);
        }
    }
}

TEST_CASE("gemv avx512: the transposed GEMV x·W equals a double sum over W's rows for 1-8 x rows, the same bits whatever their count") {
  for (const nn::GemvKernels& k : kernel_sets()) {
    const std::string isa = k.isa;
    CAPTURE(isa);
    std::mt19937 g(13);
    std::normal_distribution<float> n(0.0f, 1.0f);
    for (const std::int64_t I : {1, 2, 17, 640}) {
        for (const std::int64_t O : {1, 15, 16, 17, 32, 33, 48, 63, 64, 65, 72, 128, 130}) {
            CAPTURE(I);
            CAPTURE(O);
            const std::int64_t ldw = O + 5, ldx = I + 2, ldy = O + 3, N = nn::kGemvMaxRows;
            std::vector<float> W(static_cast<std::size_t>(I * ldw)), x(static_cast<std::size_t>(N * ldx)),
                y0(static_cast<std::size_t>(N * ldy));
            for (auto& v : W) v = n(g);
            for (auto& v : x) v = std::fabs(n(g)) / static_cast<float>(I);   // probabilities' scale
            for (auto& v : y0) v = n(g);
            std::vector<float> all = y0;
            k.t_rows(W.data(), I, O, ldw, x.data(), ldx, N, all.data(), ldy);
            for (std::int64_t r = 0; r < N; ++r) {
                CAPTURE(r);
                double worst = 0;
                for (std::int64_t o = 0; o < O; ++o) {
                    double want = 0, scale = 0;
                    for (std::int64_t i = 0; i < I; ++i) {
                        const double t = double(x[static_cast<std::size_t>(r * ldx + i)]) * W[static_cast<std::size_t>(i * ldw + o)];
                        want += t;
                        scale += std::fabs(t);
                    }
                    worst = std::max(worst, std::fabs(all[static_cast<std::size_t>(r * ldy + o)] - want) / (1e-5 * scale + 1e-30));
                }
                CHECK(worst < 1.0);
                for (std::int64_t o = O; o < ldy; ++o)   // the gap between rows of y is left alone
                    CHECK(all[static_cast<std::size_t>(r * ldy + o)] == y0[static_cast<std::size_t>(r * ldy + o)]);
            }
            for (const std::int64_t rows : {1, 2, 3, 5}) {   // fewer rows at once (other column blocks): the same bits
                std::vector<float> part = y0;
                k.t_rows(W.data(), I, O, ldw, x.data(), ldx, rows, part.data(), ldy);
                CHECK(std::equal(part.begin(), part.begin() + rows * ldy, all.begin()));
            }
        }
    }
  }
}

TEST_CASE("gemv avx512: attention's few-query-row path equals the double attention (causal, null key, key mask)") {
    std::mt19937 g(17);
    std::normal_distribution<float> n(0.0f, 1.0f);
    for (const std::int64_t Nq : {1, 3, 8, 9}) {   // 9: past kGemvMaxRows, sgemm
        for (const std::int64_t Nk : {9, 100, 640}) {
            for (const std::int64_t D : {40, 64, 72}) {
                for (const int variant : {0, 1, 2}) {   // causal self-attention; null key + mask (CCA); neither
                    CAPTURE(Nq);
                    CAPTURE(Nk);
                    CAPTURE(D);
                    CAPTURE(variant);
                    const std::int64_t ld = 3 * D;   // heads interleaved: this head's columns of a wider row
                    const bool causal = variant == 0, null_kv = variant == 1, masked = variant == 1;
                    std::vector<float> Q(static_cast<std::size_t>(Nq * ld)), K(static_cast<std::size_t>(Nk * ld)),
                        V(K.size()), nk(static_cast<std::size_t>(D)), nv(nk.size());
                    for (auto* t : {&Q, &K, &V, &nk, &nv})
                        for (auto& v : *t) v = n(g) * 0.3f;
                    std::vector<std::uint8_t> mask(static_cast<std::size_t>(Nk));
                    for (auto& m : mask) m = g() % 4 != 0;
                    const auto dbl = [](const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); };
                    const std::vector<double> Qd = dbl(Q), Kd = dbl(K), Vd = dbl(V), nkd = dbl(nk), nvd = dbl(nv);
                    const std::int64_t keys = Nk + (null_kv ? 1 : 0);
                    std::vector<float> O(static_cast<std::size_t>(Nq * ld), 7.0f), P(static_cast<std::size_t>(Nq * keys));
                    std::vector<double> Od(O.size()), Pd(P.size());
                    nn::attention_head_forward(O.data(), ld, P.data(), Q.data(), ld, K.data(), V.data(), ld, Nq, Nk, D,
                                               null_kv ? nk.data() : nullptr, null_kv ? nv.data() : nullptr,
                                               masked ? mask.data() : nullptr, causal);
                    nn::attention_head_forward(Od.data(), ld, Pd.data(), Qd.data(), ld, Kd.data(), Vd.data(), ld, Nq, Nk,
                                               D, null_kv ? nkd.data() : nullptr, null_kv ? nvd.data() : nullptr,
                                               masked ? mask.data() : nullptr, causal);
                    double err = 0, ref = 0;
                    for (std::int64_t i = 0; i < Nq; ++i)
                        for (std::int64_t d = 0; d < D; ++d) {
                            const std::size_t at = static_cast<std::size_t>(i * ld + d);
                            err += (O[at] - Od[at]) * (O[at] - Od[at]);
                            ref += Od[at] * Od[at];
                        }
                    CHECK(std::sqrt(err / ref) < 1e-5);
                    for (std::int64_t i = 0; i < Nq; ++i)   // other heads' columns are left alone
                        CHECK(O[static_cast<std::size_t>(i * ld + D)] == 7.0f);
                }
            }
        }
    }
}

TEST_CASE("gemv avx512: bf16 weights equal a double W·x of the same (widened) weights") {
  for (const nn::GemvKernels& k : kernel_sets()) {
    const std::string isa = k.isa;
    CAPTURE(isa);
    std::mt19937 g(13);
    std::normal_distribution<float> n(0.0f, 1.0f);
    for (const std::int64_t O : {1, 9, 33}) {
        for (const std::int64_t I : {1, 15, 16, 17, 31, 32, 33, 512, 515}) {
            for (const std::int64_t N : {1, 4, 8}) {
                const bool accumulate = N != 4;
                CAPTURE(O);
                CAPTURE(I);
                CAPTURE(N);
                const std::int64_t ldw = I + 5, ldx = I, ldy = O + 1;
                std::vector<std::uint16_t> W16(static_cast<std::size_t>(O * ldw));
                std::vector<float> W(W16.size()), x(static_cast<std::size_t>(N * ldx)), y0(static_cast<std::size_t>(N * ldy));
                for (std::size_t i = 0; i < W16.size(); ++i) {
                    W16[i] = f32_to_bf16(n(g) * 0.05f);
                    W[i] = bf16_to_f32(W16[i]);
                }
                for (auto& v : x) v = n(g);
                for (auto& v : y0) v = n(g);
                std::vector<float> y = y0;
                k.rows_bf16(W16.data(), O, I, ldw, x.data(), ldx, N, y.data(), ldy, accumulate);
                std::vector<float> same = y0;   // the fp32 kernel on the widened weights: the same bits
                k.rows(W.data(), O, I, ldw, x.data(), ldx, N, same.data(), ldy, accumulate);
                CHECK(y == same);
                for (std::int64_t r = 0; r < N; ++r) {
                    const std::vector<float> xr(x.begin() + r * ldx, x.begin() + r * ldx + I),
                        y0r(y0.begin() + r * ldy, y0.begin() + r * ldy + O), got(y.begin() + r * ldy, y.begin() + r * ldy + O);
                    CHECK(worst_error(W, O, I, ldw, xr, y0r, got, accumulate) < 1.0);
                    CHECK(y[static_cast<std::size_t>(r * ldy + O)] == y0[static_cast<std::size_t>(r * ldy + O)]);
                }
            }
        }
    }
  }
}

TEST_CASE("gemv avx512: the bf16 table finds a registered tensor's rows and nothing else") {
    std::vector<float> a(100, 1.5f), b(10, -2.0f);
    nn::DecodeWeightsBf16 table;
    table.add(a.data(), 100);
    CHECK(table.bytes() == 200);
    REQUIRE(table.find(a.data(), 100) != nullptr);
    CHECK(bf16_to_f32(*table.find(a.data(), 100)) == 1.5f);
    CHECK(table.find(a.data() + 40, 60) == table.find(a.data(), 100) + 40);   // rows inside the tensor
    CHECK(table.find(a.data() + 40, 61) == nullptr);                          // past its end
    CHECK(table.find(b.data(), 10) == nullptr);                               // not registered
    CHECK(nn::decode_weights_bf16() == nullptr);
    {
        const nn::DecodeWeightsScope scope(&table);
        CHECK(nn::decode_weights_bf16() == &table);
    }
    CHECK(nn::decode_weights_bf16() == nullptr);
}

TEST_CASE("gemv avx512: CachedDecoder with bf16 weights tracks its fp32 logits, and only inside its steps") {
    if (!nn::bf16_decode_available()) {
        MESSAGE("skipped: neither AVX-512 nor AVX2+FMA on this CPU (retro-generate refuses --dtype bf16)");
        test::g_skipped = true;
        return;
    }
    const std::string kernels_line = std::string("the few-row kernels: ") + nn::gemv_best_kernels()->isa;
    MESSAGE(kernels_line);
    RetroConfig c = RetroConfig::load((test::source_dir() / "examples" / "configs" / "tiny.json").string());
    c.max_seq_len = 32;
    RetroModel<float> model(c);
    params_init(model.params(), model.layout(), 5);
    const auto table = linear_weights_bf16(model);
    CachedDecoder<float> exact(model, 1, false), half(model, 1, false, table.get());
    std::mt19937 g(3);
    std::vector<std::vector<std::int32_t>> feed = {{2, 7, 9}};   // a 3-row prefill: the few-row path too
    double worst = 0;
    for (int step = 0; step < 12; ++step) {
        exact.step(feed);
        half.step(feed);
        CHECK(nn::decode_weights_bf16() == nullptr);   // the table is installed for the step only
        const auto& a = exact.logits();
        const auto& b = half.logits();
        REQUIRE(a.size() == b.size());
        double num = 0, den = 0;
        for (std::size_t i = 0; i < a.size(); ++i) {
            num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
            den += double(a[i]) * a[i];
        }
        const double rel = std::sqrt(num / den);
        CHECK(rel > 0);   // bf16 weights did change the result: the table was read
        worst = std::max(worst, rel);
        feed = {{static_cast<std::int32_t>(4 + g() % (c.num_tokens - 4))}};
    }
    MESSAGE("bf16 decode weights: worst relative rms of the logits over 12 steps ", worst);
    CHECK(worst < 1e-2);   // bf16 keeps 8 significant bits: ~0.4% per weight, averaged over each sum (0.0037 seen)
}

TEST_CASE("gemv avx512: the paths that call the kernels and batch invariance pass again on the AVX2 kernels (RETRO_GEMV=avx2 in a child)") {
    if (!nn::gemv_avx512_available() || !nn::gemv_avx2_available()) {
        MESSAGE("skipped: the process's own kernels are the only ones here (this CPU lacks AVX-512 or AVX2+FMA)");
        test::g_skipped = true;
        return;
    }
    // the test binary itself, its linear, attention and bf16-decoder cases and the CPU decoder's batch invariance
    // (a sequence's logits the same bits alone and in any group), with the AVX2 kernels picked
    std::error_code ec;
    const std::string self = std::filesystem::read_symlink("/proc/self/exe", ec).string();
    REQUIRE(!ec);
    const test::RunResult r = test::run_command(
        "RETRO_GEMV=avx2 '" + self + "' -tc='gemv avx512: linear_forward*,gemv avx512: attention*,gemv avx512: CachedDecoder*," +
        "generate batch invariance*' -s");
    CHECK_MESSAGE(r.exit_code == 0, r.out << r.err);
    CHECK(r.out.find("the few-row kernels: avx2") != std::string::npos);
    CHECK(r.out.find("4 passed | 0 failed") != std::string::npos);
}
