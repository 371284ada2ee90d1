// Implementation of test_chunk_util.h.
#include "test_chunk_util.h"

#include "core/manifest.h"
#include "data/synthetic_text.h"
#include "text/corpus.h"
#include "text/tokenizer.h"

namespace fs = std::filesystem;

namespace retro::test {

const std::string& chunk_test_tokenizer() {
    static TempDir dir("chunk-tok");
    static const std::string path = [] {
        fs::path corpus = dir / "train.jsonl";
        synthetic_jsonl_write(corpus.string(), 99, 300'000, 400);
        TokenizerTrainOptions opts;
        opts.vocab_size = 400;
        opts.byte_fallback = true;
        CorpusOptions co;
        auto r = tokenizer_train({{corpus.string(), true}}, co, opts);
        std::string p = (dir / "tok.model").string();
        write_text(p, r.model_bytes);
        return p;
    }();
    return path;
}

fs::path chunk_test_jsonl(const TempDir& dir, const std::string& name, std::int64_t bytes, std::int64_t mean_doc,
                          std::uint64_t seed) {
    fs::path p = dir / name;
    synthetic_jsonl_write(p.string(), seed, bytes, mean_doc);
    return p;
}

fs::path chunk_test_db(const TempDir& dir, std::uint64_t seed) {
    const fs::path corpus = chunk_test_jsonl(dir, "c.jsonl", 3000, 300, seed), db = dir / "db";
    const RunResult r = run_tool("retro-chunk", corpus.string() + " --tokenizer " + chunk_test_tokenizer() +
                                                    " --chunk-size 16 --seq-len 64 --out " + db.string() + " --quiet");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    return db;
}

const std::vector<std::string>& chunk_output_names() {
    static const std::vector<std::string> names{"chunks.npy", "doc_ids.npy", "doc_offsets.npy", "seq_starts.npy",
                                                "sources.jsonl"};
    return names;
}

void chunk_check_same_bytes(const fs::path& a, const fs::path& b) {
    for (const auto& n : chunk_output_names()) {
        INFO("file " << n << " of " << a << " vs " << b);
        REQUIRE(fs::exists(a / n));
        REQUIRE(fs::exists(b / n));
        CHECK(read_text(a / n) == read_text(b / n));
    }
    CHECK(folder_fingerprint(manifest_read(a.string())) == folder_fingerprint(manifest_read(b.string())));
}

void chunk_check_nothing_complete(const fs::path& dir) {
    CHECK_FALSE(fs::exists(dir / "manifest.json"));
    for (const auto& n : chunk_output_names()) {
        INFO(n);
        CHECK_FALSE(fs::exists(dir / n));
    }
}

int line_count(const std::string& s) {
    int n = 0;
    for (char c : s) n += c == '\n';
    return n;
}

}  // namespace retro::test
