// The decode tests' shared fixtures (test_generate.cpp, test_nn_decode_program_host.cpp): the tiny config with room for
// several chunks, its same-width form, and a whole decode's logits on a backend in any graph / decode-program mode.
#pragma once
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "generate/backend_decoder.h"
#include "model/config.h"
#include "model/retro.h"
#include "nn/decode_program.h"
#include "nn/nn_backend.h"
#include "test_model_fixtures.h"
#include "test_util.h"

namespace retro::test {

// examples/configs/tiny.json with room for several chunks of 4
inline RetroConfig decode_config() {
    RetroConfig c = RetroConfig::load((source_dir() / "examples" / "configs" / "tiny.json").string());
    c.max_seq_len = 32;   // room for several chunks of 4
    return c;
}

// The encoder as wide as the decoder: no projection between the embedding and the decoder (RETRO-pytorch's
// Identity), so the backend decoder embeds straight into its stream.
inline RetroConfig same_width_decode_config() {
    RetroConfig c = decode_config();
    c.enc_dim = c.dec_dim;
    c.validate("same width");
    return c;
}

// The model's weights uploaded to `be` (BackendDecoder reads them there).
inline nn::BackendBuffer upload_weights(nn::NnBackend& be, const RetroModel<float>& model) {
    nn::BackendBuffer weights(be, model.params().size() * sizeof(float));
    be.upload(weights.get(), model.params().data(), model.params().size() * sizeof(float));
    return weights;
}

// Every step's last-row logits of `sequences` sequences decoded together on `be` (a `prompt`-token prompt, then one
// token a step up to `end` tokens, neighbours added as chunks finish), eager or as graphs: the same ids and
// neighbours for every backend.
// With a decode program mode the graph-eligible steps run from a recording (nn/decode_program.h) where it takes them;
// *program_steps (when given) gets how many did, *fused_steps how many of them ran fused.
inline std::vector<float> decode_logits(nn::NnBackend& be, const RetroConfig& c, const RetroModel<float>& model,
                                        bool graphs, nn::DecodeProgramMode program = nn::DecodeProgramMode::off,
                                        std::int64_t* program_steps = nullptr, std::int64_t* fused_steps = nullptr,
                                        std::int64_t sequences = 1, int replays = 0, std::int64_t prompt = 5,
                                        std::int64_t end = 24) {
    const nn::BackendBuffer weights = upload_weights(be, model);
    BackendDecoder dec(c, weights.f(), be, sequences, true);
    dec.set_graphs(graphs);
    dec.set_decode_program(program);
    std::mt19937 rng(17);
    std::vector<std::vector<std::int32_t>> ids(static_cast<std::size_t>(sequences));
    for (auto& seq : ids)
        for (std::int64_t i = 0; i < end; i++) seq.push_back(1 + static_cast<std::int32_t>(rng() % (c.num_tokens - 1)));
    std::vector<float> out;
    std::int64_t len = 0;
    for (std::int64_t target = prompt; target <= end; target++) {
        std::vector<std::vector<std::int32_t>> feed;
        for (std::int64_t s = 0; s < sequences; s++) {
            while (dec.neighbour_chunks(s) < target / c.chunk_size) dec.add_neighbours(s, random_neighbours(c, rng).data());
            const auto& seq = ids[static_cast<std::size_t>(s)];
            feed.emplace_back(seq.begin() + len, seq.begin() + target);
        }
        dec.step(feed, false);
        if (replays > 0) dec.time_replays(replays);   // (idempotent: must change no logit of this step or later)
        len = target;
        for (std::int64_t s = 0; s < sequences; s++) {
            const float* row = dec.logits().data() + dec.last_row(s) * c.num_tokens;
            out.insert(out.end(), row, row + c.num_tokens);
        }
    }
    if (program == nn::DecodeProgramMode::off) CHECK((dec.graph_launches() > 0) == graphs);   // replayed where asked for
    if (program_steps) *program_steps = dec.program_steps();
    if (fused_steps) *fused_steps = dec.fused_steps();
    if (program != nn::DecodeProgramMode::off) MESSAGE("last decode program fallback: " << dec.program_fallback());
    return out;
}

// max |a - ref| over max |ref| (the decode tests' relative error)
template <typename T>
inline double rel_err(const T* a, const std::vector<T>& ref) {
    double diff = 0, scale = 0;
    for (std::size_t i = 0; i < ref.size(); i++) {
        diff = std::max(diff, std::abs(static_cast<double>(a[i]) - static_cast<double>(ref[i])));
        scale = std::max(scale, std::abs(static_cast<double>(ref[i])));
    }
    return diff / scale;
}

}  // namespace retro::test
