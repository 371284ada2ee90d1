// The CUDA NnBackend's next-token draw (kernels/nn_sample.cuh's sample_rows_kernel) on the host through the block
// emulator (tests/simt_host.h), against nn/sampling.h's sample_row, the reference every backend's sample_rows follows:
// greedy, temperature alone, top-k, top-p and both, over vocabularies of 1 to 2,000 ids with many tied logits (and
// -0 beside +0), several rows a launch read through a permuted row index. Greedy must give the same id; a draw the
// same id wherever the reference's cumulative probabilities (and its top-p cut) lie more than 1e-9 from u (and from
// p): closer than that the kernel's fixed-point weights may round the other way, which the cases here avoid by
// drawing u again. On a GPU the same kernel runs in tests/test_generate.cpp's CUDA case.
#define RETRO_SIMT_HOST 1
#include "simt_host.h"
//
#include "../kernels/nn_sample.cuh"
#include "nn/sampling.h"
#include "sampling_boundary.h"

#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <vector>

using namespace retro;
namespace ks = retro::nn::sample;

namespace {

constexpr int kHostThreads = 256;   // the emulator runs a fiber a thread: fewer than the GPU's 1024, same code

std::vector<std::int32_t> run_kernel(const std::vector<float>& logits, const std::vector<long long>& rows,
                                     long long V, const nn::SamplingParams& o, const std::vector<double>& u,
                                     long long ld = 0) {
    std::vector<std::int32_t> ids(rows.size(), -1);
    std::vector<std::uint64_t> weights(rows.size() * static_cast<std::size_t>(V), ~std::uint64_t{0});   // scratch
    const ks::Params p{o.temperature, o.top_k, o.top_p, o.greedy ? 1 : 0};
    simt::host::launch(static_cast<long long>(rows.size()), 1, kHostThreads, ks::smem_bytes<kHostThreads>(), [&] {
        ks::sample_rows_kernel<kHostThreads>(ids.data(), logits.data(), rows.data(), V, ld > 0 ? ld : V, p, u.data(),
                                             weights.data());
    });
    return ids;
}

}  // namespace

TEST_CASE("nn sample kernel on the host emulator: greedy, temperature, top-k and top-p draw the reference's ids") {
    std::mt19937_64 gen(2026);
    std::normal_distribution<float> normal(0.0f, 3.0f);
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    struct Setting {
        double T;
        long long k;
        double p;
        bool greedy;
    };
    const Setting settings[] = {{1, 0, 1, true},    {1, 0, 1, false},   {0.6, 0, 1, false}, {1, 1, 1, false},
                                {1, 3, 1, false},   {1, -2, 1, false},  {1, 0, 0.3, false}, {1.7, 0, 0.9, false},
                                {0.8, 5, 0.7, false}, {1, -2, 0.95, false}, {1, 0, 1e-9, false}};
    int draws = 0, compared = 0;
    for (const long long V : {1LL, 5LL, 300LL, 2000LL}) {
        for (const int ties : {0, 1, 2}) {
            const long long R = 3;   // rows a launch, read through a permuted index
            std::vector<float> logits(static_cast<std::size_t>(R * V));
            for (auto& z : logits) {
                z = normal(gen);
                if (ties == 1) z = std::round(z * 2.0f) / 2.0f;   // many equal logits, -0 among them
                if (ties == 2) z = std::round(z / 4.0f);           // a few values, each hundreds of ids
            }
            if (ties && V > 4) logits[3] = -0.0f, logits[4] = 0.0f;
            const std::vector<long long> rows = {2, 0, 1};
            for (const Setting& s : settings) {
                nn::SamplingParams o;
                o.temperature = s.T;
                o.top_k = s.k == -2 ? V / 2 : s.k;   // -2: half the vocabulary (0 at V = 1: off)
                o.top_p = s.p;
                o.greedy = s.greedy;
                std::vector<double> u(rows.size());
                bool usable = true;
                for (std::size_t j = 0; j < rows.size(); j++) {
                    const float* z = logits.data() + rows[j] * V;
                    int tries = 0;
                    do u[j] = unit(gen);
                    while (!o.greedy && test::near_sampling_boundary(z, V, o, u[j]) && ++tries < 20);
                    usable = usable && tries < 20;
                }
                if (!usable) continue;   // p itself on a boundary: the fixed point may keep one id more or less
                const auto got = run_kernel(logits, rows, V, o, u);
                for (std::size_t j = 0; j < rows.size(); j++) {
                    const std::int32_t want = nn::sample_row(logits.data() + rows[j] * V, V, o, u[j]);
                    INFO("V " << V << " ties " << ties << " T " << o.temperature << " k " << o.top_k << " p "
                              << o.top_p << " greedy " << o.greedy << " row " << rows[j] << " u " << u[j]);
                    CHECK(got[j] == want);
                    compared++;
                }
                draws++;
            }
        }
    }
    CHECK(draws >= 80);   // nearly every setting ran (a few may sit on a top-p boundary)
    CHECK(compared == 3 * draws);
}

TEST_CASE("nn sample kernel on the host emulator: exact ties at the top-k and top-p boundaries keep the reference's ids") {
    // equal logits: every id's weight is the same, so top-k 3 keeps ids 0..2 and top-p 0.5 of 8 ids keeps 0..3 (the
    // mass before id 4 equals p exactly: the reference keeps an id only while the mass before it is < p), and the draw
    // takes id j for u in the middle of its share
    const long long V = 8;
    const std::vector<float> logits(static_cast<std::size_t>(V), 1.5f);
    const std::vector<long long> rows = {0};
    nn::SamplingParams greedy;
    greedy.greedy = true;
    CHECK(run_kernel(logits, rows, V, greedy, {0.0})[0] == 0);
    const std::vector<float> with_nan = {1.0f, NAN, 3.0f, 2.0f};   // a NaN is never the reference's argmax
    CHECK(nn::sample_row(with_nan.data(), 4, greedy, 0.0) == 2);
    nn::SamplingParams k3;
    k3.top_k = 3;
    nn::SamplingParams p5;
    p5.top_p = 0.5;
    for (const auto& [o, kept] : {std::pair{k3, 3}, std::pair{p5, 4}}) {
        for (int j = 0; j < kept; j++) {
            const double u = (j + 0.5) / kept;
            INFO("top_k " << o.top_k << " top_p " << o.top_p << " u " << u);
            CHECK(nn::sample_row(logits.data(), V, o, u) == j);
            CHECK(run_kernel(logits, rows, V, o, {u})[0] == j);
        }
    }
}

TEST_CASE("nn sample kernel on the host emulator: rows wider than the ids drawn (a tokenizer smaller than the model)") {
    // V = 300 ids drawn from rows of 310 logits whose last 10 are the largest: the same ids as from the rows cut to
    // 300, none past them
    std::mt19937_64 gen(51);
    std::normal_distribution<float> normal(0.0f, 2.0f);
    const long long V = 300, ld = 310, R = 3;
    std::vector<float> wide(static_cast<std::size_t>(R * ld)), cut(static_cast<std::size_t>(R * V));
    for (long long r = 0; r < R; r++)
        for (long long i = 0; i < ld; i++) {
            const float z = i < V ? normal(gen) : 50.0f;
            wide[static_cast<std::size_t>(r * ld + i)] = z;
            if (i < V) cut[static_cast<std::size_t>(r * V + i)] = z;
        }
    const std::vector<long long> rows = {1, 2, 0};
    const std::vector<double> u = {0.137, 0.561, 0.912};
    for (const bool greedy : {true, false}) {
        nn::SamplingParams o;
        o.greedy = greedy;
        o.top_p = greedy ? 1.0 : 0.9;
        const auto a = run_kernel(wide, rows, V, o, u, ld), b = run_kernel(cut, rows, V, o, u);
        CHECK(a == b);
        for (const auto id : a) CHECK((id >= 0 && id < V));
    }
}

TEST_CASE("nn sample kernel on the host emulator: a row with a logit that is not finite gives -1 - the other rows their ids") {
    // as the host's next_tokens (generate/next_tokens.h), so that retro-generate --device cuda names damaged weights
    // rather than printing the top-ranked id of a NaN row (it did: the check ran only on the CPU decoder)
    const long long V = 300, ld = 310;
    std::mt19937_64 gen(52);
    std::normal_distribution<float> normal(0.0f, 2.0f);
    std::vector<float> logits(static_cast<std::size_t>(5 * ld));
    for (auto& z : logits) z = normal(gen);
    logits[1 * ld + 17] = NAN;
    logits[2 * ld + 299] = INFINITY;   // the last id drawn from
    logits[3 * ld + 0] = -INFINITY;
    logits[4 * ld + 305] = NAN;        // past the V drawn from: not read, the row draws
    const std::vector<long long> rows = {0, 1, 2, 3, 4};
    for (const bool greedy : {true, false}) {
        nn::SamplingParams o;
        o.greedy = greedy;
        o.top_p = greedy ? 1.0 : 0.9;
        const std::vector<double> u = {0.31, 0.52, 0.73, 0.94, 0.15};
        const auto got = run_kernel(logits, rows, V, o, u, ld);
        INFO("greedy " << greedy);
        CHECK(got[0] == nn::sample_row(logits.data(), V, o, u[0]));
        CHECK(got[1] == -1);
        CHECK(got[2] == -1);
        CHECK(got[3] == -1);
        CHECK(got[4] == nn::sample_row(logits.data() + 4 * ld, V, o, u[4]));
        CHECK(got[4] >= 0);
    }
}

TEST_CASE("nn sample kernel on the host emulator: top-k at or past the vocabulary is off - the ids walked in id order as with top-k 0") {
    // nn/sampling.h: top-k keeps the k largest, so k >= V keeps every id and is off: the draw walks the ids in id
    // order (step 4), not rank order. Logits in no order, u spread over [0, 1): the same id as top-k 0 for every u,
    // in the reference and in the kernel (which takes top-k only where 0 < k < V)
    const long long V = 50;
    std::mt19937_64 gen(53);
    std::normal_distribution<float> normal(0.0f, 1.5f);
    std::vector<float> logits(static_cast<std::size_t>(V));
    for (auto& z : logits) z = normal(gen);
    const std::vector<long long> rows = {0};
    nn::SamplingParams off;
    int differ_from_rank_order = 0;
    for (const long long k : {V, V + 7}) {
        nn::SamplingParams o;
        o.top_k = k;
        for (int j = 0; j < 40; j++) {
            double u = (j + 0.5) / 40;
            while (test::near_sampling_boundary(logits.data(), V, off, u)) u += 1e-6;
            const std::int32_t want = nn::sample_row(logits.data(), V, off, u);
            INFO("k " << k << " u " << u);
            CHECK(nn::sample_row(logits.data(), V, o, u) == want);
            CHECK(run_kernel(logits, rows, V, o, {u})[0] == want);
            nn::SamplingParams ranked;   // top-k V - 1 walks in rank order: most u give another id there
            ranked.top_k = V - 1;
            differ_from_rank_order += nn::sample_row(logits.data(), V, ranked, u) != want;
        }
    }
    CHECK(differ_from_rank_order > 40);   // the case tells the two orders apart
}
