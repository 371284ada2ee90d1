// retro-bench train: the analytic FLOP count against a count driven by the parameter layout (every linear
// weight times the rows it is applied to; every attention layer's query/key pairs), the built-in demo
// config against examples/configs/demo.json, and a tiny run's JSON fields with and without a (missing) peer.
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "bench/bench_util.h"
#include "bench/train_bench.h"
#include "core/error.h"
#include "model/params.h"
#include "test_util.h"

using namespace retro;
using namespace retro::test;

namespace {

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }
bool ends_with(const std::string& s, const std::string& tail) {
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// Walks the layout: 2*rows*numel per linear weight, 4*(heads*dim_head)*pairs per attention layer.
bench::TrainFlops layout_flops(const RetroConfig& c, std::int64_t B, std::int64_t n, bool retrieval) {
    const double cs = double(c.chunk_size), l = double(n / c.chunk_size), k = double(c.num_neighbours),
                 r = double(2 * c.chunk_size), N = double(B * n), Q = double(B) * l * cs, M = double(B) * l * k,
                 R = M * r;
    bench::TrainFlops f;
    const ParamLayout layout(c);
    for (const auto& e : layout.entries()) {
        const std::string& s = e.name;
        const bool enc = s.rfind("encoder.", 0) == 0, cca = has(s, "cross_attn.");
        if ((enc || cca) && !retrieval) continue;
        if (e.shape.size() != 2 || s == "token_emb.weight" || s == "pos_emb.weight") continue;
        double rows = N;
        if (cca) rows = (has(s, "to_k.") || has(s, "to_v.")) ? R : Q;
        if (enc) rows = (has(s, ".1.fn.to_k.") || has(s, ".1.fn.to_v.")) ? M * cs : R;
        f.linear += 2 * rows * double(e.numel);
        if (!ends_with(s, "to_q.weight")) continue;
        double pairs = double(B) * double(n) * double(n);   // decoder causal self-attention, whole square
        if (cca) pairs = double(B) * l * cs * (k * r + 1);
        if (enc) pairs = has(s, ".1.fn.") ? M * r * cs : M * r * r;
        f.attention += 4 * double(e.shape[0]) * pairs;
    }
    return f;
}

RetroConfig tiny() { return RetroConfig::load((source_dir() / "examples/configs/tiny.json").string()); }

}  // namespace

TEST_CASE("train bench: analytic FLOPs equal the count over the parameter layout") {
    RetroConfig wide = tiny();   // enc_dim != dec_dim (to_decoder_model_dim), cross-attention in every encoder layer
    wide.enc_cross_attn_all = true;
    wide.enc_cross_attn_layers.clear();
    RetroConfig same = bench::train_bench_demo_config();   // enc_dim == dec_dim
    for (const RetroConfig* c : {&wide, &same})
        for (bool retrieval : {true, false})
            for (std::int64_t n : {c->max_seq_len, c->max_seq_len - 1, c->chunk_size - 1}) {
                CAPTURE(c->dec_dim);
                CAPTURE(retrieval);
                CAPTURE(n);
                const bool used = retrieval && n >= c->chunk_size;
                const auto a = bench::train_step_flops(*c, 3, n, retrieval);
                const auto b = layout_flops(*c, 3, n, used);
                CHECK(a.linear == doctest::Approx(b.linear).epsilon(1e-12));
                CHECK(a.attention == doctest::Approx(b.attention).epsilon(1e-12));
                CHECK(a.step() == doctest::Approx(3 * (b.linear + b.attention)).epsilon(1e-12));
            }
    // one figure by hand: tiny.json, B = 2, n = 16 (H*D = 256, l = 4, k = 2, r = 8, M = 16):
    // decoder self 3 * 4*256*2*16*16 + CCA 2 * 4*256*2*4*4*17 + encoder self 2 * 4*256*16*8*8 + cross 4*256*16*8*4
    CHECK(bench::train_step_flops(tiny(), 2, 16, true).attention == 5308416.0);
}

TEST_CASE("train bench: the built-in demo config is examples/configs/demo.json") {
    const auto file = RetroConfig::load((source_dir() / "examples/configs/demo.json").string());
    CHECK(bench::train_bench_demo_config().to_json() == file.to_json());
}

TEST_CASE("train bench: a tiny run reports every field and a missing peer is skipped visibly") {
    TempDir dir("train-bench");
    bench::TrainBenchOptions o;
    o.config = (source_dir() / "examples/configs/tiny.json").string();
    o.batch = 2;
    o.steps = 2;
    o.warmup = 0;
    o.threads = {1};
    o.peer = true;
    o.python = (dir / "no-such-python").string();
    o.json = (dir / "train.json").string();
    const auto r = bench::run_train_bench(o, "retro_tests (train bench)");
    REQUIRE(r["rows"].size() == 1);
    const auto& row = r["rows"][0];
    CHECK(row["impl"] == "retrokit");
    CHECK(row["threads"] == 1);
    CHECK(row["tokens_per_s"].get<double>() > 0);
    CHECK(row["gflops"].get<double>() > 0);
    CHECK(row["sgemm_gflops"].get<double>() > 0);
    CHECK(row["ratio_to_sgemm"].get<double>() > 0);
    CHECK(row["parameters"] == ParamLayout(tiny()).total());
    CHECK(std::abs(row["loss_first"].get<double>() - std::log(64.0)) < 1.0);   // about ln V at initialisation
    CHECK(r["shape"]["tokens_per_step"] == 32);
    CHECK(r["shape"]["retrieval"] == true);
    CHECK(r["flops"]["step"].get<double>() == doctest::Approx(3 * r["flops"]["forward"].get<double>()));
    // GFLOP/s is a training step's work (forward and backward: the step's FLOPs, held above to 3x the forward and
    // by the FLOP-count case to the layout's sum) over the step's seconds; ratio_to_sgemm that over the sgemm rate
    // (docs/tools.md)
    const double step_gflop = r["flops"]["step"].get<double>() / 1e9;
    CHECK(row["gflops"].get<double>() == doctest::Approx(step_gflop / row["step_seconds"].get<double>()).epsilon(1e-9));
    CHECK(row["ratio_to_sgemm"].get<double>() ==
          doctest::Approx(row["gflops"].get<double>() / row["sgemm_gflops"].get<double>()).epsilon(1e-9));
    CHECK(r["peer_skipped"].get<std::string>().find("no JSON") != std::string::npos);
    CHECK(r["ratios"].empty());
    const auto saved = nlohmann::json::parse(read_text(dir / "train.json"));
    CHECK(saved["stamp"]["tool"] == "retro-bench train");
    CHECK(saved["rows"].size() == 1);
}

TEST_CASE("train bench: --device host-backend --dtype fp32,bf16 gives one row per dtype and each one's ratio to a peer") {
    TempDir dir("train-bench-dtypes");
    // a stand-in peer (the output contract of tests/peers/rp_train.py) run by /bin/sh: 1,000 tokens/s
    write_text(dir / "peer.sh", "echo '{\"impl\": \"stand-in\", \"step_seconds\": 0.032, \"tokens_per_s\": 1000, "
                                "\"loss_first\": 4.0, \"loss_last\": 4.0}'\n");
    bench::TrainBenchOptions o;
    o.config = (source_dir() / "examples/configs/tiny.json").string();
    o.device = "host-backend";
    o.dtypes = {"fp32", "bf16"};
    o.batch = 2;
    o.steps = 1;
    o.warmup = 0;
    o.peer = true;
    o.peer_script = (dir / "peer.sh").string();
    o.python = "/bin/sh";
    const auto r = bench::run_train_bench(o, "retro_tests (train bench dtypes)");
    REQUIRE(r["rows"].size() == 4);   // fp32, bf16, then the stand-in for each of the peer's two modes
    CHECK(r["rows"][0]["dtype"] == "fp32");
    CHECK(r["rows"][1]["dtype"] == "bf16");
    CHECK(r["rows"][2]["impl"] == "stand-in");
    CHECK(r["dtypes"] == nlohmann::json::array({"fp32", "bf16"}));
    // every row's GFLOP/s is the whole training step's work (forward and backward, 3x the forward) over its
    // seconds: for the stand-in's rows a figure fixed by its 0.032 s (docs/tools.md)
    REQUIRE(r["flops"]["step"].get<double>() == doctest::Approx(3 * r["flops"]["forward"].get<double>()));
    for (const auto& row : r["rows"]) {
        CAPTURE(row.dump());
        CHECK(row["gflops"].get<double>() ==
              doctest::Approx(r["flops"]["step"].get<double>() / 1e9 / row["step_seconds"].get<double>()).epsilon(1e-9));
    }
    CHECK(r["rows"][2]["gflops"].get<double>() == doctest::Approx(r["flops"]["step"].get<double>() / 0.032e9).epsilon(1e-9));
    REQUIRE(r["ratios"].size() == 4);   // each peer row against each RetroKit row
    for (const auto& ratio : r["ratios"]) {
        const auto& ours = ratio["retrokit"] == r["rows"][0]["impl"] ? r["rows"][0] : r["rows"][1];
        CHECK(ratio["tokens_per_s"].get<double>() == doctest::Approx(ours["tokens_per_s"].get<double>() / 1000));
    }
    // the CPU path has no bf16
    o.device = "cpu";
    o.peer = false;
    CHECK_THROWS_AS(bench::run_train_bench(o, "retro_tests"), UserError);
}

TEST_CASE("bench json: the envelope's stamp keeps the stamp fields a subcommand wrote at its top level") {
    // retro-bench chunk, knn and retention write their own stamp at the top level, dated when they started; the
    // envelope's "stamp" repeats those, not a second date or command of its own (a mutant that made them anew survived:
    // the two stamps of one file could name different seconds)
    TempDir dir("bench-envelope");
    const nlohmann::json result = {{"tool", "retro-bench knn"}, {"date", "2001-02-03T04:05:06Z"}, {"command", "retro-bench knn --n 8"},
                                   {"rows", nlohmann::json::array()}};
    bench::bench_json_write((dir / "a.json").string(), result, "retro-bench other", "retro-bench other --x");
    const auto j = nlohmann::json::parse(read_text(dir / "a.json"));
    CHECK(j["stamp"]["tool"] == "retro-bench knn");
    CHECK(j["stamp"]["date"] == "2001-02-03T04:05:06Z");
    CHECK(j["stamp"]["command"] == "retro-bench knn --n 8");
    CHECK(j["stamp"]["version"] == bench::stamp("x", "y")["version"]);   // (the fields it did not write: the build's)
    CHECK(j["date"] == "2001-02-03T04:05:06Z");                          // its own keys as they were
    // a subcommand without them: the envelope's own
    bench::bench_json_write((dir / "b.json").string(), {{"rows", nlohmann::json::array()}}, "retro-bench train", "retro-bench train --x");
    const auto k = nlohmann::json::parse(read_text(dir / "b.json"));
    CHECK(k["stamp"]["tool"] == "retro-bench train");
    CHECK(k["stamp"]["command"] == "retro-bench train --x");
}
