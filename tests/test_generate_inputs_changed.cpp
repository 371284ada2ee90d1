// retro-generate's inputs changed under it or since (a helper's audit, session 69): a neighbour row whose ids are
// outside the model's vocabulary names the database's chunks.npy and the row; a batch journal whose weights file
// changed since says so; the tokenizer a database records, retrained in place, is named as changed.
#include <fcntl.h>
#include <sys/stat.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/npy.h"
#include "generate/batch_output.h"
#include "generate/generate_journal.h"
#include "generate/generate_run.h"
#include "test_cli_pipeline.h"
#include "test_util.h"

using namespace retro;
namespace fs = std::filesystem;

TEST_CASE("generate inputs: a retrieved row outside the model's vocabulary names the database's chunks.npy and the row") {
    const test::CliPipeline& p = test::bad_input_pipeline();
    const std::int64_t vocabulary = nlohmann::json::parse(test::read_text(p.run / "config.json")).at("num_tokens").get<std::int64_t>();
    // every id far past the vocabulary, then exactly one past it (the mutation campaign of session 71: `id <= V` let
    // the id V through to the embedding table's row V, one past its end)
    for (const std::int64_t id : {std::int64_t(-1), vocabulary}) {
    CAPTURE(id);
    test::TempDir t("genrow");
    const fs::path db = t / "db";
    test::copy_folder(p.db, db);
    {   // rows rewritten (a chunks.npy rewritten in place: --no-verify takes it)
        std::vector<std::uint8_t> bytes;
        DType dtype;
        std::vector<std::int64_t> shape;
        {
            const NpyArray a((db / "chunks.npy").string());
            dtype = a.dtype();
            shape = a.shape();
            bytes.assign(static_cast<const std::uint8_t*>(a.raw()), static_cast<const std::uint8_t*>(a.raw()) + a.bytes());
        }
        REQUIRE((dtype == DType::U16 || dtype == DType::I32));
        // (rows past the first 64, which retro-generate embeds again to check the index's embedder against)
        const std::size_t first = static_cast<std::size_t>(64 * shape.at(1)) * (dtype == DType::U16 ? 2 : 4);
        REQUIRE(bytes.size() > 4 * first);
        const std::uint32_t v = static_cast<std::uint32_t>(id >= 0 ? id : dtype == DType::U16 ? 60000 : 30000);
        const std::size_t width = dtype == DType::U16 ? 2 : 4;
        for (std::size_t i = first; i < bytes.size(); i += width)
            for (std::size_t b = 0; b < width; ++b) bytes[i + b] = static_cast<std::uint8_t>(v >> (8 * b));
        npy_save((db / "chunks.npy").string(), dtype, shape, bytes.data());
    }
    const test::RunResult r = test::run_tool("retro-generate", p.run.string() + " --index " + p.index.string() + " --db " +
                                                                   db.string() + " --no-verify --max-tokens 12 --ignore-eos "
                                                                   "--seed 1 --threads 1 --quiet 'a b'");
    test::expect_refused(r, {(db / "chunks.npy").string() + ": the neighbour at row ", " (or its continuation, the row after) holds token id ",
                             ", outside the model's vocabulary [0, " + std::to_string(vocabulary) + ")",
                             "(fix: retrieve from the database the model was trained with"});
    }
}

TEST_CASE("generate inputs: a journal whose weights file changed since is refused in words, not clock counts") {
    test::TempDir t("genweights");
    const std::string out = (t / "out.jsonl").string();
    const fs::path weights = t / "model.safetensors";
    test::write_text(weights, "weights");
    const auto job = [&](const nlohmann::json& w) { return nlohmann::json{{"seed", 1}, {"weights", w}}; };
    const nlohmann::json was = {{"path", weights.string()}, {"bytes", 7}, {"modified_ns", 1000}};
    {
        GenerateJournal journal(out, job(was), false, 2);
        journal.add(0, {{"id", 0}, {"prompt", "a"}});
    }
    CHECK(GenerateJournal(out, job(was), true, 2).done().size() == 1);   // the same file: resumed
    for (const nlohmann::json& now : {nlohmann::json{{"path", weights.string()}, {"bytes", 7}, {"modified_ns", 2000}},
                                      nlohmann::json{{"path", weights.string()}, {"bytes", 8}, {"modified_ns", 1000}}})
        CHECK_THROWS_WITH_AS(GenerateJournal(out, job(now), true, 2),
                             doctest::Contains(("holds prompts decoded with " + weights.string() +
                                                " as it was: the file has changed since (retrained or replaced; its size or "
                                                "modification time differ) (fix: remove " + out + ".partial")
                                                   .c_str()),
                             UserError);
    // other weights (another path) are another job, named field by field as before
    CHECK_THROWS_WITH_AS(GenerateJournal(out, job({{"path", "/elsewhere"}, {"bytes", 7}, {"modified_ns", 1000}}), true, 2),
                         doctest::Contains("another retro-generate job"), UserError);
    // a journal of before session 69 records "modified", the library clock's count: compared with the file's own
    fs::remove(out + ".partial");
    const auto clock_count = static_cast<std::int64_t>(fs::last_write_time(weights).time_since_epoch().count());
    {
        GenerateJournal journal(out, job({{"path", weights.string()}, {"bytes", 7}, {"modified", clock_count}}), false, 2);
        journal.add(0, {{"id", 0}, {"prompt", "a"}});
    }
    CHECK(GenerateJournal(out, job(was), true, 2).done().size() == 1);
    fs::remove(out + ".partial");
    {
        GenerateJournal journal(out, job({{"path", weights.string()}, {"bytes", 7}, {"modified", clock_count - 1}}), false, 2);
        journal.add(0, {{"id", 0}, {"prompt", "a"}});
    }
    CHECK_THROWS_WITH_AS(GenerateJournal(out, job(was), true, 2), doctest::Contains("the file has changed since"), UserError);
}

TEST_CASE("generate inputs: the tokenizer a database records, retrained in place, is named as changed") {
    const test::CliPipeline& p = test::bad_input_pipeline();
    test::TempDir t("gentok");
    const fs::path db = t / "db", tok = t / "tok";
    test::copy_folder(p.db, db);
    test::copy_folder(p.tok, tok);
    {   // the copy's manifest names the copied tokenizer (as a database chunked with it would)
        nlohmann::json m = nlohmann::json::parse(test::read_text(db / "manifest.json"));
        for (auto& in : m["inputs"])
            if (in["role"] == "tokenizer") in["path"] = (tok / "tok.model").string();
        test::write_text(db / "manifest.json", m.dump(2));
    }
    const test::RunResult retrained = test::run_tool("retro-tokenizer", "train " + p.corpus.string() + " --out " +
                                                                            tok.string() + " --vocab-size 310 --quiet --force");
    REQUIRE_MESSAGE(retrained.exit_code == 0, retrained.err);
    test::expect_refused(test::run_tool("retro-generate", p.run.string() + " --db " + db.string() +
                                                              " --no-retrieval --max-tokens 2 --quiet hello"),
                         {(tok / "tok.model").string() + ": has changed since the database was chunked with it (retrained or "
                                                          "replaced)",
                          "(fix: make the database again with it (retro-chunk --force), or restore the tokenizer it was made with)"});
    // given as --tokenizer, another tokenizer is named as such
    test::expect_refused(test::run_tool("retro-generate", p.run.string() + " --db " + db.string() + " --tokenizer " +
                                                              tok.string() + " --no-retrieval --max-tokens 2 --quiet hello"),
                         {"is not the tokenizer the database was chunked with", "or leave --tokenizer out"});
}

TEST_CASE("generate inputs: a batch job records its weights' modification time to the nanosecond") {
    // (the mutation campaign of session 71: the job kept whole seconds alone and no test saw it; weights rewritten at the
    // same size within the same second were then taken by --resume as unchanged, mixing two models' prompts)
    test::TempDir t("genns");
    const fs::path weights = t / "model.safetensors";
    test::write_text(weights, "weights");
    GenerateRunOptions cli;
    cli.g.run = t.path.string();
    cli.g.no_retrieval = true;
    const auto job_at = [&](long nanoseconds) {
        const struct timespec times[2] = {{1700000000, 0}, {1700000000, nanoseconds}};
        REQUIRE(::utimensat(AT_FDCWD, weights.c_str(), times, 0) == 0);
        return generate_journal_job(cli, {"a prompt"}, {nlohmann::json(0)});
    };
    const nlohmann::json whole = job_at(0), later = job_at(500000000);
    CHECK(whole["weights"]["modified_ns"] == std::int64_t(1700000000) * 1000000000);
    CHECK(later["weights"]["modified_ns"] == std::int64_t(1700000000) * 1000000000 + 500000000);
    CHECK(whole != later);
}
