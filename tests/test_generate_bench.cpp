// retro-bench generate as a library call on the demo config at tiny lengths (host backend, no peer): every row's
// figures, and the memory bound of a decode step (the weights' bytes over the copy bandwidth measured in the run)
// with each row's ratio to it (issue 21's "within 2x of the weights' bytes over the bandwidth"), and with
// --cuda-graphs each prompt again with graphs beside (the same tokens).
#include <doctest/doctest.h>

#include <cmath>

#include <nlohmann/json.hpp>

#include "bench/generate_bench.h"
#include "core/error.h"
#include "model/config.h"
#include "model/params.h"
#include "test_train_fixtures.h"
#include "test_util.h"

using namespace retro;

TEST_CASE("bench generate: rows, the memory bound of a decode step and each row's ratio to it") {
    test::TempDir dir("generate-bench");
    bench::GenerateBenchOptions o;
    o.config = test::config_path();
    o.prompts = {8, 16};
    o.output = 8;
    o.peer_steps = 0;
    o.device = "host-backend";
    o.cuda_graphs = true;   // each prompt again with graphs (the host backend's recorder): the same tokens
    o.json = (dir / "g.json").string();
    bench::run_generate_bench(o, "test");
    const auto j = nlohmann::json::parse(test::read_text(dir / "g.json"));
    RetroConfig c = RetroConfig::load(test::config_path());
    c.max_seq_len = 16 + 8;   // the bench sizes the positions for the longest prompt + the output
    CHECK(j["weight_bytes"].get<double>() == doctest::Approx(4.0 * double(ParamLayout(c).total())));
    const double gbps = j["copy_gbps"].get<double>(), bound = j["memory_bound_ms_per_token"].get<double>();
    REQUIRE(gbps > 0);
    CHECK(bound == doctest::Approx(1e3 * j["weight_bytes"].get<double>() / (gbps * 1e9)));
    REQUIRE(j["results"].size() == 2);
    for (const auto& r : j["results"]) {
        const double ms = r["decode_ms_per_token"].get<double>();
        CHECK(ms > 0);
        CHECK(r["of_memory_bound"].get<double>() == doctest::Approx(ms / bound));
        CHECK(r["tokens_per_s"].get<double>() > 0);
        CHECK(r["graph_decode_ms_per_token"].get<double>() > 0);
        CHECK(r["graph_same_tokens"].get<bool>());
    }
    o.device = "cpu";   // graphs run the GPU decoder only
    CHECK_THROWS_AS(bench::run_generate_bench(o, "test"), UserError);
}

TEST_CASE("bench generate: --batch decodes several sequences together, with graphs the same tokens, and the peer refused") {
    test::TempDir dir("generate-bench-batch");
    bench::GenerateBenchOptions o;
    o.config = test::config_path();
    o.prompts = {8};
    o.output = 12;   // across a chunk boundary of the demo config: the encoder runs mid-decode for every sequence
    o.batch = 3;
    o.peer_steps = 0;
    o.device = "host-backend";
    o.cuda_graphs = true;
    o.json = (dir / "b.json").string();
    bench::run_generate_bench(o, "test");
    const auto j = nlohmann::json::parse(test::read_text(dir / "b.json"));
    REQUIRE(j["results"].size() == 1);
    const auto& r = j["results"][0];
    CHECK(r["batch"].get<std::int64_t>() == 3);
    CHECK(r["graph_same_tokens"].get<bool>());   // 3 rows a step through the captured graph, against eager steps
    // tokens/s counts every sequence's tokens: 3 x 12 over the prefill and the decode
    const double seconds = (r["prefill_ms"].get<double>() + 12 * r["decode_ms_per_token"].get<double>()) / 1e3;
    CHECK(r["tokens_per_s"].get<double>() == doctest::Approx(36.0 / seconds).epsilon(0.05));
    o.batch = 0;
    CHECK_THROWS_AS(bench::run_generate_bench(o, "test"), UserError);
    o.batch = 2;
    o.peer_steps = 4;
    o.peer = "tests/peers/rp_generate.py";   // one sequence: refused before anything runs
    CHECK_THROWS_AS(bench::run_generate_bench(o, "test"), UserError);
}
