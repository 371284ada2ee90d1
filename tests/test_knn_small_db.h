// A small chunk database built by the real tools (tokenizer, retro-chunk) for the knn tests (test_knn*.cpp).
#pragma once
#include <cstdint>
#include <filesystem>

#include "data/chunk_db.h"
#include "test_chunk_util.h"
#include "test_util.h"

namespace retro::test {
// A small database built by the real tools: tokenizer, retro-chunk.
struct SmallDb {
    test::TempDir tmp{"knn"};
    std::filesystem::path db;
    explicit SmallDb(std::int64_t bytes = 60000, std::uint64_t seed = 1) {
        auto corpus = test::chunk_test_jsonl(tmp, "c.jsonl", bytes, 600, seed);
        db = tmp / "db";
        auto r = test::run_tool("retro-chunk", corpus.string() + " --tokenizer " + test::chunk_test_tokenizer() +
                                                   " --chunk-size 16 --seq-len 64 --out " + db.string() + " --quiet");
        REQUIRE_MESSAGE(r.exit_code == 0, r.err);
        REQUIRE(ChunkDb(db.string()).doc_count() >= 10);
    }
};
}  // namespace retro::test
