// Issue 16 item 6: every option that sizes memory is checked against the data and the machine
// before anything is allocated: IVF lists, PQ codes, HNSW M, batch sizes (retro-train, retro-train
// eval, retro-generate), vocabulary size, block sizes (retro-index, retro-knn, retro-chunk), and
// retro-bench knn's --n. Each absurd value ends in exit 2, one stderr line naming the option, and no
// output folder that looks complete (no manifest.json). RETRO_MEMORY_LIMIT caps what the tools
// believe is available, so the refusals that depend on the machine are tested deterministically.
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>

#include "core/error.h"
#include "core/memory_budget.h"
#include "embed/bert_embedder.h"
#include "embed/clip_embedder.h"
#include "embed/t5_embedder.h"
#include "model/config.h"
#include "model/params.h"
#include "test_cli_pipeline.h"
#include "test_util.h"
#include "train/train_memory.h"

using namespace retro;
namespace fs = std::filesystem;

namespace {

using Pipeline = test::CliPipeline;

// the pipeline's run: 1 step without retrieval
const Pipeline& pipeline() {
    static Pipeline p("bomb");
    static bool built = false;
    if (!built) test::cli_pipeline_build(p, 500, 32, "--no-retrieval --steps 1");
    built = true;
    return p;
}

// RETRO_MEMORY_LIMIT for the tools started while it lives
struct MemoryLimit : test::ScopedEnv {
    explicit MemoryLimit(const char* bytes) : test::ScopedEnv("RETRO_MEMORY_LIMIT", bytes) {}
};

// exit 2, one line naming `option`, no manifest.json in `out` (when given)
void expect_refused(const test::RunResult& r, const std::string& option, const fs::path& out = {},
                    const std::string& says = "") {
    INFO("stderr: ", r.err);
    CHECK(r.exit_code == 2);
    CHECK(r.err.find('\n') == r.err.size() - 1);
    CHECK(r.err.find(option) != std::string::npos);
    if (!says.empty()) CHECK(r.err.find(says) != std::string::npos);
    if (!out.empty()) CHECK(!fs::exists(out / "manifest.json"));
}

}  // namespace

TEST_CASE("memory: index sizes (IVF lists, PQ codes, HNSW M) are refused before FAISS allocates") {
    const Pipeline& p = pipeline();
    const fs::path out = p.tmp / "idx-bomb";
    const std::string base = p.db.string() + " --out " + out.string() + " --dim 16 --force --index ";
    expect_refused(test::run_tool("retro-index", base + "HNSW100000000"), "--index", out, "HNSW M must be between 2 and 4,096");
    expect_refused(test::run_tool("retro-index", base + "IVF4,PQ8x24"), "--index", out, "24 bits are not supported");
    expect_refused(test::run_tool("retro-index", base + "IVF4,PQ7"), "--index", out, "divisible by 7");
    // sizes of 0, NSG graphs and a PCA beyond the dimension: FAISS segfaulted, asserted, divided by zero, never
    // finished or failed after every chunk was embedded; refused before any output now
    for (const char* factory : {"HNSW0", "IVF16_HNSW0,Flat", "PCAR0,Flat", "IVF0,Flat", "RR0,Flat", "PQ8x0"}) {
        CAPTURE(factory);
        expect_refused(test::run_tool("retro-index", base + factory), "--index", out, "has a size of 0");
        CHECK_FALSE(fs::exists(out / "state.json"));
    }
    for (const char* factory : {"NSG4", "IVF64_NSG32,Flat"}) {
        CAPTURE(factory);
        expect_refused(test::run_tool("retro-index", base + factory), "--index", out, "NSG graphs are not supported");
    }
    expect_refused(test::run_tool("retro-index", base + "PCA64,Flat"), "--index", out, "a PCA to 64 dimensions, but the vectors have 16");
    CHECK_FALSE(fs::exists(out / "state.json"));
    {   // sizes FAISS accepts, on a machine too small for them
        MemoryLimit limit("100000");   // 100 kB
        expect_refused(test::run_tool("retro-index", base + "HNSW4000"), "--index", out, "of memory available");
        expect_refused(test::run_tool("retro-index", base + "IVF8,Flat"), "--index", out, "of memory available");
    }
    {   // an uncompressed index is its vectors (1,106 x 16 floats: 69 KiB): the dimension is named (--dim 10000000
        // blamed --index)
        MemoryLimit limit("50000");
        expect_refused(test::run_tool("retro-index", base + "Flat"), "--dim: 'Flat' over", out, "a smaller --dim");
    }
    {   // a --block beyond the database is sized as the database's 1,106 chunks (124 kB), where it was refused as
        // "a block of 1,000,000 chunks" (112 MB)
        MemoryLimit limit("10000000");
        const auto capped = test::run_tool("retro-index", base + "Flat --block 1000000 --quiet");
        CHECK_MESSAGE(capped.exit_code == 0, capped.err);
    }
    // nlist beyond the data is fitted (Megatron-LM #699), never allocated as asked
    auto r = test::run_tool("retro-index", base + "IVF999999999,Flat");
    INFO(r.err);
    CHECK(r.exit_code == 0);
    CHECK(r.err.find("lowered nlist from 999999999") != std::string::npos);
}

TEST_CASE("memory: retro-knn blocks and neighbours") {
    const Pipeline& p = pipeline();
    const fs::path out = p.tmp / "knn-bomb";
    const std::string base = p.index.string() + " --db " + p.db.string() + " --out " + out.string() + " --force ";
    // a block is at most the queries there are (session 54: --block 300000000 over 4,740 chunks was refused for 78 GiB):
    // a huge --block over a small database is one block, and a huge k is the k's fault
    const test::RunResult wide = test::run_tool("retro-knn", p.index.string() + " --db " + p.db.string() + " --out " +
                                                                 (p.tmp / "knn-wide").string() + " --force --block 100000000000000 --quiet");
    CHECK_MESSAGE(wide.exit_code == 0, wide.err);
    expect_refused(test::run_tool("retro-knn", base + "--neighbours 1000000000"), "--neighbours", out);
    MemoryLimit limit("2000");
    expect_refused(test::run_tool("retro-knn", base + "--neighbours 8 --block 64"), "--neighbours", out);   // the self-join's lists
}

TEST_CASE("memory: batch sizes of retro-train, retro-train eval, retro-generate") {
    const Pipeline& p = pipeline();
    const fs::path out = p.tmp / "train-bomb";
    expect_refused(test::run_tool("retro-train", "--db " + p.db.string() + " --no-retrieval --config " + p.config.string() +
                                                     " --out " + out.string() + " --steps 1 --batch-size 10000000000"),
                   "--batch-size", out);
    CHECK(!fs::exists(out / "config.json"));   // refused before the run folder was made
    expect_refused(test::run_tool("retro-train", "eval --run " + p.run.string() + " --db " + p.db.string() + " --batch-size 10000000000"),
                   "--batch-size");
    // retro-generate decodes no more sequences at once than it has prompts: a huge --batch-size allocates nothing
    const auto g = test::run_tool("retro-generate", p.run.string() + " --db " + p.db.string() +
                                                        " --no-retrieval --batch-size 10000000000 hello");
    CHECK_MESSAGE(g.exit_code == 0, g.err);
    {   // a vocabulary of a billion tokens: the embedding table alone does not fit
        RetroConfig c = RetroConfig::load(p.config.string());
        c.num_tokens = 1'000'000'000;
        const fs::path big = p.tmp / "big.json";
        c.save(big.string());
        expect_refused(test::run_tool("retro-train", "--db " + p.db.string() + " --no-retrieval --config " + big.string() +
                                                         " --out " + out.string() + " --steps 1"),
                       "--batch-size", out, "smaller model config");
    }
}

TEST_CASE("memory: under a ulimit -v a tool trains what fits and refuses what does not, and never spins") {
    // OpenBLAS maps 128 MiB for each of its threads as it starts, and each of ours on its first GEMM, retrying a
    // refused map for ever: under `ulimit -v` tools spun at 100 % CPU and never exited (a helper's docs check, session
    // 60). Both runs are killed at 120 s, so a spin fails the test rather than hanging it.
    // On a machine of many cores OpenBLAS's load-time constructor starts a thread a core before main runs, and under
    // these limits their buffers fail there (it raises SIGINT): OPENBLAS_NUM_THREADS is set beforehand, as docs/tools.md
    // says to. On a few cores (CI's two) the tool cuts them itself (reexec_for_address_limit).
    if (test::kAddressSanitizer) RETRO_SKIP("AddressSanitizer's shadow memory cannot be reserved under ulimit -v");
    const Pipeline& p = pipeline();
    const fs::path fits = p.tmp / "ulimit-fits", refused = p.tmp / "ulimit-refused";
    const std::string blas_threads = std::thread::hardware_concurrency() > 4 ? "OPENBLAS_NUM_THREADS=2 " : "";
    const std::string train = blas_threads + "timeout -s KILL 120 " + test::tool_path("retro-train") + " --db " + p.db.string() +
                              " --no-retrieval --config " + p.config.string() + " --steps 2 --threads 2 --quiet --out ";
    // 1.2 GB: the pipeline's small model trains
    const auto ok = test::run_command("ulimit -v 1200000 && " + train + fits.string());
    CHECK_MESSAGE(ok.exit_code == 0, ok.err);
    CHECK(fs::exists(fits / "manifest.json"));
    // 400 MB: OpenBLAS's threads are cut to what the limit affords, and a model past what is left is refused at once
    // (a vocabulary of 300,000: a few hundred MB, which the machine has)
    RetroConfig c = RetroConfig::load(p.config.string());
    c.num_tokens = 300'000;
    const fs::path wide = p.tmp / "wide-vocab.json";
    c.save(wide.string());
    const auto no = test::run_command("ulimit -v 400000 && " + train + refused.string() + " --config " + wide.string());
    expect_refused(no, "--batch-size", refused, "the address-space limit, ulimit -v");
}

TEST_CASE("memory: vocabulary size, chunking blocks, retro-bench knn") {
    const Pipeline& p = pipeline();
    const fs::path out = p.tmp / "misc-bomb";
    expect_refused(test::run_tool("retro-tokenizer", "train " + p.corpus.string() + " --out " + out.string() + " --vocab-size 2000000000"),
                   "--vocab-size", out);
    expect_refused(test::run_tool("retro-chunk", p.corpus.string() + " --tokenizer " + p.tok.string() + " --out " + out.string() +
                                                     " --chunk-size 4 --seq-len 16 --block-bytes 1000000000000000"),
                   "--block-bytes", out);
    {   // more threads than the machine has: blamed on --threads (it named --block-bytes: a helper's pass, session 54)
        MemoryLimit limit("1000000000");
        expect_refused(test::run_tool("retro-chunk", p.corpus.string() + " --tokenizer " + p.tok.string() + " --out " + out.string() +
                                                         " --chunk-size 4 --seq-len 16 --threads 4000"),
                       "--threads", out, "fewer --threads (this machine has ");
    }
    expect_refused(test::run_tool("retro-bench", "knn --n 1000000000000 --dim 256"), "--n");
    {   // retro-bench generate counts the model's weights (a 1B config's 4.5 GB; before: only the prefill's scores,
        // and the bench ran to a 9.5 GB peak or ended in std::bad_alloc)
        MemoryLimit limit("3000000000");
        expect_refused(test::run_tool("retro-bench", "generate --config " +
                                                         (test::source_dir() / "examples" / "configs" / "retro-1b.json").string() +
                                                         " --prompt 8 --output 1 --threads 1"),
                       "--prompt", {}, "the weights");
    }
}

TEST_CASE("memory: the training estimate counts 4 floats per parameter and grows with the batch") {
    const RetroConfig c = RetroConfig::load((test::source_dir() / "examples" / "configs" / "tiny.json").string());
    const double P = static_cast<double>(ParamLayout(c).total());
    const double one = train_memory_bytes(c, 1, 32, true), two = train_memory_bytes(c, 2, 32, true);
    CHECK(one > 16 * P);
    CHECK(two - one == doctest::Approx(one - 16 * P));   // activations are linear in the batch
    CHECK(train_memory_bytes(c, 1, 32, false) < one);     // no encoder, no CCA
    CHECK(memory_format_bytes(1536.0 * 1024 * 1024) == "1.5 GiB");
    CHECK(memory_format_bytes(17) == "17 B");
}

TEST_CASE("memory: the bert embedder's --batch and --max-length") {
    // a forward's activations (batch x max_length rows, each thread's score matrix) are checked before the first batch
    BertEmbedderOptions o;
    o.model_dir = (test::source_dir() / "tests/reference/golden/modernbert_tiny").string();
    o.max_length = 512;   // the tiny model's positions
    o.batch = 100000;
    MemoryLimit limit("100000000");
    try {
        BertEmbedder e(o, nullptr);
        FAIL("an encoder forward far beyond the memory limit was accepted");
    } catch (const UserError& err) {
        const std::string msg = err.what();
        CHECK(msg.find("--batch and --max-length: a forward pass over ") == 0);
        CHECK(msg.find("--batch 100000 texts of --max-length 512 tokens") != std::string::npos);
        CHECK(msg.find('\n') == std::string::npos);
    }
    o.max_length = 128;
    o.batch = 64;
    CHECK_NOTHROW(BertEmbedder(o, nullptr));
}

TEST_CASE("memory: the t5 embedder's --batch and --max-length") {
    // T5's relative positions take any length: a forward far beyond the memory is refused before the first batch
    T5EmbedderOptions o;
    o.model_dir = (test::source_dir() / "tests/reference/golden/t5_tiny/v1_1").string();
    o.max_length = 100000;
    o.batch = 64;
    MemoryLimit limit("100000000");
    try {
        T5Embedder e(o, nullptr);
        FAIL("an encoder forward far beyond the memory limit was accepted");
    } catch (const UserError& err) {
        const std::string msg = err.what();
        CHECK(msg.find("--batch and --max-length: a forward pass over ") == 0);
        CHECK(msg.find("--batch 64 texts of --max-length 100000 tokens") != std::string::npos);
        CHECK(msg.find('\n') == std::string::npos);
    }
    o.max_length = 128;
    CHECK_NOTHROW(T5Embedder(o, nullptr));
}

TEST_CASE("memory: the clip embedder's --batch") {
    // the larger tower's activations for --batch texts or images, checked when the embedder is made
    ClipEmbedderOptions o{(test::source_dir() / "tests/reference/golden/clip_tiny/tiny").string(), 77, 10000000};
    MemoryLimit limit("100000000");
    try {
        ClipEmbedder e(o, nullptr);
        FAIL("a clip forward far beyond the memory limit was accepted");
    } catch (const UserError& err) {
        const std::string msg = err.what();
        CHECK(msg.find("--batch: a forward pass over --batch 10000000 texts or images needs about ") == 0);
    }
    o.batch = 32;
    CHECK_NOTHROW(ClipEmbedder(o, nullptr));
}
