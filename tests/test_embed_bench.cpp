// retro-bench embed on the tiny golden BERT, with a shell script standing in for the Python peer (it
// counts its calls, records its arguments and reports 10, 20, 30 ... chunks/s): --rounds runs the
// peer once a round, each round's ratio is RetroKit's chunks/s over that round's peer figure, the
// reported ratio is the median of the rounds', and --peer-sorted reaches the peer as
// --sort-by-length.
#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "test_util.h"

using namespace retro;
using namespace retro::test;

namespace {

std::string fake_peer(const TempDir& dir) {
    const auto script = dir / "peer.sh";
    const std::string d = dir.path.string();
    write_text(script, "n=$(cat '" + d + "/count' 2>/dev/null || echo 0); n=$((n + 1)); echo $n > '" + d +
                           "/count'\n"
                           "echo \"$@\" >> '" + d + "/args'\n"
                           "c=$((n * 10))\n"
                           "echo '{\"impl\": \"fake peer\", \"chunks\": 6, \"tokens_per_chunk\": 14.0, \"batch\": 4, "
                           "\"max_length\": 32, \"threads\": 1, \"seconds\": 1.0, \"cpu_seconds\": 1.0, "
                           "\"tokenize_seconds\": 0.01, \"chunks_per_s\": '$c', \"chunks_per_cpu_s\": '$c'}'\n");
    return script.string();
}

}  // namespace

TEST_CASE("embed bench: --rounds alternates with the peer and reports the median of the per-round ratios") {
    const std::string model = (source_dir() / "tests/reference/golden/bert_tiny").string();
    for (int rounds : {3, 4}) {   // odd: the middle ratio; even: the mean of the two middle ones
        CAPTURE(rounds);
        TempDir dir("embed-bench");
        const std::string peer = fake_peer(dir);
        auto r = run_tool("retro-bench", "--threads 1 embed --model " + model +
                                             " --chunks 6 --tokens 12 --batch 4 --max-length 32 --repeats 1 --rounds " +
                                             std::to_string(rounds) + " --peer-sorted --python sh --peer " + peer +
                                             " --json " + (dir / "embed.json").string());
        CAPTURE(r.err);
        REQUIRE(r.exit_code == 0);
        CHECK(read_text(dir / "count") == std::to_string(rounds) + "\n");
        CHECK(read_text(dir / "args").find("--sort-by-length") != std::string::npos);
        const auto j = nlohmann::json::parse(read_text(dir / "embed.json"));
        REQUIRE(j["rounds"].size() == static_cast<std::size_t>(rounds));
        std::vector<double> ratios;
        for (int i = 0; i < rounds; ++i) {
            const auto& round = j["rounds"][i];
            CHECK(round["peer_chunks_per_s"].get<double>() == doctest::Approx(10.0 * (i + 1)));
            CHECK(round["ratio"].get<double>() == doctest::Approx(round["retrokit_chunks_per_s"].get<double>() /
                                                                  round["peer_chunks_per_s"].get<double>()));
            ratios.push_back(round["ratio"].get<double>());
        }
        std::sort(ratios.begin(), ratios.end());
        const double median = rounds % 2 ? ratios[rounds / 2] : 0.5 * (ratios[rounds / 2 - 1] + ratios[rounds / 2]);
        CHECK(j["ratio"].get<double>() == doctest::Approx(median));
        // the peer's row is its median round by chunks/s (the upper middle one for an even count)
        CHECK(j["peer"]["chunks_per_s"].get<double>() == doctest::Approx(10.0 * (rounds / 2 + 1)));
        CHECK(j["retrokit"]["chunks"] == 6);
        CHECK(r.out.find("medians of " + std::to_string(rounds) + " rounds") != std::string::npos);
    }
}

TEST_CASE("embed bench: without --peer a single run is timed and no ratio is reported") {
    TempDir dir("embed-bench-alone");
    const std::string model = (source_dir() / "tests/reference/golden/bert_tiny").string();
    auto r = run_tool("retro-bench", "--threads 1 embed --model " + model +
                                         " --chunks 5 --tokens 10 --repeats 1 --rounds 4 --json " +
                                         (dir / "embed.json").string());
    CAPTURE(r.err);
    REQUIRE(r.exit_code == 0);
    const auto j = nlohmann::json::parse(read_text(dir / "embed.json"));
    CHECK(j["retrokit"]["chunks_per_s"].get<double>() > 0);
    CHECK_FALSE(j.contains("ratio"));
    CHECK_FALSE(j.contains("rounds"));
}
