// retro-bench chunk as a library call, on a small generated corpus: it runs and reports every field.
// RETRO_CHUNK_BENCH_MB=N makes it a real measurement (prints the table; docs/performance.md).
#include <cstdlib>

#include "bench/chunk_bench.h"
#include "test_chunk_util.h"

using namespace retro::test;

TEST_CASE("retro-chunk bench reports rates - peak RSS and the Encode loop") {
    retro::bench::ChunkBenchOptions o;
    const char* mb = std::getenv("RETRO_CHUNK_BENCH_MB");
    o.size_mb = mb ? std::atof(mb) : 2;
    if (!mb) o.tokenizer = chunk_test_tokenizer();
    if (const char* tok = std::getenv("RETRO_CHUNK_BENCH_TOKENIZER")) o.tokenizer = tok;
    if (const char* work = std::getenv("RETRO_CHUNK_BENCH_WORK")) o.work_dir = work;
    if (const char* json = std::getenv("RETRO_CHUNK_BENCH_JSON")) o.json = json;
    o.chunk_bin = tool_path("retro-chunk");
    o.threads = {1, 2};
    auto r = retro::bench::run_chunk_bench(o, "retro_tests (retro-chunk bench)");
    CHECK(r["encode_loop"]["mb_per_s"].get<double>() > 0);
    REQUIRE(r["retro_chunk"].size() == 2);
    for (const auto& run : r["retro_chunk"]) {
        CHECK(run["mb_per_s"].get<double>() > 0);
        CHECK(run["tokens_per_s"].get<double>() > 0);
        CHECK(run["peak_rss_bytes"].get<std::int64_t>() > 0);
    }
    CHECK(r["retro_chunk"][0]["tokens"] == r["retro_chunk"][1]["tokens"]);
}
