// RETRO model: whole-model gradient check in double (every parameter tensor, with -1 neighbours, missing
// continuations and ignored labels), causality and chunk-grid perturbation tests (ARCHITECTURE.md Decision 2),
// config validation and the safetensors weights round trip.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include "core/error.h"
#include "core/safetensors.h"
#include "core/threads.h"
#include "model/backend_model.h"
#include "model/config.h"
#include "model/param_groups.h"
#include "model/params.h"
#include "model/retro.h"
#include "nn/nn_backend_host.h"
#include "test_model_fixtures.h"
#include "test_nn_gradcheck.h"
#include "test_util.h"

using namespace retro;
using namespace retro::test;

namespace {

// The check runs ~2000 tiny forwards: one thread, so that no time goes to waking thread teams.
struct SingleThread {
    int previous = thread_count();
    SingleThread() { set_thread_count(1); }
    ~SingleThread() { set_thread_count(previous); }
};

void model_grad_check(const RetroConfig& c, const RetroBatch& batch) {
    SingleThread single;
    RetroModel<double> m(c);
    randomise(m, 7);
    m.zero_grad();
    m.forward(batch);
    m.backward();
    std::vector<double> analytic = m.grads();
    auto& p = m.params();
    const double eps = 1e-5;
    double worst = 0;
    std::string worst_name;
    int tensors = 0;
    for (const auto& e : m.layout().entries()) {
        std::vector<std::int64_t> idx;
        if (e.numel <= 48) {
            for (std::int64_t i = 0; i < e.numel; i++) idx.push_back(i);
        } else {
            std::int64_t best = 0;
            for (std::int64_t i = 0; i < e.numel; i++)
                if (std::abs(analytic[e.offset + i]) > std::abs(analytic[e.offset + best])) best = i;
            idx.push_back(best);
            std::mt19937 rng(static_cast<unsigned>(e.offset));
            for (int s = 0; s < 10; s++) idx.push_back(static_cast<std::int64_t>(rng() % e.numel));
        }
        std::vector<std::size_t> at;
        for (auto i : idx) at.push_back(static_cast<std::size_t>(e.offset + i));
        const auto g = ops::grad_check_at([&] { return m.forward(batch); }, p.data(), analytic.data(), at, eps);
        const double max_mag = std::max(g.max_numeric, g.max_analytic);
        INFO(e.name);
        CHECK(max_mag > 0);   // every tensor takes part in the loss
        const double rel = g.rel_err;
        CHECK(rel <= 1e-6);
        if (rel > worst) {
            worst = rel;
            worst_name = e.name;
        }
        tensors++;
    }
    MESSAGE("model gradient check: " << tensors << " tensors, worst rel err " << worst << " (" << worst_name << ")");
}

}  // namespace

TEST_CASE("model: whole-model gradient check in double (with retrieval)") {
    auto c = tiny_config();
    model_grad_check(c, tiny_batch(c, 2, 10, 3));   // n = 10: two chunks and a partial one
}

TEST_CASE("model: whole-model gradient check in double (encoder cross-attention in every layer and enc_dim == dec_dim)") {
    auto c = tiny_config();
    c.enc_cross_attn_all = true;
    c.enc_cross_attn_layers.clear();
    c.enc_dim = 12;
    c.dec_cross_attn_layers = {1, 3};
    model_grad_check(c, tiny_batch(c, 1, 12, 4));
}

TEST_CASE("model: no-retrieval forward is a plain decoder and checks out") {
    auto c = tiny_config();
    RetroModel<double> m(c);
    randomise(m, 9);
    auto b = tiny_batch(c, 2, 8, 5, false);
    const double loss = m.forward(b);
    CHECK(std::isfinite(loss));
    m.zero_grad();
    m.backward();
    for (double g : std::vector<double>(m.grads().begin() + m.layout().offset("encoder.project_out.weight"),
                                        m.grads().begin() + m.layout().offset("encoder.project_out.weight") + 10))
        CHECK(g == 0.0);   // encoder not run
    const std::int64_t j = m.layout().offset("decoder.layers.0.2.fn.ff.0.weight") + 3;
    const double keep = m.params()[j];
    m.params()[j] = keep + 1e-5;
    const double lp = m.forward(b);
    m.params()[j] = keep - 1e-5;
    const double lm = m.forward(b);
    CHECK(std::abs((lp - lm) / 2e-5 - m.grads()[j]) <= 1e-6 * std::max(1e-3, std::abs(m.grads()[j])));
}

TEST_CASE("model: causality - nothing before p changes when token p changes") {
    auto c = tiny_config();
    RetroModel<float> m(c);
    randomise(m, 11);
    const std::int64_t n = 12, V = c.num_tokens;
    auto b = tiny_batch(c, 1, n, 6);
    m.forward(b);
    const auto base = m.logits();
    for (std::int64_t p = 0; p < n; p++) {
        auto b2 = b;
        b2.seq[p] = (b2.seq[p] % (V - 1)) + 1 == b2.seq[p] ? 1 : (b2.seq[p] % (V - 1)) + 1;
        m.forward(b2);
        const auto& lg = m.logits();
        for (std::int64_t t = 0; t < n; t++) {
            bool same = std::equal(lg.begin() + t * V, lg.begin() + (t + 1) * V, base.begin() + t * V);
            CAPTURE(p);
            CAPTURE(t);
            if (t < p) CHECK(same);
            if (t == p) CHECK_FALSE(same);
        }
    }
}

TEST_CASE("model: chunk grid - chunk u neighbours reach exactly positions >= (u+1)cs-1") {
    auto c = tiny_config();
    RetroModel<float> m(c);
    randomise(m, 12);
    const std::int64_t n = 14, V = c.num_tokens, cs = c.chunk_size, l = n / cs;   // l = 3, partial last chunk
    auto b = tiny_batch(c, 2, n, 7);
    m.forward(b);
    const auto base = m.logits();
    for (std::int64_t u = 0; u < l; u++) {
        auto b2 = b;
        for (std::int64_t j = 0; j < b.k; j++)   // batch item 0, chunk u: replace the first neighbour's tokens
            for (std::int64_t t = 0; t < cs; t++) {
                auto& id = b2.retrieved[((0 * l + u) * b.k + 0) * b.r + t];
                id = id == 5 ? 6 : 5;
            }
        m.forward(b2);
        const auto& lg = m.logits();
        for (std::int64_t bb = 0; bb < 2; bb++)
            for (std::int64_t t = 0; t < n; t++) {
                const auto off = (bb * n + t) * V;
                bool same = std::equal(lg.begin() + off, lg.begin() + off + V, base.begin() + off);
                CAPTURE(u);
                CAPTURE(t);
                CAPTURE(bb);
                if (bb == 1 || t < (u + 1) * cs - 1) CHECK(same);
                if (bb == 0 && t == (u + 1) * cs - 1) CHECK_FALSE(same);
            }
    }
}

TEST_CASE("model: config validation refuses bad configs") {
    auto bad = [](const char* text) {
        CHECK_THROWS_AS(RetroConfig::from_json(nlohmann::json::parse(text), "cfg.json"), UserError);
    };
    bad(R"({"max_seq_len": 100, "chunk_size": 64})");
    bad(R"({"dec_depth": 4, "dec_cross_attn_layers": [1, 5]})");
    bad(R"({"dec_depth": 4, "dec_cross_attn_layers": [2, 2]})");
    bad(R"({"enc_depth": 2, "enc_cross_attn_layers": [3], "dec_cross_attn_layers": [1]})");
    bad(R"({"dim_head": 16})");
    bad(R"({"dec_attn_dropout": 0.25})");
    bad(R"({"use_deepnet": true})");
    bad(R"({"heads": 0})");
    bad(R"({"dec_dims": 8})");
    auto ok = RetroConfig::from_json(nlohmann::json::parse(R"({"dec_depth": 12, "enc_cross_attn_layers": null})"), "x");
    CHECK(ok.dec_cross_attn_layers == std::vector<std::int64_t>{1, 3, 6, 9});
    CHECK(ok.enc_cross_attn_all);
    auto back = RetroConfig::from_json(ok.to_json(), "x");
    CHECK(back.to_json() == ok.to_json());
    CHECK_FALSE(ok.to_json().contains("cca_query_positions"));   // the RP default is not written
    bad(R"({"cca_query_positions": "middle"})");
    // what an RP user's config meets (session 61): RP's spelling of a field, a dropout the weights were trained with
    const auto refusal = [](const char* text) {
        try {
            RetroConfig::from_json(nlohmann::json::parse(text), "cfg.json");
        } catch (const UserError& e) {
            return std::string(e.what());
        }
        return std::string("(accepted)");
    };
    CHECK(refusal(R"({"num_neighbors": 2})") ==
          "cfg.json: unknown model config field \"num_neighbors\" (fix: did you mean \"num_neighbours\"? (docs/model.md lists the fields))");
    CHECK(refusal(R"({"colour": 2})").find("see docs/model.md for the fields") != std::string::npos);   // nothing near
    CHECK(refusal(R"({"dec_attn_dropout": 0.25})").find("\"dec_attn_dropout\" must be 0 (RetroKit trains without dropout) "
                                                        "(fix: set it to 0 (or remove it) to evaluate or generate") !=
          std::string::npos);
    auto aligned = RetroConfig::from_json(nlohmann::json::parse(R"({"cca_query_positions": "aligned"})"), "x");
    CHECK(aligned.cca_query_positions == "aligned");
    CHECK(RetroConfig::from_json(aligned.to_json(), "x").cca_query_positions == "aligned");
}

TEST_CASE("model: whole-model gradient check in double with aligned CCA query positions") {
    auto c = tiny_config();
    c.cca_query_positions = "aligned";
    model_grad_check(c, tiny_batch(c, 2, 10, 3));
}

TEST_CASE("model: tied embeddings: one table for input and head, gradients of both uses in it (double)") {
    auto c = tiny_config();
    c.enc_dim = c.dec_dim;   // the head reads token_emb, so the widths must agree
    c.tie_embeddings = true;
    const ParamLayout tied(c);
    CHECK_FALSE(tied.has("to_logits.weight"));
    CHECK(tied.has("to_logits.bias"));
    auto plain = c;
    plain.tie_embeddings = false;
    CHECK(ParamLayout(plain).total() - tied.total() == c.num_tokens * c.dec_dim);
    // the gradient check perturbs token_emb, which moves the input embeddings, the encoder's and the logits at once
    model_grad_check(c, tiny_batch(c, 2, 10, 3));
    // the file holds no to_logits.weight and loads back; an untied layout refuses it
    test::TempDir dir("tied");
    RetroModel<float> m(c);
    randomise(m, 5);
    CHECK(m.bound().to_logits_w == m.bound().token_emb);
    const auto path = (dir / "model.safetensors").string();
    params_save(path, m.params(), m.layout(), c);
    CHECK_FALSE(SafetensorsFile(path).has("to_logits.weight"));
    std::vector<float> back;
    params_load(path, back, m.layout(), c);
    CHECK(back == m.params());
    CHECK_THROWS_AS(params_load(path, back, ParamLayout(plain), plain), UserError);
    // weights saved under another config whose tensors have the same shapes (8 heads of 32 against 4 of 64; CCA's
    // query positions) are refused naming the fields (before: loaded, and the model computed something else); how CCA
    // starts (cca_zero_init) is not what the weights mean: taken
    {
        auto other = c;
        other.heads = c.heads / 2;
        other.dim_head = c.dim_head * 2;
        REQUIRE(ParamLayout(other).total() == ParamLayout(c).total());
        try {
            params_load(path, back, ParamLayout(other), other);
            FAIL("weights of another heads x dim_head loaded");
        } catch (const UserError& e) {
            CHECK(std::string(e.what()).find("was saved under another model config: \"dim_head\" ") != std::string::npos);
            CHECK(std::string(e.what()).find("\"heads\" ") != std::string::npos);
        }
        auto aligned = c;
        aligned.cca_query_positions = "aligned";
        CHECK_THROWS_AS(params_load(path, back, m.layout(), aligned), UserError);
        auto zero_init = c;
        zero_init.cca_zero_init = !c.cca_zero_init;
        params_load(path, back, m.layout(), zero_init);
        CHECK(back == m.params());
    }
    // retro-fitting (--train-only cca,encoder) trains neither the shared table nor the head: both are decoder tensors
    const auto trainable = param_trainable(tied, param_groups_parse("cca,encoder", "test"));
    CHECK_FALSE(trainable[static_cast<std::size_t>(&tied.at("token_emb.weight") - tied.entries().data())]);
    CHECK_FALSE(param_backward_skips(tied, c, trainable).head_trainable);
    // config: written only when true, a boolean, and refused when enc_dim != dec_dim
    CHECK(RetroConfig::from_json(c.to_json(), "x").tie_embeddings);
    CHECK_FALSE(plain.to_json().contains("tie_embeddings"));
    CHECK_THROWS_AS(RetroConfig::from_json(nlohmann::json::parse(R"({"tie_embeddings": 1})"), "x"), UserError);
    const auto widths = nlohmann::json::parse(R"({"tie_embeddings": true, "enc_dim": 8, "dec_dim": 12})");
    CHECK_THROWS_AS(RetroConfig::from_json(widths, "x"), UserError);
}

TEST_CASE("model: cca_zero_init starts RETRO at its no-retrieval twin's function, the other tensors as drawn") {
    auto zc = tiny_config();
    zc.cca_zero_init = true;
    CHECK(RetroConfig::from_json(zc.to_json(), "x").cca_zero_init);
    CHECK_FALSE(tiny_config().to_json().contains("cca_zero_init"));
    RetroModel<float> z(zc), plain(tiny_config());
    params_init(z.params(), z.layout(), 21);
    params_init(plain.params(), plain.layout(), 21);
    int zeroed = 0;
    for (const auto& e : z.layout().entries()) {
        const bool cca_out = e.name.find(".1.fn.cross_attn.to_out.") != std::string::npos;
        std::int64_t off = 0;   // elements that are not what they should be: 0 in CCA's to_out, plain's elsewhere
        for (std::int64_t i = 0; i < e.numel; i++) {
            const float a = z.params()[e.offset + i], b = plain.params()[e.offset + i];
            off += cca_out ? a != 0.0f : a != b;
        }
        INFO(e.name);
        CHECK(off == 0);
        zeroed += cca_out;
    }
    CHECK(zeroed == 2 * static_cast<int>(zc.dec_cross_attn_layers.size()));   // weight and bias of each CCA layer
    const auto with = tiny_batch(zc, 2, 10, 3), without = tiny_batch(zc, 2, 10, 3, false);
    z.forward(without);
    const std::vector<float> twin = z.logits();
    z.zero_grad();
    z.forward(with);
    CHECK(z.logits() == twin);   // bit for bit: CCA adds exact zeros
    z.backward();
    double g = 0;   // ...and its output projection still gets a gradient, so it learns
    for (const auto& e : z.layout().entries())
        if (e.name.find(".1.fn.cross_attn.to_out.weight") != std::string::npos)
            for (std::int64_t i = 0; i < e.numel; i++) g += std::abs(z.grads()[e.offset + i]);
    CHECK(g > 0);
}

TEST_CASE("model: copy head - gradient check in double, zero at the start, nothing without neighbours") {
    auto c = tiny_config();
    c.copy_head = true;
    CHECK(RetroConfig::from_json(c.to_json(), "x").copy_head);
    CHECK_FALSE(tiny_config().to_json().contains("copy_head"));
    CHECK_THROWS_AS(RetroConfig::from_json(nlohmann::json::parse(R"({"copy_head": "yes"})"), "x"), UserError);
    CHECK_THROWS_AS(RetroConfig::from_json(nlohmann::json::parse(R"({"copy_head": true, "dec_cross_attn_layers": []})"), "x"),
                    UserError);
    // tiny's 13-token vocabulary makes matches of 1-3 tokens common: the gates fire in several buckets
    model_grad_check(c, tiny_batch(c, 2, 12, 3));
    // the head is its own group (`--train-only ...,copy`) and starts at zero: the plain model's function
    const ParamLayout layout(c);
    CHECK(param_group("copy_head.bias") == ParamGroup::COPY);
    const auto trainable = param_trainable(layout, param_groups_parse("copy", "test"));
    for (const auto& e : layout.entries())
        CHECK(trainable[static_cast<std::size_t>(&e - layout.entries().data())] == (e.name.compare(0, 10, "copy_head.") == 0));
    RetroModel<float> head(c), plain(tiny_config());
    params_init(head.params(), head.layout(), 21);
    params_init(plain.params(), plain.layout(), 21);
    CHECK(std::equal(plain.params().begin(), plain.params().end(), head.params().begin()));
    const auto with = tiny_batch(c, 2, 12, 3), without = tiny_batch(c, 2, 12, 3, false);
    head.forward(with);
    plain.forward(with);
    CHECK(head.logits() == plain.logits());
    randomise_copy_head(head.params(), head.layout(), 4);
    head.forward(with);
    CHECK(head.logits() != plain.logits());
    head.forward(without);   // no neighbours: no candidates, the plain decoder's logits bit for bit
    plain.forward(without);
    CHECK(head.logits() == plain.logits());
}

TEST_CASE("model: shipped configs load") {
    for (const char* name : {"tiny.json", "demo.json", "demo-retrieval.json", "demo-retrieval-tied.json",
                             "demo-retrieval-copy.json", "retro-172m.json",
                             "retro-1b.json"}) {
        auto path = test::source_dir() / "examples" / "configs" / name;
        INFO(std::string(name));
        auto c = RetroConfig::load(path.string());
        ParamLayout layout(c);
        CHECK(layout.total() > 0);
        if (std::string(name) == "retro-172m.json") MESSAGE("retro-172m parameters: " << layout.total());
    }
}

TEST_CASE("model: weights round trip through safetensors under RP names and wrong files are refused") {
    test::TempDir dir("model");
    auto c = tiny_config();
    RetroModel<float> m(c);
    randomise(m, 13);
    const auto path = (dir / "model.safetensors").string();
    params_save(path, m.params(), m.layout(), c);
    std::vector<float> back;
    params_load(path, back, m.layout(), c);
    CHECK(back == m.params());
    SafetensorsFile f(path);
    CHECK(f.has("decoder.layers.1.1.fn.cross_attn.null_k"));
    CHECK(f.has("encoder.layers.0.1.fn.to_k.weight"));
    CHECK_FALSE(f.has("encoder.layers.1.1.fn.to_k.weight"));
    CHECK(f.has("decoder.rotary_pos_emb.inv_freq"));
    // another config: a missing or unexpected tensor
    auto c2 = c;
    c2.dec_cross_attn_layers = {1, 2};
    ParamLayout l2(c2);
    CHECK_THROWS_AS(params_load(path, back, l2, c2), UserError);
    auto c3 = c;
    c3.dec_dim = 16;
    ParamLayout l3(c3);
    CHECK_THROWS_AS(params_load(path, back, l3, c3), UserError);
    // a corrupt file
    {
        std::fstream io(path, std::ios::in | std::ios::out | std::ios::binary);
        io.seekp(3);
        io.put('\x7f');
    }
    CHECK_THROWS_AS(params_load(path, back, m.layout(), c), UserError);
}

// Config edges no other case reached (session 62c's mutation campaign). References: RETRO-pytorch's Decoder
// (`has_cross_attn = not exists(cross_attn_layers) or layer_num in cross_attn_layers`: None = every layer), and the
// documented ranges (docs/model.md: pad_id a token id, so in [0, num_tokens); neighbour_min_match a run length of
// at most one chunk, so chunk_size itself is allowed).
TEST_CASE("model: config edges - dec_cross_attn_layers null is every decoder layer, pad_id and neighbour_min_match at their bounds") {
    const auto parse = [](const std::string& text) { return RetroConfig::from_json(nlohmann::json::parse(text), "cfg.json"); };
    for (const std::int64_t depth : {1, 2, 5}) {
        CAPTURE(depth);
        const RetroConfig c = parse(R"({"dec_depth": )" + std::to_string(depth) + R"(, "dec_cross_attn_layers": null})");
        std::vector<std::int64_t> every;
        for (std::int64_t l = 1; l <= depth; l++) every.push_back(l);
        CHECK(c.dec_cross_attn_layers == every);
        for (std::int64_t l = 1; l <= depth; l++) CHECK(c.dec_has_cross(l));
    }
    // pad_id: the last token id is a valid pad, one past it is not
    CHECK_NOTHROW(parse(R"({"num_tokens": 300, "pad_id": 299})"));
    CHECK_THROWS_AS(parse(R"({"num_tokens": 300, "pad_id": 300})"), UserError);
    CHECK_THROWS_AS(parse(R"({"num_tokens": 300, "pad_id": -1})"), UserError);
    // neighbour_min_match: a whole chunk's run is the strictest filter there is, one more can never match
    CHECK(parse(R"({"chunk_size": 64, "neighbour_min_match": 64})").neighbour_min_match == 64);
    CHECK_THROWS_AS(parse(R"({"chunk_size": 64, "neighbour_min_match": 65})"), UserError);
}

// The documented initialisation (params.h, docs/model.md's tie_embeddings row): every Linear weight and bias
// U(+-1/sqrt(fan_in)) as PyTorch's nn.Linear, fan_in the weight's second dimension; token_emb and pos_emb N(0, 1),
// or N(0, 1/dec_dim) both with tie_embeddings. Checked on the drawn values: a uniform's largest |value| of
// thousands of draws is within 1 % of its bound, and a normal's sample std within 5 % of its std.
TEST_CASE("model: parameters start as documented - Linear U(1/sqrt(fan_in)), embeddings N(0, 1) or N(0, 1/dec_dim) tied") {
    auto c = tiny_config();
    c.num_tokens = 1024;
    c.max_seq_len = 256;
    c.enc_dim = c.dec_dim = 32;
    c.heads = 2;
    c.dim_head = 32;   // inner width 64, not dec_dim: a fan_out bound would differ
    for (const bool tied : {false, true}) {
        CAPTURE(tied);
        c.tie_embeddings = tied;
        const ParamLayout layout(c);
        std::vector<double> p;
        params_init(p, layout, 7);
        const auto stats = [&](const std::string& name, double& sd, double& amax) {
            const auto& e = layout.at(name);
            double ss = 0;
            amax = 0;
            for (std::int64_t j = 0; j < e.numel; ++j) {
                const double v = p[static_cast<std::size_t>(e.offset + j)];
                ss += v * v;
                amax = std::max(amax, std::abs(v));
            }
            sd = std::sqrt(ss / static_cast<double>(e.numel));
        };
        const double emb_sd = tied ? 1.0 / std::sqrt(double(c.dec_dim)) : 1.0;
        for (const char* name : {"token_emb.weight", "pos_emb.weight"}) {
            CAPTURE(name);
            double sd = 0, amax = 0;
            stats(name, sd, amax);
            CHECK(sd == doctest::Approx(emb_sd).epsilon(0.05));
        }
        for (const char* name : {"decoder.layers.0.0.fn.to_q.weight", "decoder.layers.0.0.fn.to_out.weight",
                                 "decoder.layers.0.2.fn.ff.0.weight", "decoder.layers.0.2.fn.ff.3.weight",
                                 "encoder.layers.0.2.fn.ff.0.weight", "decoder.layers.0.2.fn.ff.0.bias"}) {
            CAPTURE(name);
            const std::string weight = std::string(name).substr(0, std::string(name).rfind('.')) + ".weight";
            const double fan_in = double(layout.at(weight).shape[1]);
            double sd = 0, amax = 0;
            stats(name, sd, amax);
            CHECK(amax <= 1.0 / std::sqrt(fan_in));
            if (layout.at(name).numel >= 1000) CHECK(amax >= 0.99 / std::sqrt(fan_in));
            CHECK(sd == doctest::Approx(1.0 / std::sqrt(3.0 * fan_in)).epsilon(0.1));   // U(-a, a): std a / sqrt(3)
        }
    }
}
