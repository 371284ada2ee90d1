// The tiny RETRO config, batch and weights of the model tests (test_model.cpp, test_backend_model.cpp): every
// block kind at a few dozen parameters per tensor, a batch with pads, a -1 neighbour and a missing continuation; random
// neighbours for a decode (test_generate.cpp, test_nn_decode_program_host.cpp).
#pragma once
#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/params.h"
#include "model/retro.h"

namespace retro::test {

// Neighbour + continuation ids for one chunk of a decode: random ids, one neighbour sometimes all pads (a -1
// neighbour), continuations sometimes padded (a document end).
inline std::vector<std::int32_t> random_neighbours(const RetroConfig& c, std::mt19937& rng) {
    const std::int64_t k = c.num_neighbours, r = c.retrieved_len(), cs = c.chunk_size;
    std::vector<std::int32_t> v(static_cast<std::size_t>(k * r));
    for (auto& x : v) x = 1 + static_cast<std::int32_t>(rng() % (c.num_tokens - 1));
    for (std::int64_t j = 0; j < k; j++) {
        const auto roll = rng() % 4;
        if (roll == 0) std::fill(v.begin() + j * r, v.begin() + (j + 1) * r, 0);
        if (roll == 1) std::fill(v.begin() + j * r + cs, v.begin() + (j + 1) * r, 0);
    }
    return v;
}

inline RetroConfig tiny_config() {
    RetroConfig c;
    c.num_tokens = 13;
    c.max_seq_len = 16;
    c.enc_dim = 8;
    c.enc_depth = 2;
    c.enc_cross_attn_all = false;
    c.enc_cross_attn_layers = {1};
    c.dec_dim = 12;
    c.dec_depth = 3;
    c.dec_cross_attn_layers = {2, 3};
    c.heads = 2;
    c.dim_head = 32;
    c.chunk_size = 4;
    c.num_neighbours = 2;
    c.validate("tiny");
    return c;
}

// seq with pads after an "eos" in item 1; neighbour 1 of chunk 0 is -1 (all pad), chunk 1's first neighbour
// has no continuation (second half pad).
inline RetroBatch tiny_batch(const RetroConfig& c, std::int64_t B, std::int64_t n, unsigned seed, bool retrieval = true) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> tok(1, static_cast<int>(c.num_tokens) - 1);
    RetroBatch b;
    b.B = B;
    b.n = n;
    b.k = c.num_neighbours;
    b.r = c.retrieved_len();
    b.seq.resize(static_cast<std::size_t>(B * (n + 1)));
    for (auto& t : b.seq) t = tok(rng);
    if (B > 1)
        for (std::int64_t t = n - 3; t <= n; t++) b.seq[1 * (n + 1) + t] = c.pad_id;
    if (!retrieval) return b;
    const std::int64_t l = n / c.chunk_size;
    b.retrieved.resize(static_cast<std::size_t>(B * l * b.k * b.r));
    for (auto& t : b.retrieved) t = tok(rng);
    auto at = [&](std::int64_t bb, std::int64_t u, std::int64_t j, std::int64_t t) -> std::int32_t& {
        return b.retrieved[((bb * l + u) * b.k + j) * b.r + t];
    };
    for (std::int64_t t = 0; t < b.r; t++) at(0, 0, 1, t) = c.pad_id;
    if (l > 1)
        for (std::int64_t t = c.chunk_size; t < b.r; t++) at(0, 1, 0, t) = c.pad_id;
    return b;
}

// The copy head (config copy_head) starts at zero; tests give it values so that its gates move the logits.
template <typename T>
void randomise_copy_head(std::vector<T>& params, const ParamLayout& layout, unsigned seed) {
    std::mt19937 rng(seed + 2);
    std::uniform_real_distribution<double> u(-0.5, 0.5);
    for (const auto& e : layout.entries())
        if (e.name.compare(0, 10, "copy_head.") == 0)
            for (std::int64_t i = 0; i < e.numel; i++) params[e.offset + i] = static_cast<T>(u(rng));
}

template <typename T>
void randomise(RetroModel<T>& m, unsigned seed) {
    params_init(m.params(), m.layout(), seed);
    std::mt19937 rng(seed + 1);
    std::uniform_real_distribution<double> u(0.5, 1.5);
    for (const auto& e : m.layout().entries())   // norm gains away from 1 so their gradients are exercised
        if (e.name.find("gamma") != std::string::npos)
            for (std::int64_t i = 0; i < e.numel; i++) m.params()[e.offset + i] = static_cast<T>(u(rng));
    randomise_copy_head(m.params(), m.layout(), seed);
}

}  // namespace retro::test
