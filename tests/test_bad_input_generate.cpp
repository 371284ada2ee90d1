// Bad input to retro-generate (see test_bad_input_cli.cpp): its --output, standard output, and a database,
// tokenizer or index other than the run's (retro-knn --queries and retro-index query with it).
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
using test::expect_refused;
const auto& pipeline = test::bad_input_pipeline;   // (the pipeline's run: 2 steps with retrieval, a checkpoint at each)

}  // namespace

TEST_CASE("bad input: retro-generate's --output is checked before the work, stdout write errors fail, a run without a manifest generates") {
    const Pipeline& p = pipeline();
    test::TempDir t("badgen");
    test::write_text(t / "p.jsonl", "{\"prompt\": \"hello\"}\n{\"prompt\": \"the\"}\n");
    const std::string g = p.run.string() + " --index " + p.index.string() + " --db " + p.db.string() + " --max-tokens 2 --quiet";
    expect_refused(test::run_tool("retro-generate", g + " --prompts " + (t / "p.jsonl").string() + " --output " +
                                                        (t / "p.jsonl").string()),
                   {"is the --prompts file"});
    CHECK(test::read_text(t / "p.jsonl").find("completion") == std::string::npos);   // the prompts intact
    expect_refused(test::run_tool("retro-generate", g + " --prompts " + (t / "p.jsonl").string() + " --output " +
                                                        (t / "no-such-folder" / "o.jsonl").string()),
                   {"cannot be written", "is not a folder"});
    // a folder where no file can be made (root's access(W_OK) says yes to /proc): refused before the decoding
    if (std::filesystem::is_directory("/proc/self"))
        expect_refused(test::run_tool("retro-generate", g + " --prompts " + (t / "p.jsonl").string() + " --output /proc/o.jsonl"),
                       {"cannot be written", "no file can be made in /proc"});
    // --batch-size above the prompt count is the prompt count (not a memory refusal for 100000 sequences)
    const test::RunResult big = test::run_tool("retro-generate", g + " --prompts " + (t / "p.jsonl").string() + " --output " +
                                                                     (t / "o.jsonl").string() + " --batch-size 100000");
    CHECK_MESSAGE(big.exit_code == 0, big.err);
    // a full standard output is an error naming it, not exit 0
    const test::RunResult full =
        test::run_command("(" + test::tool_path("retro-chunk") + " inspect " + p.db.string() + " > /dev/full)");
    CHECK(full.exit_code == 2);
    CHECK(full.err.find("retro-chunk: error: standard output: write failed") != std::string::npos);
    // a run folder without manifest.json (weights and config copied by hand) still generates
    fs::create_directories(t / "bare");
    fs::copy_file(p.run / "config.json", t / "bare" / "config.json");
    fs::copy_file(p.run / "model.safetensors", t / "bare" / "model.safetensors");
    const test::RunResult bare = test::run_tool("retro-generate", (t / "bare").string() + " --index " + p.index.string() +
                                                                      " --db " + p.db.string() + " --max-tokens 2 --quiet hello");
    CHECK_MESSAGE(bare.exit_code == 0, bare.err);
    // folders mixed up: each names what the folder is
    expect_refused(test::run_tool("retro-generate", (t / "no-such-run").string() + " --index " + p.index.string() + " --db " +
                                                        p.db.string() + " hello"),
                   {"no-such-run: does not exist"});
    expect_refused(test::run_tool("retro-knn", "show " + p.index.string() + " --db " + p.db.string() + " --chunk 0"),
                   {"was written by retro-index, not retro-knn"});
    expect_refused(test::run_tool("retro-index", "query " + p.db.string() + " hello"), {"was written by retro-chunk, not retro-index"});
    // no query at all is the usage (it said "the query text is empty"); blanks are an empty text
    expect_refused(test::run_tool("retro-index", "query " + p.index.string()), {"query: no query given"});
    // the two swapped: named as such (it said only "warranty: no such folder")
    expect_refused(test::run_tool("retro-index", "query warranty " + p.index.string()),
                   {"warranty: no such folder, and the query text", "(fix: the index comes first: retro-index query INDEX"});
    expect_refused(test::run_tool("retro-index", "query " + p.index.string() + " '   '"), {"query: the query text is empty"});
    // retro-bench ops --list --json writes the registry (it wrote nothing)
    const test::RunResult listed = test::run_tool("retro-bench", "ops --list --json " + (t / "ops.json").string());
    CHECK(listed.exit_code == 0);
    const auto ops_json = nlohmann::json::parse(test::read_text(t / "ops.json"));
    CHECK(ops_json.at("ops").at(0).contains("tests"));
    CHECK(ops_json.at("stamp").at("tool") == "retro-bench ops --list");   // the envelope every --json file has
    // negative ids and counts are refused, not read as "unset" (inspect --chunk -1 printed the statistics)
    expect_refused(test::run_tool("retro-chunk", "inspect " + p.db.string() + " --chunk -1"), {"--chunk", "negative"});
    expect_refused(test::run_tool("retro-knn", "show " + p.knn.string() + " --db " + p.db.string() + " --chunk 0 --count 0"),
                   {"--count"});
    // retro-bench refuses a training batch that does not fit, in one line, before allocating it
    expect_refused(test::run_tool("retro-bench", "--quiet train --config " + p.config.string() + " --batch 1000000 --seq-len 16 "
                                                 "--steps 1 --threads 1"),
                   {"--batch", "needs about"});
}

TEST_CASE("bad input: a database or tokenizer other than the run's is refused by retro-generate, retro-knn --queries and the tools that show text") {
    const Pipeline& p = pipeline();
    test::TempDir t("badtok");
    const fs::path bpe = t / "bpe", db = t / "db", index = t / "index";
    REQUIRE(test::run_tool("retro-tokenizer", "train " + p.corpus.string() + " --out " + bpe.string() +
                                                  " --vocab-size 300 --model-type bpe --quiet")
                .exit_code == 0);
    REQUIRE(test::run_tool("retro-chunk", p.corpus.string() + " --tokenizer " + bpe.string() + " --out " + db.string() +
                                              " --chunk-size 4 --seq-len 16 --quiet")
                .exit_code == 0);
    REQUIRE(test::run_tool("retro-index", db.string() + " --out " + index.string() + " --dim 16 --quiet").exit_code == 0);
    for (const std::string allow : {"", " --allow-other-db"})
        expect_refused(test::run_tool("retro-generate", p.run.string() + " --index " + index.string() + " --db " +
                                                            db.string() + allow + " --max-tokens 2 --quiet hello"),
                       {db.string(), "another tokenizer"});
    expect_refused(test::run_tool("retro-generate", p.run.string() + " --index " + p.index.string() + " --db " +
                                                        p.db.string() + " --tokenizer " + bpe.string() +
                                                        " --max-tokens 2 --quiet hello"),
                   {"is not the tokenizer the database was chunked with"});
    expect_refused(test::run_tool("retro-knn", p.index.string() + " --db " + p.db.string() + " --queries " + db.string() +
                                                   " --out " + (t / "kq").string() + " --quiet"),
                   {db.string(), "another tokenizer"});
    CHECK(!fs::exists(t / "kq" / "manifest.json"));
    // the tools that show a database's text refuse a --tokenizer it was not chunked with (it decoded other text, or
    // failed on an id past its vocabulary), and retro-index refuses one for a bert or t5 embedder; the database's own
    // tokenizer, given explicitly, is taken
    const std::string other = " --tokenizer " + bpe.string();
    for (const auto& [tool, args] : std::vector<std::pair<std::string, std::string>>{
             {"retro-index", "query " + p.index.string() + " hello"},
             {"retro-chunk", "inspect " + p.db.string() + " --chunk 0"},
             {"retro-knn", "show " + p.knn.string() + " --db " + p.db.string() + " --chunk 0"}}) {
        expect_refused(test::run_tool(tool, args + other + " --quiet"),
                       {"--tokenizer " + (bpe / "tok.model").string(), "is not the tokenizer " + p.db.string()});
        const auto own = test::run_tool(tool, args + " --tokenizer " + p.tok.string() + " --quiet");
        CHECK_MESSAGE(own.exit_code == 0, tool, ": ", own.err);
    }

    // a prompt of a --prompts file too long for the model is named by its file and line
    const fs::path prompts = t / "p.jsonl";
    test::write_text(prompts, "\"short\"\n" + nlohmann::json(std::string(400, 'a') + " b c d e f g").dump() + "\n");
    expect_refused(test::run_tool("retro-generate", p.run.string() + " --index " + p.index.string() + " --db " +
                                                        p.db.string() + " --prompts " + prompts.string() + " --output " +
                                                        (t / "o.jsonl").string() + " --max-tokens 2 --quiet"),
                   {prompts.string() + ":2", "tokens"});
    CHECK(!fs::exists(t / "o.jsonl"));
}

TEST_CASE("bad input: an index whose manifest no longer gives its vectors is refused by retro-knn --queries, retro-index query and retro-generate") {
    // the manifest is not fingerprinted: bow's seed edited in it embedded every query chunk unlike the index's rows
    // (top-1 score 0.23 against 0.9999), silently (a helper's pass, session 51)
    const Pipeline& p = pipeline();
    test::TempDir t("edited-index");
    const fs::path idx = t / "index";
    fs::copy(p.index, idx, fs::copy_options::recursive);
    auto m = nlohmann::json::parse(test::read_text(idx / "manifest.json"));
    REQUIRE(m["embedder"].value("name", "") == "bow");
    // (+1 would not do: the seed is xored into (feature * 256 + projection), so its lowest bits only permute a
    // feature's projections among themselves — the same vector)
    m["embedder"]["seed"] = m["embedder"].value("seed", 0) + (1 << 20);
    test::write_text(idx / "manifest.json", m.dump(2));
    // (queries from another database, of one of the corpus's files: the database's own chunks as queries are a
    // self-join over embeddings.npy, without the embedder)
    const fs::path qdb = t / "qdb", qcorpus = t / "qcorpus";
    fs::create_directories(qcorpus);
    for (const auto& e : fs::directory_iterator(p.corpus)) {
        fs::copy_file(e.path(), qcorpus / e.path().filename());
        break;
    }
    const test::RunResult chunked = test::run_tool("retro-chunk", qcorpus.string() + " --tokenizer " + p.tok.string() +
                                                                     " --out " + qdb.string() + " --chunk-size 4 --seq-len 16 --quiet");
    REQUIRE_MESSAGE(chunked.exit_code == 0, chunked.err);
    expect_refused(test::run_tool("retro-knn", idx.string() + " --db " + p.db.string() + " --queries " + qdb.string() +
                                                   " --out " + (t / "knn").string() + " --quiet"),
                   {"manifest.json: its embedder settings do not give the vectors the index holds"});
    CHECK_FALSE(fs::exists(t / "knn" / "manifest.json"));
    expect_refused(test::run_tool("retro-generate", p.run.string() + " --index " + idx.string() + " --db " + p.db.string() +
                                                        " --quiet hello"),
                   {"its embedder settings do not give the vectors"});
    // retro-index query too (session 52's pass: other hits, exit 0)
    expect_refused(test::run_tool("retro-index", "query " + idx.string() + " hello --quiet"),
                   {"its embedder settings do not give the vectors"});
    const test::RunResult query_ok = test::run_tool("retro-index", "query " + p.index.string() + " hello --quiet");
    CHECK_MESSAGE(query_ok.exit_code == 0, query_ok.err);
    // the folder as retro-index wrote it passes (the same commands)
    const test::RunResult ok = test::run_tool("retro-knn", p.index.string() + " --db " + p.db.string() + " --queries " +
                                                               qdb.string() + " --out " + (t / "knn-ok").string() + " --quiet");
    CHECK_MESSAGE(ok.exit_code == 0, ok.err);
}

TEST_CASE("retro-generate and retro-knn take --index and --db left out from what the folders record") {
    const Pipeline& p = pipeline();
    test::TempDir t("recorded");
    const std::string prompt = " 'the' --max-tokens 6 --seed 3 --top-k 5";
    const test::RunResult given = test::run_tool("retro-generate", p.run.string() + " --index " + p.index.string() +
                                                                       " --db " + p.db.string() + prompt + " --quiet");
    REQUIRE_MESSAGE(given.exit_code == 0, given.err);
    // both left out: the index the run's neighbours were searched in, the database that index records (each logged)
    const test::RunResult recorded = test::run_tool("retro-generate", p.run.string() + prompt + " --verbose");
    CHECK_MESSAGE(recorded.exit_code == 0, recorded.err);
    CHECK(recorded.out == given.out);
    CHECK(recorded.err.find("--index " + fs::absolute(p.index).string()) != std::string::npos);
    CHECK(recorded.err.find("--db " + fs::absolute(p.db).string()) != std::string::npos);
    const test::RunResult db_given = test::run_tool("retro-generate", p.run.string() + " --db " + p.db.string() + prompt + " --quiet");
    CHECK(db_given.out == given.out);
    // a copy of `folder` as t/name whose manifest records `input` at `elsewhere` (as if that folder had moved)
    const auto moved_input = [&t](const fs::path& folder, const std::string& name, const fs::path& input, const std::string& elsewhere) {
        test::copy_folder(folder, t / name);
        std::string manifest = test::read_text(t / name / "manifest.json");
        const std::string path = fs::absolute(input).lexically_normal().string();
        const std::size_t at = manifest.find("\"" + path);
        REQUIRE(at != std::string::npos);
        manifest.replace(at + 1, path.size(), (t / elsewhere).string());
        test::write_text(t / name / "manifest.json", manifest);
    };
    // a run whose records lead nowhere (its neighbours' folder moved) asks for the options
    moved_input(p.run, "run", p.knn, "moved-knn");
    expect_refused(test::run_tool("retro-generate", (t / "run").string() + prompt),
                   {"--index: retrieval needs an index and its database", "'s records lead to none", "pass --index and --db, or --no-retrieval"});
    CHECK(test::run_tool("retro-generate", (t / "run").string() + " --index " + p.index.string() + prompt + " --quiet").out == given.out);
    // a run whose neighbours folder was made again after it trained (its fingerprint is not the recorded one): that
    // folder's index may not be the one the run's neighbours came from, so none is chosen, and the refusal says why
    test::copy_folder(p.run, t / "run-remade");
    nlohmann::json run_manifest = nlohmann::json::parse(test::read_text(t / "run-remade" / "manifest.json"));
    bool altered = false;
    for (auto& input : run_manifest["inputs"])
        if (input["role"] == "neighbours") input["fingerprint"] = "0000000000000000", altered = true;
    REQUIRE(altered);
    test::write_text(t / "run-remade" / "manifest.json", run_manifest.dump(2));
    expect_refused(test::run_tool("retro-generate", (t / "run-remade").string() + prompt),
                   {"'s records lead to none (the neighbours folder " + fs::absolute(p.knn).lexically_normal().string() +
                        " was made again after " + (t / "run-remade").string() + " read it)",
                    "pass --index and --db, or --no-retrieval"});
    // retro-knn: the index's database; the neighbours those of --db given
    const test::RunResult knn = test::run_tool("retro-knn", p.index.string() + " --out " + (t / "knn").string() + " --verbose");
    REQUIRE_MESSAGE(knn.exit_code == 0, knn.err);
    CHECK(knn.err.find("--db " + fs::absolute(p.db).string()) != std::string::npos);
    CHECK(test::read_text(t / "knn/neighbours.npy") == test::read_text(p.knn / "neighbours.npy"));
    expect_refused(test::run_tool("retro-knn", p.index.string() + " --db " + p.db.string()), {"--out: is required"});
    expect_refused(test::run_tool("retro-knn", "--out " + (t / "k2").string()), {"usage: retro-knn INDEX [--db DB] --out DIR"});
    // an index folder whose database is gone names it and --db
    moved_input(p.index, "index", p.db, "gone-db");
    expect_refused(test::run_tool("retro-knn", (t / "index").string() + " --out " + (t / "k3").string()),
                   {"gone-db: the database the index", "was built from is gone", "pass --db with its new place"});
}
