// Bad input found by the CLI audit of 2026-11-29 (session 33) and the passes since: each case once crashed, lost
// data, mixed two tools' outputs or finished "successfully" with a broken result. Now each ends in exit 2 and one
// stderr line naming the file or option, with the inputs intact and no output folder that looks complete. This file:
// what every tool shares (output folders and files, usage errors, names, help); the tools' own cases are in
// test_bad_input_{train,bench,generate}.cpp, killed runs in test_killed_runs.cpp.
#include <sys/stat.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/npy.h"
#include "core/output_folder.h"
#include "core/shell_quote.h"
#include "test_cli_pipeline.h"
#include "test_util.h"

using namespace retro;
namespace fs = std::filesystem;

namespace {

using Pipeline = test::CliPipeline;
using test::copy_folder;
using test::expect_refused;
using test::manifest_tool;
const auto& train_args = test::cli_train_args;
const auto& pipeline = test::bad_input_pipeline;   // (the pipeline's run: 2 steps with retrieval, a checkpoint at each)

}  // namespace

TEST_CASE("bad input: --out that is an input, or another tool's folder, is refused before anything is written or deleted") {
    const Pipeline& p = pipeline();
    test::TempDir t("badout");
    const fs::path db = t / "db", index = t / "index", run = t / "run";
    copy_folder(p.db, db);
    copy_folder(p.index, index);
    copy_folder(p.run, run);

    // --force over an input used to empty it first, then fail reading it
    expect_refused(test::run_tool("retro-index", db.string() + " --out " + db.string() + " --force --dim 16 --quiet"),
                   {db.string(), "is also an input"});
    CHECK(fs::exists(db / "chunks.npy"));
    expect_refused(test::run_tool("retro-knn", index.string() + " --db " + db.string() + " --out " + index.string() +
                                                   " --force --quiet"),
                   {index.string(), "is also an input"});
    CHECK(fs::exists(index / "index.faiss"));
    // --force over a folder that holds an input (which it would delete with the rest)
    const fs::path outer = t / "outer";
    fs::create_directories(outer / "old");
    copy_folder(p.db, outer / "db");
    expect_refused(test::run_tool("retro-index", (outer / "db").string() + " --out " + outer.string() + " --force --dim 16 --quiet"),
                   {outer.string(), "which --force would delete"});
    CHECK(fs::exists(outer / "db" / "chunks.npy"));

    // another tool's complete folder is neither written into nor cleared, with or without --force
    expect_refused(test::run_tool("retro-tokenizer", "train " + p.corpus.string() + " --out " + db.string() +
                                                         " --vocab-size 300 --quiet"),
                   {db.string(), "holds retro-chunk's output"});
    CHECK(manifest_tool(db) == "retro-chunk");
    CHECK(!fs::exists(db / "tok.model"));
    expect_refused(test::run_tool("retro-train", train_args(p, index) + " --steps 1 --force"),
                   {index.string(), "holds retro-index's output"});
    CHECK(manifest_tool(index) == "retro-index");
    CHECK(!fs::exists(index / "model.safetensors"));
    expect_refused(test::run_tool("retro-index", p.db.string() + " --out " + run.string() + " --force --dim 16 --quiet"),
                   {run.string(), "holds retro-train's output"});
    CHECK(fs::exists(run / "model.safetensors"));
    expect_refused(test::run_tool("retro-chunk", p.corpus.string() + " --tokenizer " + p.tok.string() + " --out " +
                                                     index.string() + " --chunk-size 4 --seq-len 16 --force --quiet"),
                   {index.string(), "holds retro-index's output"});
    CHECK(manifest_tool(index) == "retro-index");

    // and a reader takes only a database retro-chunk made
    expect_refused(test::run_tool("retro-index", index.string() + " --out " + (t / "ix2").string() + " --dim 8 --quiet"),
                   {"was written by retro-index, not retro-chunk"});
    // retro-generate with --db and --index swapped: the same words, one path separator, and the fix
    expect_refused(test::run_tool("retro-generate", run.string() + " --index " + p.db.string() + " --db " + index.string() +
                                                        " --max-tokens 2 --quiet hello"),
                   {(index / "manifest.json").string() + ": was written by retro-index, not retro-chunk", "--db"});

    // the same tool's folder is still replaced by --force
    const test::RunResult again =
        test::run_tool("retro-index", p.db.string() + " --out " + index.string() + " --force --dim 8 --quiet");
    CHECK_MESSAGE(again.exit_code == 0, again.err);
}

TEST_CASE("bad input: retro-chunk --resume over a complete database made from other inputs is refused") {
    const Pipeline& p = pipeline();
    test::TempDir t("badchunk");
    const fs::path one = t / "one", db = t / "db";
    fs::create_directories(one);
    test::write_text(one / "a.txt", "hello there, a tiny corpus of one document\n");
    REQUIRE(test::run_tool("retro-chunk", one.string() + " --tokenizer " + p.tok.string() + " --out " + db.string() +
                                              " --chunk-size 4 --seq-len 16 --quiet")
                .exit_code == 0);
    expect_refused(test::run_tool("retro-chunk", p.corpus.string() + " --tokenizer " + p.tok.string() + " --out " +
                                                     db.string() + " --chunk-size 4 --seq-len 16 --resume --quiet"),
                   {db.string(), "other inputs", "corpus file 1 is "});
    // another parameter: the refusal names it and both values
    expect_refused(test::run_tool("retro-chunk", one.string() + " --tokenizer " + p.tok.string() + " --out " + db.string() +
                                                     " --chunk-size 4 --seq-len 16 --block-docs 64 --resume --quiet"),
                   {"parameters.block_docs is 64, the folder's "});
    // the same command again: nothing to do, exit 0
    const test::RunResult same = test::run_tool("retro-chunk", one.string() + " --tokenizer " + p.tok.string() + " --out " +
                                                                   db.string() + " --chunk-size 4 --seq-len 16 --resume --quiet");
    CHECK_MESSAGE(same.exit_code == 0, same.err);
    // a corpus file changed since (same path): named, not "already complete" (its size is compared, not its bytes)
    test::write_text(one / "a.txt", "hello there, a tiny corpus of one document, and a line added later\n");
    expect_refused(test::run_tool("retro-chunk", one.string() + " --tokenizer " + p.tok.string() + " --out " + db.string() +
                                                     " --chunk-size 4 --seq-len 16 --resume --quiet"),
                   {"corpus file " + fs::absolute(one / "a.txt").lexically_normal().string() +
                    " has changed since the database was made"});
    test::write_text(one / "a.txt", "hello there, a tiny corpus of one document\n");
    // ... and one of the same size with other bytes: its time moved, so it is hashed again (it passed as complete)
    test::write_text(one / "a.txt", "HELLO there, a tiny corpus of one document\n");
    expect_refused(test::run_tool("retro-chunk", one.string() + " --tokenizer " + p.tok.string() + " --out " + db.string() +
                                                     " --chunk-size 4 --seq-len 16 --resume --quiet"),
                   {"has changed since the database was made (the same size, other bytes)"});
    test::write_text(one / "a.txt", "hello there, a tiny corpus of one document\n");   // (its bytes back, its time not: the same)
    const test::RunResult back = test::run_tool("retro-chunk", one.string() + " --tokenizer " + p.tok.string() + " --out " +
                                                                   db.string() + " --chunk-size 4 --seq-len 16 --resume --quiet");
    CHECK_MESSAGE(back.exit_code == 0, back.err);
    // the same tokenizer path with other bytes (retrained): "has changed", not "is not the one it was made with (itself)"
    const fs::path tok = t / "tok";
    copy_folder(p.tok, tok);
    REQUIRE(test::run_tool("retro-chunk", one.string() + " --tokenizer " + tok.string() + " --out " + (t / "db2").string() +
                                              " --chunk-size 4 --seq-len 16 --quiet")
                .exit_code == 0);
    REQUIRE(test::run_tool("retro-tokenizer", "train " + p.corpus.string() + " " + one.string() + " --out " +
                                                  tok.string() + " --vocab-size 300 --force --quiet")
                .exit_code == 0);   // retrained over it (another corpus, the same vocabulary size)
    expect_refused(test::run_tool("retro-chunk", one.string() + " --tokenizer " + tok.string() + " --out " + (t / "db2").string() +
                                                     " --chunk-size 4 --seq-len 16 --resume --quiet"),
                   {"the tokenizer " + (tok / "tok.model").string() + " has changed since the database was made"});
}

TEST_CASE("bad input: a command whose data goes to a closed standard output is refused, not exit 0 with the data lost") {
    // a new user's pass (session 54): the ids, the report, the hits went to the /dev/null put in place of the closed
    // stream, exit 0 (retro-generate alone refused)
    const Pipeline& p = pipeline();
    const auto closed = [](const std::string& tool, const std::string& args) {
        return test::run_command("sh -c " + shell_quote("echo hello | " + test::tool_path(tool) + " " + args + " >&-"));
    };
    expect_refused(closed("retro-tokenizer", "encode --model " + p.tok.string()), {"standard output: is closed: the ids would go nowhere"});
    expect_refused(closed("retro-tokenizer", "decode --model " + p.tok.string()), {"standard output: is closed: the text would go nowhere"});
    expect_refused(closed("retro-chunk", "inspect " + p.db.string()), {"standard output: is closed: the report would go nowhere"});
    expect_refused(closed("retro-index", "query " + p.index.string() + " hello"), {"standard output: is closed: the hits"});
    expect_refused(closed("retro-knn", "show " + p.knn.string() + " --db " + p.db.string() + " --chunk 0"),
                   {"standard output: is closed: the neighbours"});
    expect_refused(closed("retro-train", "eval --run " + p.run.string() + " --db " + p.db.string() + " --knn " + p.knn.string()),
                   {"standard output: is closed: the report"});
    expect_refused(closed("retro-bench", "ops --list"), {"standard output: is closed: the table"});
    expect_refused(closed("retro-bench", "retention --T 32 --B 1 --H 1 --repeats 1 --modes chunkwise"),
                   {"standard output: is closed: the table"});
    expect_refused(closed("retro-bench", "ops --list --json -"), {"standard output: is closed: the JSON"});
    // the report written to a file as well: a closed standard output is no loss
    test::TempDir t("closed-out");
    const test::RunResult kept = closed("retro-train", "eval --run " + p.run.string() + " --db " + p.db.string() + " --knn " +
                                                           p.knn.string() + " --json-out " + (t / "e.json").string() + " --quiet");
    CHECK_MESSAGE(kept.exit_code == 0, kept.err);
    CHECK(fs::exists(t / "e.json"));
}

TEST_CASE("bad input: a model config of absurd size is refused in one line before anything is allocated") {
    const Pipeline& p = pipeline();
    test::TempDir t("badcfg");
    for (const auto& [key, value] : std::vector<std::pair<std::string, std::int64_t>>{
             {"dec_depth", 10'000'000}, {"enc_depth", 5000}, {"dec_dim", 1'000'000'000'000}, {"heads", 100'000}}) {
        CAPTURE(key);
        nlohmann::json c = nlohmann::json::parse(test::read_text(p.config));
        c[key] = value;
        if (key == "dec_depth") c["dec_cross_attn_layers"] = {2};
        const fs::path cfg = t / (key + ".json");
        test::write_text(cfg, c.dump());
        const fs::path r = t / ("r_" + key);
        expect_refused(test::run_tool("retro-train", "--db " + p.db.string() + " --knn " + p.knn.string() + " --config " +
                                                         cfg.string() + " --out " + r.string() + " --steps 1 --quiet"),
                       {cfg.string(), key, "at most"});
    }
}

TEST_CASE("bad input: usage errors are one line, and retro-bench refuses sizes of zero") {
    const Pipeline& p = pipeline();
    expect_refused(test::run_tool("retro-tokenizer", "train x --out y --vocab-size NaN"), {"retro-tokenizer: error:", "--vocab-size"});
    expect_refused(test::run_tool("retro-knn", "merge --out m"), {"retro-knn: error:", "shards"});
    expect_refused(test::run_tool("retro-train", "--db a --config b --out c --retrieval-lr-scale 0"),
                   {"--retrieval-lr-scale", "0 is not a positive number"});
    // a value given to a flag that takes none (it was ignored: --fused-attention=false turned fused attention on)
    expect_refused(test::run_tool("retro-train", "--db a --config b --out c --fused-attention=false"), {"--fused-attention takes no value"});
    expect_refused(test::run_tool("retro-generate", "run hello --no-verify=false"), {"--no-verify takes no value"});
    // a real number in hex (trained at 16), or too small for a double (read as 0: --clip 1e-400 turned clipping off)
    expect_refused(test::run_tool("retro-train", "--db a --config b --out c --lr 0x10"), {"--lr: value 0x10 is not a decimal number"});
    expect_refused(test::run_tool("retro-train", "--db a --config b --out c --clip 1e-400"), {"--clip: value 1e-400 is too small for a double"});
    // an option given twice: its last value, the one refused, is quoted
    expect_refused(test::run_tool("retro-train", "--db a --config b --out c --lr 0.5 --lr nan"), {"--lr: 'nan' is not a finite number"});
    // every flag of every tool (it was --no-verify's and a few others' alone: --no-retrieval=false trained with retrieval)
    expect_refused(test::run_tool("retro-train", "--db a --config b --out c --no-retrieval=false"), {"--no-retrieval takes no value"});
    expect_refused(test::run_tool("retro-train", "--db a --config b --out c --force=0"), {"--force takes no value"});
    expect_refused(test::run_tool("retro-chunk", "a --tokenizer t --out o --resume=off"), {"--resume takes no value"});
    expect_refused(test::run_tool("retro-train", "plot run --help=false"), {"--help takes no value"});
    const std::string knn = "knn --n 1000 --dim 16 --queries 10 --ivf-nlist 0 --pq-m 0 --debian-queries 0 --thread-counts 1 ";
    expect_refused(test::run_tool("retro-bench", "--quiet " + knn + "--clusters 0"), {"--clusters"});
    expect_refused(test::run_tool("retro-bench", "--quiet " + knn + "--k 0"), {"--k"});
    // options a row would ignore (session 46's exploratory pass): refused instead
    expect_refused(test::run_tool("retro-bench", "--quiet " + knn + "--queries-npy q.npy"), {"--queries-npy: needs --base-npy"});
    expect_refused(test::run_tool("retro-bench", "--quiet knn --base-npy b.npy --queries-npy q.npy --dim 8"), {"--dim", "--base-npy replaces"});
    expect_refused(test::run_tool("retro-bench", "--quiet " + knn + "--query-block -1"), {"--query-block", "not a block size"});
    expect_refused(test::run_tool("retro-bench", "--quiet train --launcher mpirun --steps 1"), {"--launcher: applies with --ranks only"});
    // a usage error points at the help of the subcommand it is in, and names the option meant where the tools name
    // one thing two ways (a new user's pass, session 54)
    expect_refused(test::run_tool("retro-tokenizer", "encode --model " + p.tok.string() + " --bogus"),
                   {"(fix: see retro-tokenizer encode --help)"});
    expect_refused(test::run_tool("retro-generate", p.run.string() + " --out o.jsonl hello"),
                   {"(fix: the option is --output FILE"});
    expect_refused(test::run_tool("retro-train", "eval --run " + p.run.string() + " --db " + p.db.string() + " --out e.json"),
                   {"(fix: the option is --json-out FILE"});
    // and the options a --ranks launch does not pass to its ranks (`--ranks 2 --device cuda` printed CPU rows)
    for (const char* ignored : {"--device cuda", "--dtype bf16", "--profile 2", "--peer", "--threads 2"})
        expect_refused(test::run_tool("retro-bench", std::string("--quiet train --ranks 1 --steps 1 ") + ignored),
                       {"is not passed to the ranks of a --ranks launch"});
    // options the run would ignore without a word (each ran, exit 0, as if not given)
    expect_refused(test::run_tool("retro-bench", "--quiet " + knn + "--python python3"), {"--python: runs the peer, and there is none"});
    expect_refused(test::run_tool("retro-bench", "--quiet " + knn + "--nprobe 4"), {"--nprobe: applies to the IVF rows"});
    expect_refused(test::run_tool("retro-bench", "--quiet " + knn + "--hnsw-m 0 --ef-search 16"), {"--ef-search: applies to the HNSW rows"});
    expect_refused(test::run_tool("retro-bench", "--quiet chunk --corpus x.jsonl --size-mb 8"), {"--size-mb", "which --corpus replaces"});
    expect_refused(test::run_tool("retro-bench", "--quiet chunk --tokenizer t.model --vocab-size 500"), {"--vocab-size", "which --tokenizer replaces"});
    expect_refused(test::run_tool("retro-bench", "--quiet chunk --text-key body"), {"--text-key: reads a --corpus"});
    expect_refused(test::run_tool("retro-bench", "--quiet retention --modes naive --naive-max-T -1"), {"--naive-max-T: -1 is not a sequence length"});
    expect_refused(test::run_tool("retro-bench", "--quiet chunk --chunk-bin /dev/null --size-mb 0.01"), {"--chunk-bin: /dev/null is not an executable file"});
    expect_refused(test::run_tool("retro-bench", "--quiet chunk --vocab-size 10 --size-mb 0.01"), {"--vocab-size: 10 is below"});
    expect_refused(test::run_tool("retro-bench", "--quiet chunk --size-mb 0.01 --work-dir " + (test::source_dir() / "README.md").string()),
                   {"--work-dir: ", "README.md is a file, not a folder"});
    expect_refused(test::run_tool("retro-bench", "--quiet train --peer-script " + (test::source_dir() / "tests/peers/rp_train.py").string() + " --steps 1"), {"--peer-script: applies with --peer only"});
    // approximate rows that cannot train on --n vectors are refused before the exact rows run, naming the fix
    expect_refused(test::run_tool("retro-bench", "--quiet knn --n 100 --dim 8 --queries 10 --debian-queries 0 --ivf-nlist 4096"),
                   {"--ivf-nlist", "there are 100", "or 0 for no IVF rows"});
    // the default --ivf-nlist (4,096) is lowered to what --n trains at 39 a list (FAISS warned, and its k-means took most
    // of a small run: a helper's docs walk, session 67): 2,000 vectors, 32 lists
    // (and the tool's --threads is the list timed, as for train: knn timed 1 and all cores whatever it said)
    const test::RunResult small = test::run_tool("retro-bench", "--threads 1 knn --n 2000 --dim 8 --queries 10 --pq-m 0 "
                                                                "--nprobe 8,64 --debian-queries 0 --json -");
    CHECK_MESSAGE(small.exit_code == 0, small.err);
    const nlohmann::json timed = nlohmann::json::parse(small.out);
    REQUIRE(timed.at("rows").size() >= 2);
    REQUIRE(timed.at("approximate").size() == 2);
    for (const char* rows : {"rows", "approximate"})
        for (const auto& row : timed.at(rows)) CHECK(row.at("threads") == 1);
    CHECK(small.err.find("IVF rows with 32 lists: 2000 base vectors train at most that many at 39 a list (not the default "
                         "4096; --ivf-nlist sets it)") != std::string::npos);
    CHECK(small.err.find("--nprobe 64 is above the IVF's 32 lists: that row probes all 32 lists") != std::string::npos);
    CHECK(timed.at("approximate")[0].at("factory") == "IVF32,Flat");
    CHECK(small.err.find("please provide at least") == std::string::npos);   // (FAISS's own warning)
    expect_refused(test::run_tool("retro-bench", "--quiet knn --n 5000 --dim 8 --queries 10 --ivf-nlist 64"),
                   {"--pq-m", "--pq-m 0"});
    expect_refused(test::run_tool("retro-bench", "--quiet retention --T -64 --B 1 --H 1 --K 8 --V 8 --repeats 1"), {"--T"});
    // sizes that would fill the memory or the disk are refused before anything is allocated or written
    expect_refused(test::run_tool("retro-bench", "--quiet retention --T 1000000 --modes naive,chunkwise --naive-max-T 1000000"),
                   {"--T", "T = 1000000", "needs about", "of memory available"});
    expect_refused(test::run_tool("retro-bench", "--quiet chunk --size-mb 0"), {"--size-mb", "not a corpus size"});
    expect_refused(test::run_tool("retro-bench", "--quiet chunk --size-mb inf"), {"--size-mb", "is not a finite number"});
    expect_refused(test::run_tool("retro-bench", "--quiet chunk --size-mb 1 --chunk-threads 1,-1"), {"--chunk-threads"});
    expect_refused(test::run_tool("retro-tokenizer", "train x --out y --character-coverage 0.9"),
                   {"--character-coverage", "outside [0.98, 1]"});
    expect_refused(test::run_tool("retro-bench", "--quiet chunk --size-mb 1e12"), {"--size-mb", "of disk"});
    for (const std::string threads : {"-1", "100000"})
        expect_refused(test::run_tool("retro-chunk", "corpus --tokenizer t --out o --threads " + threads), {"--threads"});
    expect_refused(test::run_tool("retro-chunk", "corpus --tokenizer t --out o --checkpoint-every nan"), {"--checkpoint-every"});
    // the tool's own options given with a subcommand were matched on the tool and ignored by the subcommand
    expect_refused(test::run_tool("retro-chunk", "merge a b --out m --tokenizer t"),
                   {"--tokenizer: is an option of retro-chunk itself, not of `retro-chunk merge`", "retro-chunk merge --help"});
    expect_refused(test::run_tool("retro-knn", "--nprobe 4 show knn --db db"), {"--nprobe", "not of `retro-knn show`"});
    expect_refused(test::run_tool("retro-train", "plot run --steps 5"), {"--steps", "not of `retro-train plot`"});
    expect_refused(test::run_tool("retro-knn", "--force merge a b --out c"),
                   {"--force: was given before `merge`", "give it after `merge`"});
    expect_refused(test::run_tool("retro-index", "query idx hello world"),
                   {"retro-index query: takes no argument 'world' there", "quote a text with spaces"});
    // retro-bench: thread counts of a timed row, and --json checked before the timing (a missing folder said "wrote")
    expect_refused(test::run_tool("retro-bench", "train --threads 99999 --steps 1"), {"--threads", "not in range 1 to 4096"});
    expect_refused(test::run_tool("retro-bench", "knn --thread-counts 1,0"), {"--thread-counts", "not in range 1 to 4096"});
    expect_refused(test::run_tool("retro-bench", "chunk --size-mb 0.05 --json /no-such-folder/c.json"),
                   {"/no-such-folder/c.json", "cannot be written"});
    expect_refused(test::run_tool("retro-bench", "generate --prompt 8 --output 2 --profile 1"), {"--profile", "--device cuda"});
    expect_refused(test::run_tool("retro-bench", "embed --model m --chunks 99999999999"), {"--chunks", "of memory available"});
    // an empty item of a comma-separated list (CLI11 dropped it without a word: `--T 32,,64` ran two rows)
    const test::RunResult empty_item = test::run_tool("retro-bench", "retention --T 32,,64 --B 1 --H 1");
    expect_refused(empty_item, {"--T", "'32,,64' has an empty item"});
    CHECK(empty_item.out.empty());   // refused before the benchmark ran (it runs inside the parse)
    expect_refused(test::run_tool("retro-bench", "retention --T=32, --B 1 --H 1"), {"--T", "'32,' has an empty item"});
    expect_refused(test::run_tool("retro-bench", "retention --T 32 ,,64 --B 1 --H 1"), {"--T", "'32,,64' has an empty item"});
    expect_refused(test::run_tool("retro-bench", "retention --B 1 --T 32 ,"), {"--T", "'32,' has an empty item"});
    expect_refused(test::run_tool("retro-bench", "knn --nprobe ,8"), {"--nprobe", "',8' has an empty item"});
    expect_refused(test::run_tool("retro-bench", "chunk --size-mb 1e-9"), {"--size-mb", "less than a kilobyte"});
    // a value twice: two rows of one setting under one label (session 52)
    const test::RunResult repeated = test::run_tool("retro-bench", "retention --T 32,64,32 --B 1 --H 1");
    expect_refused(repeated, {"--T", "lists 32 twice"});
    CHECK(repeated.out.empty());
    expect_refused(test::run_tool("retro-bench", "knn --thread-counts 1 --thread-counts 1"), {"--thread-counts", "lists 1 twice"});
    expect_refused(test::run_tool("retro-bench", "--quiet " + knn + "--rounds 0"), {"--rounds", "0 is not a number of rounds"});
    expect_refused(test::run_tool("retro-bench", "--quiet " + knn + "--debian-queries -1"), {"--debian-queries"});
}

TEST_CASE("bad input: an output file's name held by a link, a pipe or a folder is refused, not replaced") {
    test::TempDir t("bad-out-kind");
    test::write_text(t / "target.json", "keep");
    fs::create_symlink(t / "target.json", t / "link.json");
    REQUIRE(::mkfifo((t / "fifo").c_str(), 0644) == 0);
    for (const auto& [name, says] : std::vector<std::pair<std::string, std::string>>{
             {"link.json", "is a symbolic link, not a regular file"}, {"fifo", "is a pipe, not a regular file"}}) {
        expect_refused(test::run_tool("retro-bench", "ops --list --json " + (t / name).string()), {name, says});
        CHECK(fs::is_symlink(t / "link.json"));
    }
    CHECK(fs::is_fifo(t / "fifo"));
    CHECK(test::read_text(t / "target.json") == "keep");
    // the library's atomic write refuses them too (every tool's outputs go through it)
    CHECK_THROWS_WITH_AS(write_file_atomic((t / "link.json").string(), "x"), doctest::Contains("is a symbolic link"), UserError);
    CHECK(fs::is_symlink(t / "link.json"));
}

TEST_CASE("bad input: a binary corpus file, a negative or too large seed, a resume with another batch, a search option with nothing to set") {
    const Pipeline& p = pipeline();
    test::TempDir t("badmore");

    // a NUL byte marks a binary file (or UTF-16 text) named like text: refused, or skipped and counted
    const fs::path corpus = t / "corpus", db = t / "db";
    copy_folder(p.corpus, corpus);
    test::write_text(corpus / "image.txt", std::string("\x89PNG\r\n\x1a\n\0\0\0\rIHDR", 16));
    expect_refused(test::run_tool("retro-chunk", corpus.string() + " --tokenizer " + p.tok.string() + " --out " +
                                                     db.string() + " --chunk-size 4 --seq-len 16 --quiet"),
                   {(corpus / "image.txt").string(), "a NUL byte at offset 8", "--on-error skip"});
    CHECK(!fs::exists(db / "manifest.json"));
    expect_refused(test::run_tool("retro-tokenizer", "train " + corpus.string() + " --out " + (t / "tok").string() +
                                                         " --vocab-size 300 --quiet"),
                   {(corpus / "image.txt").string(), "a NUL byte"});
    REQUIRE(test::run_tool("retro-chunk", corpus.string() + " --tokenizer " + p.tok.string() + " --out " + db.string() +
                                              " --chunk-size 4 --seq-len 16 --quiet --on-error skip")
                .exit_code == 0);
    CHECK(nlohmann::json::parse(test::read_text(db / "manifest.json"))["corpus"]["malformed_skipped"] == 1);

    // a negative seed was read as 2^64 - 1
    expect_refused(test::run_tool("retro-train", train_args(p, t / "r") + " --steps 1 --seed -1"), {"--seed"});
    expect_refused(test::run_tool("retro-generate", p.run.string() + " --index " + p.index.string() + " --db " +
                                                        p.db.string() + " --seed -1 --max-tokens 2 --quiet hello"),
                   {"--seed"});
    // a seed past 2^64 - 1 was read as 2^64 - 1, "0x10" as 16, and "010" as octal 8: digits only, read as decimal
    const std::string seed = p.run.string() + " --index " + p.index.string() + " --db " + p.db.string() +
                             " --max-tokens 4 --quiet hello --seed ";
    expect_refused(test::run_tool("retro-generate", seed + "18446744073709551616"), {"--seed", "out of range"});
    expect_refused(test::run_tool("retro-generate", seed + "0x10"), {"--seed", "decimal digits"});
    const auto ten = test::run_tool("retro-generate", seed + "10"), oct = test::run_tool("retro-generate", seed + "010");
    REQUIRE_MESSAGE(ten.exit_code == 0, ten.err);
    CHECK(oct.out == ten.out);
    // every integer option reads decimal: --max-tokens 010 is ten tokens (it was octal 8), 0x10 is refused
    const std::string tokens = p.run.string() + " --index " + p.index.string() + " --db " + p.db.string() +
                               " --quiet hello --seed 1 --max-tokens ";
    CHECK(test::run_tool("retro-generate", tokens + "010").out == test::run_tool("retro-generate", tokens + "10").out);
    expect_refused(test::run_tool("retro-generate", tokens + "0x10"), {"--max-tokens", "decimal digits"});

    // a resume with another global batch is refused (the data cursor counts its sequences); a changed schedule is
    // taken and said
    const fs::path run = t / "run";
    copy_folder(p.run, run);
    fs::remove(run / "manifest.json");
    fs::remove(run / "model.safetensors");
    fs::remove_all(run / "checkpoints" / "step_00000002");
    const fs::path state = run / "checkpoints" / "step_00000001" / "state.json";
    const std::string common = "--db " + p.db.string() + " --knn " + p.knn.string() + " --config " + p.config.string() +
                               " --out " + run.string() + " --threads 1 --resume ";
    expect_refused(test::run_tool("retro-train", common + "--steps 2 --quiet --batch-size 3"),
                   {state.string(), "global batch of 2 sequences (--batch-size 2 x --grad-accum 1), not 3"});
    expect_refused(test::run_tool("retro-train", common + "--steps 2 --quiet --batch-size 2 --grad-accum 2"),
                   {state.string(), "not 4"});
    // a checkpoint from before the continuation rule was recorded (data/chunk_db.h) read the older rule: said, and
    // carried to the later checkpoints and the manifest as the step it changed at
    nlohmann::json older = nlohmann::json::parse(test::read_text(state));
    CHECK(older.value("neighbour_continuation", "") == "retro-pytorch");
    older.erase("neighbour_continuation");
    test::write_text(state, older.dump(2));
    const test::RunResult split = test::run_tool("retro-train", common + "--steps 2 --batch-size 1 --grad-accum 2");
    CHECK_MESSAGE(split.exit_code == 0, split.err);   // the same global batch, split otherwise (as the memory check advises)
    CHECK(split.err.find("resume: --batch-size 1 x --grad-accum 2 (was 2 x 1): the same global batch of 2") != std::string::npos);
    CHECK(split.err.find("resume: " + state.string() + " records no neighbour continuation rule: RetroKit before "
                         "2026-12-06 read a continuation") != std::string::npos);
    const std::string loud = common + "--batch-size 2 --steps 3 --lr 0.001";
    const test::RunResult resumed = test::run_tool("retro-train", loud);
    INFO("stderr: ", resumed.err);
    CHECK(resumed.exit_code == 0);
    CHECK(resumed.err.find("resume: --steps 3 (was 2), --lr 0.001 (was 0.0003)") != std::string::npos);
    CHECK(resumed.err.find("continuation") == std::string::npos);   // step 2's checkpoint records the rule
    nlohmann::json mixed = nlohmann::json::parse(test::read_text(run / "manifest.json"));
    CHECK(mixed["parameters"]["neighbour_continuation"] == "retro-pytorch");
    CHECK(mixed["parameters"]["neighbour_continuation_from_step"] == 1);
    const std::string eval = "eval --run " + run.string() + " --db " + p.db.string() + " --knn " + p.knn.string() +
                             " --max-batches 1 --split all";
    const test::RunResult eval_mixed = test::run_tool("retro-train", eval);
    CHECK_MESSAGE(eval_mixed.exit_code == 0, eval_mixed.err);
    CHECK(eval_mixed.err.find(run.string() + " read RetroKit's older neighbour continuations (before 2026-12-06) up to "
                              "its checkpoint at step 1, resumed since") != std::string::npos);
    mixed["parameters"].erase("neighbour_continuation");   // a run of an earlier version
    test::write_text(run / "manifest.json", mixed.dump(2));
    const test::RunResult eval_older = test::run_tool("retro-train", eval);
    CHECK_MESSAGE(eval_older.exit_code == 0, eval_older.err);
    CHECK(eval_older.err.find((run / "manifest.json").string() + " records no neighbour continuation rule") !=
          std::string::npos);
    // a rule this version does not know (a later version's checkpoint) is refused
    const fs::path state3 = run / "checkpoints" / "step_00000003" / "state.json";
    nlohmann::json later = nlohmann::json::parse(test::read_text(state3));
    later["neighbour_continuation"] = "some-later-rule";
    test::write_text(state3, later.dump(2));
    fs::remove(run / "manifest.json");
    fs::remove(run / "model.safetensors");
    expect_refused(test::run_tool("retro-train", common + "--batch-size 2 --steps 4 --quiet"),
                   {state3.string(), "neighbour continuation rule \"some-later-rule\""});

    // --nprobe on an index without inverted lists (the pipeline's Flat index) was ignored without a word
    const test::RunResult flat = test::run_tool("retro-knn", p.index.string() + " --db " + p.db.string() + " --out " +
                                                                 (t / "k").string() + " --nprobe 4");
    INFO("stderr: ", flat.err);
    CHECK(flat.exit_code == 0);
    CHECK(flat.err.find("--nprobe 4: " + (p.index / "index.faiss").string() + " has no inverted lists") != std::string::npos);

    // inspect --stats indexed a histogram by token id: 65535 (u16) or 65535 (low bytes of an i32) is outside the
    // 300-piece vocabulary and is named, not counted (a negative i32 id asked for exabytes)
    const fs::path odd = t / "odd";
    copy_folder(p.db, odd);
    {
        std::fstream f(odd / "chunks.npy", std::ios::in | std::ios::out | std::ios::binary);
        std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
        f.seekp(static_cast<std::streamoff>(bytes.find('\n') + 1));
        f.write("\xff\xff", 2);
    }
    expect_refused(test::run_tool("retro-chunk", "inspect " + odd.string() + " --stats"),
                   {(odd / "chunks.npy").string(), "token id 65535", "[0, 300)"});

    // --dtype bf16 is the CPU decoder's (the GPU decoder reads fp32 weights); on the CPU it generates
    const std::string gen = p.run.string() + " --index " + p.index.string() + " --db " + p.db.string() +
                            " --max-tokens 4 --quiet --greedy hello";
    expect_refused(test::run_tool("retro-generate", gen + " --dtype bf16 --device cuda"), {"--dtype bf16", "CPU decoder"});
    expect_refused(test::run_tool("retro-generate", gen + " --dtype fp16"), {"--dtype"});
    const test::RunResult half = test::run_tool("retro-generate", gen + " --dtype bf16");
    if (half.err.find("AVX-512") == std::string::npos) CHECK_MESSAGE(half.exit_code == 0, half.err);
    else expect_refused(half, {"--dtype bf16", "AVX-512"});   // a CPU without it: refused in one line
}

TEST_CASE("cli: every tool's and subcommand's --help ends with its last line, not an empty one") {
    for (const char* args : {"retro-tokenizer --help", "retro-chunk --help", "retro-index --help", "retro-index query --help",
                             "retro-knn --help", "retro-train --help", "retro-train eval --help", "retro-generate --help",
                             "retro-bench --help", "retro-bench knn --help"}) {
        CAPTURE(args);
        const std::string cmd(args);
        const auto r = test::run_tool(cmd.substr(0, cmd.find(' ')), cmd.substr(cmd.find(' ') + 1));
        CHECK(r.exit_code == 0);
        REQUIRE(r.out.size() > 2);
        CHECK(r.out.back() == '\n');
        CHECK(r.out[r.out.size() - 2] != '\n');
    }
}

TEST_CASE("bad input: a misspelt subcommand, standard input that cannot be read, tokenizer sizes - named (session 52's pass)") {
    const Pipeline& p = pipeline();
    expect_refused(test::run_tool("retro-tokenizer", "trian corpus"),
                   {"'trian' is not a subcommand of retro-tokenizer (train, encode, decode)"});
    expect_refused(test::run_tool("retro-bench", "retntion"), {"'retntion' is not a subcommand of retro-bench (retention,"});
    expect_refused(test::run_tool("retro-bench", "--quiet retntion"), {"'retntion' is not a subcommand of retro-bench"});
    // none given: the subcommands named (it said "A subcommand is required")
    expect_refused(test::run_tool("retro-tokenizer", ""), {"a subcommand is required: train, encode, decode"});
    expect_refused(test::run_tool("retro-bench", "--quiet"), {"a subcommand is required: retention, chunk, embed, knn, train"});
    // standard input a folder: exit 0 with no output before (the read error was taken for the end of the text)
    for (const char* sub : {"encode", "decode"}) {
        const test::RunResult r = test::run_command("sh -c " + shell_quote(test::tool_path("retro-tokenizer") + " " + sub +
                                                                           " --model " + p.tok.string() + " < /tmp"));
        expect_refused(r, {"standard input: cannot be read"});
        CHECK(r.out.empty());
        const test::RunResult closed = test::run_command("sh -c " + shell_quote(test::tool_path("retro-tokenizer") + " " + sub +
                                                                                " --model " + p.tok.string() + " <&-"));
        expect_refused(closed, {"standard input: is closed"});
    }
    // below byte fallback's 260 pieces: that bound, whatever the size (0 to 7 were told "at least 8", then 8 "260")
    for (const char* size : {"0", "7", "8", "259"})
        expect_refused(test::run_tool("retro-tokenizer", "train " + p.corpus.string() + " --out " +
                                                             (p.tmp / "tok-small").string() + " --vocab-size " + size),
                       {"--vocab-size", "below the 256 byte pieces and 4 special pieces"});
    // a tool whose subcommands are optional, run with nothing: its own form and each subcommand (session 67: retro-index
    // named merge but not query, retro-knn not show, retro-train neither eval nor plot)
    expect_refused(test::run_tool("retro-chunk", ""), {"retro-chunk: error: usage: no corpus given",
                                                       "(or: retro-chunk merge ..., retro-chunk inspect ...)"});
    expect_refused(test::run_tool("retro-index", ""), {"retro-index: error: usage: retro-index DB --out DIR",
                                                       "(or: retro-index merge ..., retro-index query ...)"});
    expect_refused(test::run_tool("retro-knn", ""), {"retro-knn: error: usage: retro-knn INDEX [--db DB] --out DIR",
                                                     "(or: retro-knn merge ..., retro-knn show ...)"});
    expect_refused(test::run_tool("retro-train", "--db " + p.db.string()),
                   {"retro-train: error: usage: --db, --config and --out are required to train",
                    "(or: retro-train eval ..., retro-train plot ...)"});
}

TEST_CASE("bad input: a path that is not UTF-8 and a malformed RETRO_MEMORY_LIMIT are refused before any work (session 52's pass)") {
    // a Latin-1 --out or corpus file name was found when the manifest was written, after the work: "internal error:
    // [json.exception.type_error.316]", exit 1, and a folder no --resume or --force could finish
    const Pipeline& p = pipeline();
    test::TempDir t("non-utf8");
    const std::string bad_out = (t / "ix").string() + "\xff";
    expect_refused(test::run_tool("retro-index", p.db.string() + " --out " + shell_quote(bad_out) + " --dim 8"),
                   {"--out: '", "ix\\xff' is not valid UTF-8"});
    CHECK_FALSE(fs::exists(bad_out));
    const fs::path corpus = t / "corpus";
    fs::create_directories(corpus);
    test::write_text(corpus / "a.txt", "some text for a tokenizer\n");
    test::write_text(corpus / "caf\xe9.txt", "more text\n");
    expect_refused(test::run_tool("retro-tokenizer", "train " + corpus.string() + " --out " + (t / "tok").string() + " --vocab-size 300"),
                   {"caf\\xe9.txt: is a corpus file whose path is not valid UTF-8"});
    CHECK_FALSE(fs::exists(t / "tok"));
    // RETRO_MEMORY_LIMIT: units taken (8G was read as 8 bytes), anything else refused naming it (abc was ignored)
    for (const auto& [value, ok] : std::vector<std::pair<std::string, bool>>{{"8G", true}, {"8e9", true}, {"512M", true},
                                                                               {"abc", false}, {"-5", false}, {"8Q", false}}) {
        CAPTURE(value);
        test::ScopedEnv env("RETRO_MEMORY_LIMIT", value.c_str());
        const test::RunResult r = test::run_tool("retro-index", p.db.string() + " --out " + (t / "ixm").string() + " --dim 8 --force --quiet");
        if (ok) {
            CHECK_MESSAGE(r.exit_code == 0, r.err);
        } else {
            expect_refused(r, {"RETRO_MEMORY_LIMIT: '" + value + "' is not a memory size"});
        }
    }
    // "-" where a file or a folder is written: refused (a file or folder named "-" was made, exit 0)
    expect_refused(test::run_tool("retro-index", p.db.string() + " --out - --dim 8"), {"--out: '-' (standard output) is not a folder"});
    // ... but retro-bench's --json - is standard output, the tables then on stderr, so that `| jq` reads the JSON
    // alone (a new user's pass, session 54; before: refused, and a file named "-" before that)
    const test::RunResult piped = test::run_tool("retro-bench", "retention --T 32 --B 1 --H 1 --repeats 1 --modes chunkwise --json -");
    REQUIRE_MESSAGE(piped.exit_code == 0, piped.err);
    const nlohmann::json j = nlohmann::json::parse(piped.out, nullptr, false);
    CHECK_MESSAGE(j.is_object(), piped.out);
    CHECK(j.contains("stamp"));
    CHECK(piped.err.find("chunkwise") != std::string::npos);   // the table, on stderr
    CHECK_FALSE(fs::exists("-"));
    {   // the last --json given is the one taken: a file, the table back on stdout
        const test::RunResult last = test::run_tool("retro-bench", "ops --list --json - --json " + (t / "ops.json").string());
        CHECK_MESSAGE(last.exit_code == 0, last.err);
        CHECK(last.out.find("nn.linear") != std::string::npos);
        CHECK(fs::exists(t / "ops.json"));
    }
    test::ScopedEnv tiny("RETRO_MEMORY_LIMIT", "1K");
    expect_refused(test::run_tool("retro-index", p.db.string() + " --out " + (t / "ixm").string() + " --dim 8 --force --quiet"),
                   {"of memory available (RETRO_MEMORY_LIMIT)"});
}

TEST_CASE("cli: an unknown option names the options near it, and words no argument takes are listed in their order") {
    // CLI11 said "The following arguments were not expected: 3 --neighbour" (reversed) and no more (session 58's walk-through)
    expect_refused(test::run_tool("retro-knn", "idx --db db --out k --neighbour 3"),
                   {"retro-knn: error: --neighbour: not an option of retro-knn (the words not taken: '--neighbour' '3')",
                    "(fix: did you mean --neighbours? see retro-knn --help)"});
    expect_refused(test::run_tool("retro-knn", "idx --neighbors=3"), {"--neighbors: not an option of retro-knn (fix: did you mean --neighbours?"});
    expect_refused(test::run_tool("retro-knn", "idx --nprob 3"), {"did you mean --nprobe?"});
    expect_refused(test::run_tool("retro-bench", "knn --neigh 3"), {"--neigh: not an option of retro-bench knn", "did you mean --neighbours? see retro-bench knn --help"});
    expect_refused(test::run_tool("retro-chunk", "merge a --out b --thread 2"), {"not an option of retro-chunk merge", "did you mean --threads?"});
    expect_refused(test::run_tool("retro-knn", "idx --zzz"), {"--zzz: not an option of retro-knn (fix: see retro-knn --help)"});
    expect_refused(test::run_tool("retro-generate", "run --out x.jsonl"), {"--out: not an option of retro-generate", "the option is --output FILE"});
    expect_refused(test::run_tool("retro-train", "db/ knn/ --config demo"),
                   {"'db/' 'knn/': left over (retro-train takes no positional arguments) (fix: give its inputs by their options"});
    expect_refused(test::run_tool("retro-generate", "run 'a b' c"), {"'c': left over (retro-generate takes no more positional arguments)"});
    // a required option misspelt: the misspelling first (it said only "--out is required"), case-folded names, `--`
    expect_refused(test::run_tool("retro-knn", "merge a b --otu x"), {"--otu: not an option of retro-knn merge", "--out is required", "did you mean --out?"});
    expect_refused(test::run_tool("retro-bench", "retention --t 5"), {"did you mean --T?"});
    expect_refused(test::run_tool("retro-knn", "idx -- --completion"), {"'--' '--completion': left over"});
    // a control character among the words is shown, not sent to the terminal
    const test::RunResult escape = test::run_tool("retro-knn", "idx \"$(printf '%s\\033[31m' --x)\"");
    CHECK(escape.err.find('\x1b') == std::string::npos);
    CHECK(escape.err.find("--x\\x1b[31m: not an option of retro-knn") != std::string::npos);
}
