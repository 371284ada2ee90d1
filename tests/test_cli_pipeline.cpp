// Implementation of test_cli_pipeline.h.
#include "test_cli_pipeline.h"

#include <fstream>
#include <nlohmann/json.hpp>

#include "data/synthetic_text.h"
#include "model/config.h"

namespace fs = std::filesystem;

namespace retro::test {

void cli_pipeline_build(CliPipeline& p, std::uint64_t text_seed, std::int64_t max_seq_len, const std::string& train_options) {
    fs::create_directories(p.corpus);
    for (int d = 0; d < 16; d++) {
        std::string name = "d";   // (one piece at a time: GCC 12 warns about a "lit" + to_string(...) chain here)
        name += std::to_string(d);
        name += ".txt";
        write_text(p.corpus / name, synthetic_text(text_seed + static_cast<std::uint64_t>(d), 300));
    }
    auto ok = [](const RunResult& r) { REQUIRE_MESSAGE(r.exit_code == 0, r.err); };
    ok(run_tool("retro-tokenizer", "train " + p.corpus.string() + " --out " + p.tok.string() + " --vocab-size 300 --quiet"));
    ok(run_tool("retro-chunk", p.corpus.string() + " --tokenizer " + p.tok.string() + " --out " + p.db.string() +
                                   " --chunk-size 4 --seq-len 16 --quiet"));
    ok(run_tool("retro-index", p.db.string() + " --out " + p.index.string() + " --dim 16 --quiet"));
    ok(run_tool("retro-knn", p.index.string() + " --db " + p.db.string() + " --out " + p.knn.string() + " --quiet"));
    RetroConfig c = RetroConfig::load((source_dir() / "examples" / "configs" / "tiny.json").string());
    c.num_tokens = 300;
    c.max_seq_len = max_seq_len;
    c.save(p.config.string());
    ok(run_tool("retro-train", "--db " + p.db.string() + " --config " + p.config.string() + " --out " + p.run.string() +
                                   " --batch-size 2 --quiet --threads 1 " + train_options));
}

void expect_refused(const RunResult& r, std::initializer_list<std::string> says) {
    INFO("stderr: ", r.err);
    CHECK(r.exit_code == 2);
    CHECK(r.err.find('\n') == r.err.size() - 1);
    for (const auto& s : says) CHECK(r.err.find(s) != std::string::npos);
}

const CliPipeline& bad_input_pipeline() {
    static CliPipeline p("badin");
    static bool built = false;
    if (!built) cli_pipeline_build(p, 700, 16, "--knn " + p.knn.string() + " --steps 2 --checkpoint-every 1");
    built = true;
    return p;
}

std::string manifest_tool(const std::filesystem::path& dir) {
    std::ifstream f(dir / "manifest.json");
    return nlohmann::json::parse(f).value("tool", "");
}

std::string cli_train_args(const CliPipeline& p, const std::filesystem::path& out) {
    return "--db " + p.db.string() + " --knn " + p.knn.string() + " --config " + p.config.string() + " --out " +
           out.string() + " --batch-size 2 --quiet --threads 1";
}

}  // namespace retro::test
