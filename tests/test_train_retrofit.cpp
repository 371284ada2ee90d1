// Retro-fitting (retro-train --init-from / --train-only, RETRO paper §4.2): the parameter groups, AdamW and the
// model's backward with frozen tensors, and end to end: a --no-retrieval base retro-fitted with
// --train-only cca,encoder keeps its no-retrieval logits bit for bit while its CCA and encoder train; bad bases
// and groups exit 2 with one line; a retro-fitted run killed and resumed equals an uninterrupted one.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include <nlohmann/json.hpp>

#include "core/fingerprint.h"
#include "core/manifest.h"
#include "model/config.h"
#include "model/param_groups.h"
#include "model/params.h"
#include "model/retro.h"
#include "test_train_fixtures.h"
#include "test_util.h"
#include "train/adamw.h"
#include "train/data.h"

using namespace retro;
namespace fs = std::filesystem;

namespace {

bool one_line(const test::RunResult& r) { return r.err.size() > 1 && r.err.find('\n') == r.err.size() - 1; }

template <typename T>
std::vector<T> load_weights(const fs::path& p, const RetroConfig& c) {
    ParamLayout layout(c);
    std::vector<T> w;
    params_load(p.string(), w, layout, c);
    return w;
}

bool same_bytes(const void* a, const void* b, std::size_t n) { return std::memcmp(a, b, n) == 0; }

std::vector<std::int64_t> first_seqs(const RetroData& d, std::size_t n) {
    std::vector<std::int64_t> s(d.train_seqs().begin(), d.train_seqs().begin() + std::min(n, d.train_seqs().size()));
    return s;
}

}  // namespace

TEST_CASE("retrofit: parameter groups name every tensor and parse lists") {
    RetroConfig c = RetroConfig::load(test::config_path());
    CHECK(param_group("decoder.layers.1.1.fn.cross_attn.null_k") == ParamGroup::CCA);
    CHECK(param_group("decoder.layers.1.1.norm.gamma") == ParamGroup::CCA);
    CHECK(param_group("decoder.layers.11.1.fn.cross_attn.to_q.weight") == ParamGroup::CCA);
    CHECK(param_group("decoder.layers.1.0.norm.gamma") == ParamGroup::DECODER);
    CHECK(param_group("decoder.layers.1.2.fn.ff.0.weight") == ParamGroup::DECODER);
    CHECK(param_group("encoder.layers.0.1.fn.to_k.weight") == ParamGroup::ENCODER);
    CHECK(param_group("encoder.project_out.bias") == ParamGroup::ENCODER);
    CHECK(param_group("token_emb.weight") == ParamGroup::DECODER);
    CHECK(param_group("to_decoder_model_dim.weight") == ParamGroup::DECODER);
    CHECK(param_group("to_logits.weight") == ParamGroup::DECODER);
    CHECK(param_groups_string(param_groups_parse("encoder,cca", "--train-only")) == "cca,encoder");
    CHECK_THROWS_AS(param_groups_parse("encoder,cca,encoder", "--train-only"), UserError);   // a group twice
    CHECK_THROWS_AS(param_groups_parse("cca,bogus", "--train-only"), UserError);
    CHECK_THROWS_AS(param_groups_parse("cca,", "--train-only"), UserError);
    ParamLayout layout(c);
    const auto t = param_trainable(layout, {ParamGroup::CCA});
    std::int64_t cca = 0;
    for (std::size_t i = 0; i < t.size(); i++) cca += t[i];
    CHECK(cca == 2 * 8);   // tiny: two CCA layers of null_k, null_v, to_q, to_k, to_v, to_out (w, b), norm
}

TEST_CASE("retrofit: AdamW leaves frozen tensors untouched and steps the others as the full optimizer does") {
    RetroConfig c = RetroConfig::load(test::config_path());
    ParamLayout layout(c);
    std::vector<float> p0, g(static_cast<std::size_t>(layout.total()));
    params_init(p0, layout, 7);
    std::mt19937 rng(3);
    std::normal_distribution<float> nd;
    const auto trainable = param_trainable(layout, {ParamGroup::CCA, ParamGroup::ENCODER});
    AdamW<float> full(layout, AdamWConfig{}), part(layout, AdamWConfig{}, trainable);
    CHECK(full.trainable_count() == layout.total());
    CHECK(part.trainable_count() < layout.total());
    std::vector<float> pf = p0, pp = p0;
    for (int s = 0; s < 3; s++) {
        for (auto& x : g) x = nd(rng);
        full.step(pf, g, 1e-2);
        part.step(pp, g, 1e-2);
    }
    for (std::size_t t = 0; t < layout.entries().size(); t++) {
        const auto& e = layout.entries()[t];
        const std::size_t n = static_cast<std::size_t>(e.numel) * sizeof(float);
        INFO(e.name);
        if (trainable[t])
            CHECK(same_bytes(pp.data() + e.offset, pf.data() + e.offset, n));
        else
            CHECK(same_bytes(pp.data() + e.offset, p0.data() + e.offset, n));
    }
}

TEST_CASE("retrofit: backward with frozen groups gives the trainable tensors' gradients bit for bit") {
    test::TempDir dir("retrofit-grad");
    test::write_tiny_db(dir / "db", dir / "knn", 4, 16, 30, 8);
    RetroConfig c = RetroConfig::load(test::config_path());
    RetroData data((dir / "db").string(), (dir / "knn").string(), c, 0.2);
    RetroBatch batch;
    data.make_batch(first_seqs(data, 3), true, batch);
    REQUIRE(batch.has_retrieval());
    RetroModel<double> full(c);
    params_init(full.params(), full.layout(), 11);
    full.zero_grad();
    full.forward(batch);
    full.backward();
    const std::vector<std::vector<ParamGroup>> choices = {
        {ParamGroup::CCA, ParamGroup::ENCODER}, {ParamGroup::CCA}, {ParamGroup::ENCODER}, {ParamGroup::DECODER}};
    for (const auto& groups : choices) {
        INFO(param_groups_string(groups));
        RetroModel<double> m(c);
        m.params() = full.params();
        const auto t = param_trainable(m.layout(), groups);
        m.set_trainable(t);
        m.zero_grad();
        m.forward(batch);
        m.backward();
        for (std::size_t i = 0; i < t.size(); i++) {
            if (!t[i]) continue;
            const auto& e = m.layout().entries()[i];
            INFO(e.name);
            CHECK(same_bytes(m.grads().data() + e.offset, full.grads().data() + e.offset,
                             static_cast<std::size_t>(e.numel) * sizeof(double)));
        }
    }
}

namespace {
// A --no-retrieval base of `config` (a file) retro-fitted with --train-only `groups` (canonical order): the frozen
// tensors stay the base's bytes, the trainable ones move, and without retrieval the logits are the base's bit for bit.
void check_retrofit_keeps_base(const test::TempDir& dir, const std::string& config, const std::string& groups) {
    test::write_tiny_db(dir / "db", dir / "knn", 4, 16, 40, 6);
    const std::string common = "--db " + (dir / "db").string() + " --knn " + (dir / "knn").string() + " --config " +
                               config + " --batch-size 4 --lr 3e-3 --warmup 2 --val-fraction 0.2 --val-batches 1 --threads 1";
    auto base = test::run_tool("retro-train", common + " --steps 6 --seed 3 --no-retrieval --quiet --out " +
                                                  (dir / "base").string());
    INFO(base.err);
    REQUIRE(base.exit_code == 0);
    auto fit = test::run_tool("retro-train", common + " --steps 6 --seed 4 --init-from " + (dir / "base").string() +
                                                 " --train-only " + groups + " --out " + (dir / "fit").string());
    INFO(fit.err);
    REQUIRE(fit.exit_code == 0);

    RetroConfig c = RetroConfig::load(config);
    ParamLayout layout(c);
    std::int64_t frozen = 0;
    for (const auto& e : layout.entries())
        if (param_group(e.name) == ParamGroup::DECODER) frozen += e.numel;
    CHECK(fit.err.find("parameters: " + std::to_string(layout.total() - frozen) + " trainable (" + groups + "), " +
                       std::to_string(frozen) + " frozen") != std::string::npos);
    CHECK(fit.err.find(std::to_string(layout.entries().size()) + " tensors copied, 0 fresh") != std::string::npos);

    // every frozen tensor is the base's, byte for byte; every trainable one moved
    const auto wb = load_weights<float>(dir / "base" / "model.safetensors", c);
    const auto wf = load_weights<float>(dir / "fit" / "model.safetensors", c);
    for (const auto& e : layout.entries()) {
        INFO(e.name);
        const bool same = same_bytes(wb.data() + e.offset, wf.data() + e.offset, static_cast<std::size_t>(e.numel) * 4);
        CHECK(same == (param_group(e.name) == ParamGroup::DECODER));
    }

    // logits: without retrieval bit-identical to the base's, with retrieval different (the CCA trained)
    RetroData data((dir / "db").string(), (dir / "knn").string(), c, 0.2);
    RetroModel<float> mb(c), mf(c);
    mb.params() = wb;
    mf.params() = wf;
    RetroBatch plain, retrieved;
    data.make_batch(first_seqs(data, 4), false, plain);
    data.make_batch(first_seqs(data, 4), true, retrieved);
    mb.forward(plain);
    const std::vector<float> lb = mb.logits();
    mf.forward(plain);
    REQUIRE(mf.logits().size() == lb.size());
    CHECK(same_bytes(mf.logits().data(), lb.data(), lb.size() * sizeof(float)));
    mb.forward(retrieved);
    const std::vector<float> lbr = mb.logits();
    mf.forward(retrieved);
    CHECK_FALSE(same_bytes(mf.logits().data(), lbr.data(), lbr.size() * sizeof(float)));
    CHECK_FALSE(same_bytes(mf.logits().data(), lb.data(), lb.size() * sizeof(float)));

    // provenance: the base's weights fingerprint in the first metrics line and the manifest
    const std::string fp = fingerprint_file((dir / "base" / "model.safetensors").string());
    std::ifstream in(dir / "fit" / "metrics.jsonl");
    std::string first;
    std::getline(in, first);
    auto j = nlohmann::json::parse(first);
    CHECK(j.value("init_from_fingerprint", "") == fp);
    CHECK(j.value("train_only", "") == groups);
    auto m = manifest_read((dir / "fit").string());
    CHECK(m["parameters"]["init_from"]["fingerprint"] == fp);
    CHECK(manifest_input(m, "init_from", "fingerprint") == fp);
}
}  // namespace

TEST_CASE("retrofit: a --no-retrieval base retro-fitted with --train-only cca,encoder keeps its logits without retrieval") {
    test::TempDir dir("retrofit-run");
    check_retrofit_keeps_base(dir, test::config_path(), "cca,encoder");
}

TEST_CASE("retrofit: with the copy head (--train-only cca,encoder,copy) the logits without retrieval stay the base's") {
    test::TempDir dir("retrofit-copy");
    auto j = RetroConfig::load(test::config_path()).to_json();
    j["copy_head"] = true;
    const std::string config = (dir / "copy.json").string();
    RetroConfig::from_json(j, "test").save(config);
    check_retrofit_keeps_base(dir, config, "cca,encoder,copy");
}

TEST_CASE("retrofit: a base lacking CCA layers leaves them fresh and bad bases or groups exit 2 with one line") {
    test::TempDir dir("retrofit-bad");
    test::write_tiny_db(dir / "db", dir / "knn", 4, 16, 12, 9);
    const std::string common = "--db " + (dir / "db").string() + " --knn " + (dir / "knn").string() + " --config " +
                               test::config_path() + " --steps 2 --batch-size 2 --threads 1";
    RetroConfig c = RetroConfig::load(test::config_path());
    auto save_base = [&](const RetroConfig& bc, const std::string& name) {
        ParamLayout bl(bc);
        std::vector<float> w;
        params_init(w, bl, 2);
        params_save((dir / name).string(), w, bl, bc);
        return (dir / name).string();
    };
    // the base has CCA only in layer 3: layer 2's CCA block (8 tensors) starts fresh
    RetroConfig one = c;
    one.dec_cross_attn_layers = {3};
    auto ok = test::run_tool("retro-train", common + " --init-from " + save_base(one, "one.safetensors") + " --out " +
                                                (dir / "ok").string());
    CHECK_MESSAGE(ok.exit_code == 0, ok.err);
    CHECK(ok.err.find(std::to_string(ParamLayout(c).entries().size() - 8) + " tensors copied, 8 fresh") !=
          std::string::npos);

    // each refusal: exit 2, one line, no run folder
    int outs = 0;
    auto refused = [&](const std::string& args) {
        const fs::path out = dir / ("o" + std::to_string(++outs));
        auto r = test::run_tool("retro-train", common + " --quiet " + args + " --out " + out.string());
        INFO(args);
        INFO(r.err);
        CHECK(r.exit_code == 2);
        CHECK(one_line(r));
        CHECK_FALSE(fs::exists(out));
        return r.err;
    };
    // another decoder width: names the tensor and both shapes
    RetroConfig wide = c;
    wide.dec_dim = 32;
    const auto e1 = refused("--init-from " + save_base(wide, "wide.safetensors"));
    CHECK(e1.find("to_decoder_model_dim.weight") != std::string::npos);
    CHECK(e1.find("(32, 8)") != std::string::npos);
    CHECK(e1.find("(16, 8)") != std::string::npos);
    // a deeper decoder
    RetroConfig deep = c;
    deep.dec_depth = 4;
    CHECK(refused("--init-from " + save_base(deep, "deep.safetensors")).find("decoder.layers.3.") != std::string::npos);
    // no such base; a folder without model.safetensors
    refused("--init-from " + (dir / "nowhere").string());
    CHECK(refused("--init-from " + (dir / "db").string()).find("model.safetensors") != std::string::npos);
    // unknown group: lists the valid ones
    const auto e5 = refused("--train-only cca,bogus");
    CHECK(e5.find("bogus") != std::string::npos);
    CHECK(e5.find("cca, encoder, copy, decoder") != std::string::npos);
    // groups that read neighbours, trained without them
    refused("--train-only cca --no-retrieval");
}

TEST_CASE("retrofit: --init-from + --train-only: 10 steps straight equal kill after 7 + resume bit for bit") {
    test::TempDir dir("retrofit-resume");
    test::write_tiny_db(dir / "db", dir / "knn", 4, 16, 40, 10);
    const std::string data = "--db " + (dir / "db").string() + " --knn " + (dir / "knn").string() + " --config " +
                             test::config_path() + " --batch-size 4 --val-fraction 0.2 --val-batches 1 --quiet --threads 1";
    auto base = test::run_tool("retro-train", data + " --steps 3 --no-retrieval --out " + (dir / "base").string());
    INFO(base.err);
    REQUIRE(base.exit_code == 0);
    const std::string schedule = " --steps 10 --lr 3e-3 --warmup 2 --val-every 5 --checkpoint-every 5 --seed 2 --grad-accum 2";
    const std::string init = " --init-from " + (dir / "base").string();
    const std::string fit = data + schedule + init + " --train-only cca,encoder";
    auto a = test::run_tool("retro-train", fit + " --out " + (dir / "a").string());
    INFO(a.err);
    REQUIRE(a.exit_code == 0);
    auto b1 = test::run_tool("retro-train", fit + " --out " + (dir / "b").string() + " --stop-after 7");
    INFO(b1.err);
    REQUIRE(b1.exit_code == 0);
    CHECK_FALSE(fs::exists(dir / "b" / "model.safetensors"));
    // resuming with other groups or without the base is refused, and changes nothing
    const auto before = test::bytes(dir / "b" / "metrics.jsonl");
    auto other = test::run_tool("retro-train", data + schedule + init + " --train-only cca --resume --out " +
                                                   (dir / "b").string());
    CHECK(other.exit_code == 2);
    CHECK(one_line(other));
    auto nobase = test::run_tool("retro-train", data + schedule + " --train-only cca,encoder --resume --out " +
                                                    (dir / "b").string());
    CHECK(nobase.exit_code == 2);
    CHECK(one_line(nobase));
    CHECK(test::bytes(dir / "b" / "metrics.jsonl") == before);
    auto b2 = test::run_tool("retro-train", fit + " --out " + (dir / "b").string() + " --resume");
    INFO(b2.err);
    REQUIRE(b2.exit_code == 0);
    CHECK(test::losses(dir / "b") == test::losses(dir / "a"));
    CHECK(test::bytes(dir / "b" / "model.safetensors") == test::bytes(dir / "a" / "model.safetensors"));
    CHECK(test::bytes(dir / "b" / "checkpoints" / "step_00000010" / "optimizer.safetensors") ==
          test::bytes(dir / "a" / "checkpoints" / "step_00000010" / "optimizer.safetensors"));
}
