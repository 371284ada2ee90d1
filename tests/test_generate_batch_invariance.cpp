// Batch invariance of the CPU decoder (generate/cached_decoder.h): a sequence's logits are the same bits whether it is
// decoded alone or beside others — prompts of every length (one token, a few, more than 8, several chunks), decode
// rows in groups of more than 8, chunk boundaries reached together — with retrieval and the copy head, in fp32 and
// with bf16 weights, on one thread and on two (against each sequence alone on one thread). Before, the prompts of a group were one GEMM and more than 8 decode
// rows another, so a prompt's sums depended on its neighbours in the batch (docs/generate.md "Batch mode").
#include <doctest/doctest.h>

#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "core/threads.h"
#include "generate/cached_decoder.h"
#include "model/params.h"
#include "nn/decode_weights_bf16.h"
#include "test_model_fixtures.h"
#include "test_util.h"

using namespace retro;

namespace {

// Wide enough that the linears' kernels matter (OpenBLAS's sgemm sums a row differently by the row count), small
// enough to run in a second.
RetroConfig invariance_config() {
    RetroConfig c = RetroConfig::load((test::source_dir() / "examples" / "configs" / "demo-retrieval-copy.json").string());
    c.num_tokens = 512;
    c.max_seq_len = 64;
    c.validate("invariance");
    return c;
}

struct Script {
    std::vector<std::vector<std::int32_t>> prompts;
    std::vector<std::vector<std::int32_t>> fed;          // [sequence] the decode tokens, one a step
    std::vector<std::vector<std::int32_t>> neighbours;   // [sequence] k*r ids per chunk, enough for max_seq_len
};

Script make_script(const RetroConfig& c, const std::vector<std::int64_t>& prompt_lengths, std::int64_t steps) {
    std::mt19937 rng(7);
    auto id = [&] { return static_cast<std::int32_t>(1 + rng() % (c.num_tokens - 1)); };
    Script s;
    const std::int64_t kr = c.num_neighbours * c.retrieved_len(), chunks = c.max_seq_len / c.chunk_size;
    for (const std::int64_t n : prompt_lengths) {
        std::vector<std::int32_t> p(static_cast<std::size_t>(n)), f(static_cast<std::size_t>(steps)),
            nb(static_cast<std::size_t>(chunks * kr));
        for (auto& t : p) t = id();
        for (auto& t : f) t = id();
        for (auto& t : nb) t = rng() % 9 == 0 ? c.pad_id : id();
        s.prompts.push_back(p);
        s.fed.push_back(f);
        s.neighbours.push_back(nb);
    }
    return s;
}

// Decodes the sequences `which` of the script together; returns each one's logits, step after step (the prompt
// step's last row, then one row a decode step).
std::vector<std::vector<float>> decode(const RetroModel<float>& model, const Script& s, const std::vector<std::size_t>& which,
                                       std::int64_t steps, const nn::DecodeWeightsBf16* bf16) {
    const RetroConfig& c = model.config();
    const std::int64_t cs = c.chunk_size, kr = c.num_neighbours * c.retrieved_len(), V = c.num_tokens;
    CachedDecoder<float> dec(model, static_cast<std::int64_t>(which.size()), true, bf16);
    std::vector<std::vector<float>> out(which.size());
    std::vector<std::vector<std::int32_t>> feed(which.size());
    auto give_neighbours = [&](std::size_t j, std::int64_t length) {   // chunks complete once `length` are fed
        while (dec.neighbour_chunks(static_cast<std::int64_t>(j)) < length / cs) {
            const std::int64_t u = dec.neighbour_chunks(static_cast<std::int64_t>(j));
            dec.add_neighbours(static_cast<std::int64_t>(j), s.neighbours[which[j]].data() + u * kr);
        }
    };
    for (std::int64_t t = -1; t < steps; t++) {
        for (std::size_t j = 0; j < which.size(); j++) {
            const std::size_t q = which[j];
            feed[j] = t < 0 ? s.prompts[q] : std::vector<std::int32_t>{s.fed[q][static_cast<std::size_t>(t)]};
            give_neighbours(j, dec.length(static_cast<std::int64_t>(j)) + static_cast<std::int64_t>(feed[j].size()));
        }
        dec.step(feed);
        for (std::size_t j = 0; j < which.size(); j++) {
            const std::int64_t row = dec.last_row(static_cast<std::int64_t>(j));
            REQUIRE(row >= 0);
            out[j].insert(out[j].end(), dec.logits().begin() + row * V, dec.logits().begin() + (row + 1) * V);
        }
    }
    return out;
}

void check_batch_invariance(const nn::DecodeWeightsBf16* bf16_table, const RetroModel<float>& model) {
    // 11 sequences: more than 8 decode rows a step; prompt lengths 1 (bos alone) to 30, some ending on a chunk
    // boundary (8, 16, 24) so that several sequences encode a chunk in the same step
    const std::vector<std::int64_t> lengths = {1, 3, 8, 9, 13, 17, 2, 24, 5, 30, 16};
    const std::int64_t steps = 20;
    const Script s = make_script(model.config(), lengths, steps);
    std::vector<std::size_t> all(lengths.size());
    for (std::size_t i = 0; i < all.size(); i++) all[i] = i;
    std::vector<std::vector<float>> reference;   // each sequence alone on one thread
    {
        test::ThreadCountScope one(1);
        for (std::size_t q = 0; q < lengths.size(); q++) reference.push_back(decode(model, s, {q}, steps, bf16_table)[0]);
    }
    for (const int threads : {1, 2}) {
        test::ThreadCountScope scope(threads);
        const auto together = decode(model, s, all, steps, bf16_table);
        const auto first_four = decode(model, s, {0, 1, 2, 3}, steps, bf16_table);
        for (std::size_t q = 0; q < lengths.size(); q++) {
            INFO("threads " << threads << ", sequence " << q << " (prompt of " << lengths[q] << " tokens)");
            const auto& ref = reference[q];
            const auto alone = decode(model, s, {q}, steps, bf16_table);
            REQUIRE(alone[0].size() == ref.size());
            REQUIRE(together[q].size() == ref.size());
            const std::size_t bytes = ref.size() * sizeof(float);
            CHECK(std::memcmp(alone[0].data(), ref.data(), bytes) == 0);
            CHECK(std::memcmp(together[q].data(), ref.data(), bytes) == 0);
            if (q < 4) CHECK(std::memcmp(first_four[q].data(), ref.data(), bytes) == 0);
        }
    }
}

}  // namespace

TEST_CASE("generate batch invariance: a sequence's logits are the same bits alone and in any group, on 1 or 2 threads") {
    RetroModel<float> model(invariance_config());
    test::randomise(model, 3);
    check_batch_invariance(nullptr, model);
    if (nn::bf16_decode_available()) {
        INFO("bf16 weights");
        const auto table = linear_weights_bf16(model);
        check_batch_invariance(table.get(), model);
    }
}
