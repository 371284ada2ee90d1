// retro-generate end to end on a tiny pipeline (tokenizer, chunks, bow index, neighbours, a 2-step run):
// one seed gives one text, the text streams to stdout, batch mode equals single prompts whatever the batch
// size, neighbours are shown as text or JSON lines; and bad inputs (index of another db, a db of another
// tokenizer, empty or too long prompts, p outside (0, 1]) exit 2 with one line; and retrieval from a bm25 index
// equals the BM25 oracle (test_bm25_oracle.h).
#include <doctest/doctest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/cuda_device.h"
#include "core/dtype.h"
#include "core/npy.h"
#include "core/shell_quote.h"
#include "data/chunk_db.h"
#include "text/tokenizer.h"
#include "data/neighbour_window.h"
#include "embed/embedder.h"
#include "generate/chunk_retriever.h"
#include "generate/generate_journal.h"
#include "data/synthetic_text.h"
#include "model/config.h"
#include "model/params.h"
#include "test_bm25_oracle.h"
#include "test_util.h"

using namespace retro;
namespace fs = std::filesystem;

namespace {

struct Pipeline {
    test::TempDir tmp{"gen"};
    fs::path run, index, db;
};

// corpus (24 documents of pseudo-words) -> tok (vocab 400) -> db (cs 4, seq 16) -> bow index -> knn -> run
void build(Pipeline& p, const std::string& tag, std::uint64_t seed, bool train) {
    const fs::path corpus = p.tmp / (tag + "-corpus");
    fs::create_directories(corpus);
    for (int d = 0; d < 24; d++)
        test::write_text(corpus / ("doc" + std::to_string(d) + ".txt"), synthetic_text(seed * 100 + d, 300 + 40 * d));
    const fs::path tok = p.tmp / (tag + "-tok");
    p.db = p.tmp / (tag + "-db");
    p.index = p.tmp / (tag + "-index");
    auto r = test::run_tool("retro-tokenizer", "train " + corpus.string() + " --out " + tok.string() + " --vocab-size 400 --quiet");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    r = test::run_tool("retro-chunk", corpus.string() + " --tokenizer " + tok.string() + " --out " + p.db.string() +
                                          " --chunk-size 4 --seq-len 16 --quiet");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    r = test::run_tool("retro-index", p.db.string() + " --out " + p.index.string() + " --dim 32 --quiet");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    if (!train) return;
    const fs::path knn = p.tmp / (tag + "-knn");
    r = test::run_tool("retro-knn", p.index.string() + " --db " + p.db.string() + " --out " + knn.string() + " --quiet");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    RetroConfig c = RetroConfig::load((test::source_dir() / "examples" / "configs" / "tiny.json").string());
    c.num_tokens = 400;
    c.max_seq_len = 32;
    c.save((p.tmp / "config.json").string());
    p.run = p.tmp / (tag + "-run");
    r = test::run_tool("retro-train", "--db " + p.db.string() + " --knn " + knn.string() + " --config " +
                                          (p.tmp / "config.json").string() + " --out " + p.run.string() +
                                          " --steps 2 --batch-size 2 --quiet --threads 1");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
}

std::string q(const std::string& s) { return shell_quote(s); }

bool one_line(const test::RunResult& r) { return r.err.size() > 1 && r.err.find('\n') == r.err.size() - 1; }

}  // namespace

TEST_CASE("generate: retro-generate end to end - seeds - batch mode - neighbours") {
    Pipeline p;
    build(p, "a", 1, true);
    const std::string base = p.run.string() + " --index " + p.index.string() + " --db " + p.db.string() + " --threads 1 --ignore-eos";
    const std::string prompt = synthetic_text(100, 40);   // the start of document 0
    auto a = test::run_tool("retro-generate", base + " " + q(prompt) + " --max-tokens 20 --seed 3");
    INFO(a.err);
    REQUIRE(a.exit_code == 0);
    CHECK(a.out.size() > 1);
    CHECK(a.err.find("tokens/s") != std::string::npos);
    auto again = test::run_tool("retro-generate", base + " --max-tokens 20 --seed 3", prompt + "\n");   // stdin
    CHECK(again.exit_code == 0);
    CHECK(again.out == a.out);
    auto dash = test::run_tool("retro-generate", base + " - --max-tokens 20 --seed 3", prompt + "\n");   // `-`: stdin too
    CHECK(dash.exit_code == 0);
    CHECK(dash.out == a.out);
    auto other = test::run_tool("retro-generate", base + " " + q(prompt) + " --max-tokens 20 --seed 4");
    CHECK(other.exit_code == 0);
    auto greedy1 = test::run_tool("retro-generate", base + " " + q(prompt) + " --max-tokens 12 --greedy");
    auto greedy2 = test::run_tool("retro-generate", base + " " + q(prompt) + " --max-tokens 12 --greedy --seed 99");
    CHECK(greedy1.exit_code == 0);
    CHECK(greedy1.out == greedy2.out);
    // the GPU decoder's code (generate/backend_decoder.h) on the CPU ops gives the same text; on a GPU, so does
    // --device cuda (fp32 greedy), and without one it is refused in one line
    auto dev = test::run_tool("retro-generate", base + " " + q(prompt) + " --max-tokens 12 --greedy --device host-backend");
    INFO(dev.err);
    CHECK(dev.exit_code == 0);
    CHECK(dev.out == greedy1.out);
    auto dev_sampled = test::run_tool("retro-generate", base + " " + q(prompt) + " --max-tokens 20 --seed 3 --device host-backend");
    CHECK(dev_sampled.out == a.out);
    // decode steps as captured graphs (the host backend's recorder stands in for CUDA graphs): the same text
    auto graphed = test::run_tool("retro-generate", base + " " + q(prompt) + " --max-tokens 20 --seed 3 --device host-backend --cuda-graphs");
    INFO(graphed.err);
    CHECK(graphed.out == a.out);
    // graphs are the backend devices' default since session 20: --no-cuda-graphs launches each op, the same text
    auto eager = test::run_tool("retro-generate", base + " " + q(prompt) + " --max-tokens 20 --seed 3 --device host-backend --no-cuda-graphs");
    INFO(eager.err);
    CHECK(eager.out == a.out);
    auto both = test::run_tool("retro-generate", base + " " + q(prompt) + " --max-tokens 4 --device host-backend --cuda-graphs --no-cuda-graphs");
    CHECK(both.exit_code == 2);   // CLI11's usage error: "--cuda-graphs excludes --no-cuda-graphs"
    CHECK(both.err.find("--no-cuda-graphs") != std::string::npos);
    auto no_gpu_path = test::run_tool("retro-generate", base + " " + q(prompt) + " --max-tokens 4 --cuda-graphs");
    CHECK(no_gpu_path.exit_code == 2);
    CHECK(one_line(no_gpu_path));
    CHECK(no_gpu_path.err.find("--cuda-graphs") != std::string::npos);
    auto gpu = test::run_tool("retro-generate", base + " " + q(prompt) + " --max-tokens 12 --greedy --device cuda");
    if (cuda_device_count() > 0) {
        INFO(gpu.err);
        CHECK(gpu.exit_code == 0);
        CHECK(gpu.out == greedy1.out);
    } else {
        CHECK(gpu.exit_code == 2);
        CHECK(one_line(gpu));
        CHECK(gpu.err.find("--device") != std::string::npos);
        MESSAGE("skipped: no CUDA device (retro-generate --device cuda refused in one line)");
    }

    // neighbours as JSON lines on stderr: one per finished chunk, k ids each, texts from the db
    auto shown = test::run_tool("retro-generate", base + " " + q(prompt) + " --max-tokens 20 --seed 3 --show-neighbours --json");
    REQUIRE(shown.exit_code == 0);
    CHECK(shown.out == a.out);   // showing neighbours does not change the text
    // oracle: the query chunk embedded by the index's embedder, scored against every embedding in the index
    const auto im = nlohmann::json::parse(test::read_text(p.index / "manifest.json"));
    const auto embedder = embedder_from_json(im.at("embedder"), p.index.string(), nullptr);
    const NpyArray emb((p.index / "embeddings.npy").string());
    REQUIRE(emb.dtype() == DType::F32);
    int lines = 0;
    std::istringstream err(shown.err);
    for (std::string line; std::getline(err, line);) {
        if (line.empty() || line[0] != '{') continue;
        auto j = nlohmann::json::parse(line);
        CHECK(j.at("ids").size() == 2);
        CHECK(j.at("texts").size() == 2);
        CHECK(j.at("chunk").get<int>() == lines);
        const auto query = j.at("query").get<std::vector<std::int32_t>>();
        REQUIRE(query.size() == 4);
        std::vector<float> qv(static_cast<std::size_t>(embedder->dim()));
        embedder->embed(query.data(), 1, 4, qv.data());
        std::vector<std::pair<float, std::int64_t>> scored;
        for (std::int64_t r = 0; r < emb.dim(0); r++) {
            float dot = 0;
            for (int d = 0; d < embedder->dim(); d++) dot += qv[d] * emb.data<float>()[r * emb.dim(1) + d];
            scored.push_back({-dot, r});
        }
        std::vector<float> oracle(scored.size());
        for (const auto& sc : scored) oracle[static_cast<std::size_t>(sc.second)] = -sc.first;
        std::sort(scored.begin(), scored.end());
        const auto ids = j.at("ids").get<std::vector<std::int64_t>>();
        const auto scores = j.at("scores").get<std::vector<float>>();
        for (int n = 0; n < 2; n++) {   // the n-th best score, by an id that really scores that (ties may swap ids)
            CHECK(scores[n] == doctest::Approx(-scored[n].first).epsilon(1e-4));
            REQUIRE(ids[n] >= 0);
            CHECK(oracle[static_cast<std::size_t>(ids[n])] == doctest::Approx(-scored[n].first).epsilon(1e-4));
        }
        CHECK(ids[0] != ids[1]);
        lines++;
    }
    CHECK(lines >= 5);   // bos + 40 bytes of text fill at least 3 chunks of 4, and 20 more tokens 5 more
    auto text = test::run_tool("retro-generate", base + " " + q(prompt) + " --max-tokens 8 --show-neighbours");
    CHECK(text.err.find("retrieved for chunk 0") != std::string::npos);

    // batch mode: the same texts as one prompt at a time, for any batch size
    const std::string p2 = synthetic_text(105, 30);
    test::write_text(p.tmp / "prompts.jsonl", nlohmann::json(prompt).dump() + "\n" +
                                                  nlohmann::json{{"prompt", p2}, {"id", "second"}}.dump() + "\n" +
                                                  nlohmann::json{{"prompt", prompt}}.dump() + "\n");
    std::vector<std::string> first_sizes;
    for (int bs : {1, 2, 3}) {
        const fs::path out = p.tmp / ("out" + std::to_string(bs) + ".jsonl");
        auto b = test::run_tool("retro-generate", base + " --prompts " + (p.tmp / "prompts.jsonl").string() + " --output " +
                                                      out.string() + " --max-tokens 20 --seed 3 --batch-size " + std::to_string(bs));
        INFO(b.err);
        REQUIRE(b.exit_code == 0);
        std::istringstream in(test::read_text(out));
        std::vector<std::string> completions;
        std::vector<nlohmann::json> rows;
        for (std::string line; std::getline(in, line);) rows.push_back(nlohmann::json::parse(line));
        REQUIRE(rows.size() == 3);
        for (const auto& row : rows) completions.push_back(row.at("completion").get<std::string>());
        CHECK(completions[0] + "\n" == a.out);   // prompt 0 of a batch = the single prompt, same seed
        // prompts 0 and 2 are the same text: each prompt's own stream, seeded by its index, draws other tokens (a
        // mutant giving every prompt the first prompt's stream survived the rest, session 61)
        CHECK(completions[2] != completions[0]);
        CHECK(rows[1].at("id") == "second");
        CHECK(rows[2].at("id") == 2);
        CHECK(rows[0].at("neighbours").size() >= 3);
        if (bs == 1) first_sizes = completions;
        CHECK(completions == first_sizes);   // the batch size changes nothing: not the text, nor the neighbours' scores
        CHECK(test::read_text(out) == test::read_text(p.tmp / "out1.jsonl"));
    }
    {   // --show-neighbours --json in batch mode: each line names its prompt by index and by the id its result has
        auto b = test::run_tool("retro-generate", base + " --prompts " + (p.tmp / "prompts.jsonl").string() +
                                                      " --output " + (p.tmp / "out-shown.jsonl").string() +
                                                      " --max-tokens 8 --seed 3 --batch-size 2 --show-neighbours --json");
        INFO(b.err);
        REQUIRE(b.exit_code == 0);
        const std::vector<nlohmann::json> want_ids = {0, "second", 2};
        std::set<std::int64_t> seen;
        std::istringstream err(b.err);
        for (std::string line; std::getline(err, line);) {
            if (line.empty() || line[0] != '{') continue;
            const auto j = nlohmann::json::parse(line);
            const auto prompt = j.at("prompt").get<std::int64_t>();
            REQUIRE(prompt >= 0);
            REQUIRE(prompt < 3);
            CHECK(j.at("id") == want_ids[static_cast<std::size_t>(prompt)]);
            seen.insert(prompt);
        }
        CHECK(seen.size() == 3);
    }
    {   // nor does the thread count (the later --threads wins)
        const fs::path out = p.tmp / "out-threads.jsonl";
        auto b = test::run_tool("retro-generate", base + " --prompts " + (p.tmp / "prompts.jsonl").string() + " --output " +
                                                      out.string() + " --max-tokens 20 --seed 3 --batch-size 2 --threads 2");
        INFO(b.err);
        REQUIRE(b.exit_code == 0);
        CHECK(test::read_text(out) == test::read_text(p.tmp / "out1.jsonl"));
    }

    // a pipe: prompts from standard input, the lines streamed to standard output in input order (no journal)
    {
        auto piped = test::run_tool("retro-generate", base + " --prompts - --output - --max-tokens 20 --seed 3 --batch-size 2",
                                    test::read_text(p.tmp / "prompts.jsonl"));
        INFO(piped.err);
        REQUIRE(piped.exit_code == 0);
        CHECK(piped.out == test::read_text(p.tmp / "out1.jsonl"));
        auto no_resume = test::run_tool("retro-generate", base + " --prompts - --output - --resume", "\"x\"\n");
        CHECK(no_resume.exit_code == 2);
        CHECK(no_resume.err.find("--resume") != std::string::npos);
    }

    // an empty prompt late in the file is refused before any prompt is decoded: no journal, no output (it used to
    // end the run part way, its finished prompts kept under a fingerprint the corrected file no longer has)
    {
        test::write_text(p.tmp / "late.jsonl", test::read_text(p.tmp / "prompts.jsonl") + "\"\"\n");
        auto late = test::run_tool("retro-generate", base + " --prompts " + (p.tmp / "late.jsonl").string() + " --output " +
                                                         (p.tmp / "late-out.jsonl").string() + " --max-tokens 20 --batch-size 1");
        CHECK(late.exit_code == 2);
        CHECK(one_line(late));
        CHECK(late.err.find("late.jsonl:4: is empty") != std::string::npos);
        CHECK_FALSE(fs::exists(p.tmp / "late-out.jsonl.partial"));
        CHECK_FALSE(fs::exists(p.tmp / "late-out.jsonl"));
        // a prompt longer than any max_seq_len-token text is refused by its size, before sentencepiece's lattice over
        // it (10 MB of text took 2.5 GB and 4 s before its token count refused it)
        const std::string huge((std::size_t(1) << 20) + 1, 'x');
        auto big = test::run_tool("retro-generate", base + " --max-tokens 2", huge);
        CHECK(big.exit_code == 2);
        CHECK(one_line(big));
        CHECK(big.err.find("prompt: is 1048577 bytes, more than retro-generate tokenises for a model of max_seq_len") != std::string::npos);
    }

    // stopped after two prompts (--stop-after, as if killed): OUT.partial keeps them; without --resume, or with another
    // seed, it is refused in one line; a last line cut short by a kill is dropped; --resume decodes the third with its
    // own random stream and writes the uninterrupted run's bytes, then removes the journal
    {
        const fs::path out = p.tmp / "resumed.jsonl", journal = p.tmp / "resumed.jsonl.partial";
        const std::string cmd = " --prompts " + (p.tmp / "prompts.jsonl").string() + " --output " + out.string() +
                                " --max-tokens 20 --batch-size 2";
        auto k = test::run_tool("retro-generate", base + cmd + " --seed 3 --stop-after 2");
        INFO(k.err);
        REQUIRE(k.exit_code == 0);
        CHECK_FALSE(fs::exists(out));
        REQUIRE(fs::exists(journal));
        auto again = test::run_tool("retro-generate", base + cmd + " --seed 3");
        CHECK(again.exit_code == 2);
        CHECK(one_line(again));
        CHECK(again.err.find("--resume") != std::string::npos);
        auto other = test::run_tool("retro-generate", base + cmd + " --seed 4 --resume");
        CHECK(other.exit_code == 2);
        CHECK(one_line(other));
        CHECK(other.err.find("seed is 4, the journal's 3") != std::string::npos);
        test::write_text(journal, test::read_text(journal) + "{\"index\": 2, \"resu");
        // (an option given twice takes its last value, as argparse does: cli/tool_main.cpp)
        auto r = test::run_tool("retro-generate", base + cmd + " --seed 4 --seed 3 --resume --batch-size 3");
        INFO(r.err);
        REQUIRE(r.exit_code == 0);
        CHECK(r.err.find("holds 2 of 3 prompts") != std::string::npos);
        CHECK(test::read_text(out) == test::read_text(p.tmp / "out1.jsonl"));
        CHECK_FALSE(fs::exists(journal));
        // --resume of the finished file: nothing to do (a retry loop pays nothing)
        auto again2 = test::run_tool("retro-generate", base + cmd + " --seed 3 --resume");
        CHECK(again2.exit_code == 0);
        CHECK(again2.err.find("nothing to resume") != std::string::npos);
        CHECK(test::read_text(out) == test::read_text(p.tmp / "out1.jsonl"));
        // without --resume the finished file is kept: refused in one line; --force replaces it
        const std::string finished = test::read_text(out);
        auto kept = test::run_tool("retro-generate", base + cmd + " --seed 4");
        CHECK(kept.exit_code == 2);
        CHECK(one_line(kept));
        CHECK(kept.err.find("resumed.jsonl: exists") != std::string::npos);
        CHECK(kept.err.find("--force") != std::string::npos);
        CHECK(test::read_text(out) == finished);
        // (another seed: the file must be the new run's, as the same job streamed to standard output writes it)
        auto forced = test::run_tool("retro-generate", base + cmd + " --seed 4 --force");
        INFO(forced.err);
        CHECK(forced.exit_code == 0);
        auto seed4 = test::run_tool("retro-generate", base + " --prompts " + (p.tmp / "prompts.jsonl").string() +
                                                          " --output - --max-tokens 20 --batch-size 2 --seed 4");
        REQUIRE(seed4.exit_code == 0);
        CHECK(test::read_text(out) == seed4.out);
        CHECK(test::read_text(out) != finished);
    }

    // a damaged line inside the journal (not a last line cut short) costs only its prompt: --resume drops it with a
    // warning naming the line, decodes that prompt again and writes the uninterrupted run's bytes
    {
        const fs::path out = p.tmp / "damaged.jsonl", journal = p.tmp / "damaged.jsonl.partial";
        const std::string cmd = " --prompts " + (p.tmp / "prompts.jsonl").string() + " --output " + out.string() +
                                " --max-tokens 20 --batch-size 1 --seed 3";
        auto k = test::run_tool("retro-generate", base + cmd + " --stop-after 2");
        REQUIRE(k.exit_code == 0);
        std::istringstream in(test::read_text(journal));
        std::vector<std::string> lines;
        for (std::string line; std::getline(in, line);) lines.push_back(line);
        REQUIRE(lines.size() == 3);   // the job, two prompts
        const std::vector<std::string> kept = lines;
        lines[1] = lines[1].substr(0, lines[1].size() / 2) + "#" + lines[1].substr(lines[1].size() / 2);
        test::write_text(journal, lines[0] + "\n" + lines[1] + "\n" + lines[2] + "\n" + lines[2] + "\n");
        auto r = test::run_tool("retro-generate", base + cmd + " --resume");
        INFO(r.err);
        REQUIRE(r.exit_code == 0);
        CHECK(r.err.find("damaged.jsonl.partial: lines 2, 4 are damaged") != std::string::npos);
        CHECK(r.err.find("holds 1 of 3 prompts") != std::string::npos);
        CHECK(test::read_text(out) == test::read_text(p.tmp / "out1.jsonl"));
        CHECK_FALSE(fs::exists(journal));
        // damage that leaves valid JSON (a letter of a completion changed) is caught by the line's xxh3; and a journal
        // whose one finished line is damaged is said, not dropped silently
        fs::remove(out);
        std::size_t at = kept[2].find("\"completion\":\"") + 14;
        REQUIRE(at > 14);
        while (at < kept[2].size() && (!std::isalpha(static_cast<unsigned char>(kept[2][at])) || kept[2][at - 1] == '\\'))
            at++;   // an ASCII letter, not an escape's
        REQUIRE(at < kept[2].size());
        std::string valid = kept[2];
        valid[at] = valid[at] == 'a' ? 'b' : 'a';
        REQUIRE(nlohmann::json::parse(valid, nullptr, false).is_object());
        test::write_text(journal, kept[0] + "\n" + kept[1] + "\n" + valid + "\n");
        r = test::run_tool("retro-generate", base + cmd + " --resume");
        REQUIRE(r.exit_code == 0);
        CHECK(r.err.find("damaged.jsonl.partial: line 3 is damaged") != std::string::npos);
        CHECK(test::read_text(out) == test::read_text(p.tmp / "out1.jsonl"));
        fs::remove(out);
        test::write_text(journal, kept[0] + "\n" + valid + "\n");
        r = test::run_tool("retro-generate", base + cmd + " --resume");
        REQUIRE(r.exit_code == 0);
        CHECK(r.err.find("its one finished prompt's line is damaged: every prompt is decoded again") != std::string::npos);
        CHECK(test::read_text(out) == test::read_text(p.tmp / "out1.jsonl"));
    }

    // two prompts with one id cannot be joined to their results: refused, naming both lines (a line without "id"
    // takes its position)
    {
        test::write_text(p.tmp / "dup.jsonl", "\"a b\"\n" + nlohmann::json{{"prompt", "c d"}, {"id", 0}}.dump() + "\n");
        auto d = test::run_tool("retro-generate", base + " --prompts " + (p.tmp / "dup.jsonl").string() + " --output " +
                                                      (p.tmp / "dup-out.jsonl").string() + " --max-tokens 4");
        CHECK(d.exit_code == 2);
        CHECK(one_line(d));
        CHECK(d.err.find("dup.jsonl:2: has the id 0, as " + (p.tmp / "dup.jsonl").string() + ":1 has") != std::string::npos);
        // a batch option on a single prompt is named, not silently ignored
        auto w = test::run_tool("retro-generate", base + " " + q(prompt) + " --max-tokens 4 --batch-size 4");
        CHECK(w.exit_code == 0);
        CHECK(w.err.find("--batch-size has no effect on a single prompt") != std::string::npos);
    }

    // standard output that cannot be written stops the run at the first write, named, before any summary
    if (fs::exists("/dev/full")) {
        auto full = test::run_command("(" + test::tool_path("retro-generate") + " " + base + " " + q(prompt) +
                                      " --max-tokens 20 > /dev/full)");
        CHECK(full.exit_code == 2);
        CHECK(one_line(full));
        CHECK(full.err.find("standard output: write failed") != std::string::npos);
        CHECK(full.err.find("tokens/s") == std::string::npos);
    } else {
        MESSAGE("skipped: no /dev/full");
    }

    // an --output that is not a file, or lies in an input folder, is refused before any decoding
    {
        const std::string prompts = " --prompts " + (p.tmp / "prompts.jsonl").string() + " --max-tokens 4 --output ";
        fs::create_directories(p.tmp / "a-folder");
        fs::create_symlink(p.tmp / "out1.jsonl", p.tmp / "link.jsonl");
        for (const auto& [output, says] : std::vector<std::pair<fs::path, std::string>>{
                 {p.tmp / "a-folder", "is a folder"},
                 {p.tmp / "link.jsonl", "symbolic link"},
                 {"/dev/null", "not a regular file"},
                 {p.run / "model.safetensors", "is inside the run"},
                 {p.db / "out.jsonl", "is inside --db"}}) {
            auto r = test::run_tool("retro-generate", base + prompts + output.string());
            INFO(r.err);
            CHECK(r.exit_code == 2);
            CHECK(one_line(r));
            CHECK(r.err.find(says) != std::string::npos);
        }
        CHECK(fs::is_symlink(p.tmp / "link.jsonl"));
        CHECK_FALSE(fs::exists(p.db / "out.jsonl.partial"));
    }

    // without retrieval: runs, and needs no index
    auto plain = test::run_tool("retro-generate", p.run.string() + " --db " + p.db.string() + " " + q(prompt) +
                                                      " --max-tokens 10 --seed 3 --no-retrieval --threads 1");
    CHECK(plain.exit_code == 0);
    CHECK(plain.err.find("no retrieval") != std::string::npos);
}

TEST_CASE("generate: retro-generate retrieves from a bm25 index by the chunk's tokens - the oracle's neighbours") {
    Pipeline p;
    build(p, "b", 2, true);
    const fs::path bm25 = p.tmp / "bm25";
    auto r = test::run_tool("retro-index", p.db.string() + " --out " + bm25.string() + " --kind bm25 --quiet");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    const std::string prompt = synthetic_text(200, 40);
    auto shown = test::run_tool("retro-generate", p.run.string() + " --index " + bm25.string() + " --db " + p.db.string() +
                                                      " --threads 1 --ignore-eos " + q(prompt) +
                                                      " --max-tokens 12 --seed 3 --show-neighbours --json");
    INFO(shown.err);
    REQUIRE(shown.exit_code == 0);
    const ChunkDb db(p.db.string());
    const test::Bm25Oracle oracle(db, {});
    // what chunk u is searched with: its own tokens, bos + the prompt's ids [u cs, (u + 1) cs) (a mutant searching
    // with chunk u - 1's tokens passed the oracle below, which takes the printed query: session 61)
    std::vector<int> prompt_ids = {TOKEN_BOS};
    for (int id : Tokenizer(db.tokenizer_checked("", "--tokenizer")).encode(prompt)) prompt_ids.push_back(id);
    const int cs = db.chunk_size();
    int prompt_chunks = 0;
    int lines = 0;
    std::istringstream err(shown.err);
    for (std::string line; std::getline(err, line);) {
        if (line.empty() || line[0] != '{') continue;
        auto j = nlohmann::json::parse(line);
        const auto query = j.at("query").get<std::vector<std::int32_t>>();
        const auto u = j.at("chunk").get<std::int64_t>();
        if ((u + 1) * cs <= static_cast<std::int64_t>(prompt_ids.size())) {
            CAPTURE(u);
            CHECK(query == std::vector<std::int32_t>(prompt_ids.begin() + u * cs, prompt_ids.begin() + (u + 1) * cs));
            prompt_chunks++;
        }
        const auto want = oracle.top(test::Bm25Oracle::counts(query.data(), static_cast<int>(query.size())), 2, nullptr, -1);
        const auto ids = j.at("ids").get<std::vector<std::int64_t>>();
        std::vector<float> scores;   // (an empty slot's -inf is written as null)
        for (const auto& x : j.at("scores")) scores.push_back(x.is_null() ? -std::numeric_limits<float>::infinity() : x.get<float>());
        REQUIRE(ids.size() == 2);
        for (std::size_t n = 0; n < 2; n++) {
            if (n >= want.size()) {
                CHECK(ids[n] == -1);
                continue;
            }
            CHECK(ids[n] == want[n].second);
            CHECK(scores[n] == doctest::Approx(want[n].first).epsilon(1e-5));
        }
        lines++;
    }
    CHECK(lines >= 5);
    CHECK(prompt_chunks >= 2);
}

TEST_CASE("generate: with neighbour_alignment match the retriever reads what training reads") {
    Pipeline p;
    build(p, "m", 3, false);
    const ChunkDb db(p.db.string());
    const int cs = db.chunk_size();
    RetrieverOptions plain_o;
    plain_o.index = p.index.string();
    plain_o.db = p.db.string();
    plain_o.k = 3;
    RetrieverOptions match_o = plain_o;
    match_o.alignment = NeighbourAlignment::match;
    match_o.min_match = 2;
    const ChunkRetriever plain(plain_o, nullptr), matched(match_o, nullptr);
    const std::int64_t n = std::min<std::int64_t>(db.chunk_count(), 60);
    std::vector<std::int32_t> chunks;
    db.rows(0, n, chunks);
    std::vector<std::int32_t> got(static_cast<std::size_t>(n * 3 * 2 * cs)), want(static_cast<std::size_t>(2 * cs));
    std::vector<Retrieval> found_plain, found;
    plain.retrieve(chunks.data(), n, got.data(), found_plain);
    matched.retrieve(chunks.data(), n, got.data(), found);
    int shifted = 0, dropped = 0;
    for (std::int64_t i = 0; i < n; i++)
        for (int j = 0; j < 3; j++) {
            const std::int64_t id = found_plain[i].ids[j];   // the search is the same; the reading differs
            const bool read = id >= 0 && neighbour_read(db, NeighbourAlignment::match, 2, chunks.data() + i * cs, id, 0, want.data());
            if (!read) std::fill(want.begin(), want.end(), 0);
            CHECK(found[i].ids[j] == (read ? id : -1));
            CHECK(std::equal(want.begin(), want.end(), got.begin() + (i * 3 + j) * 2 * cs));
            dropped += id >= 0 && !read;
            shifted += read && neighbour_match(db, chunks.data() + i * cs, id, 0).offset != 0;
        }
    CHECK(dropped > 0);
    CHECK(shifted > 0);
}

TEST_CASE("generate: runs it should not take at their word - a smaller tokenizer, no retrieval, an endless stdin") {
    // found by a helper's exploratory pass (session 51); each refused or handled before this, as the comments say
    Pipeline p;
    build(p, "a", 1, true);
    const fs::path knn = p.tmp / "a-knn";
    // a model whose vocabulary (1,024) is larger than its tokenizer's (400), as on a small corpus: an untrained model
    // draws ids past 400 more often than not, which the tokenizer cannot decode (before: "token id 517 is outside
    // the vocabulary", exit 2, most seeds); only the tokenizer's ids are drawn now, greedy too
    RetroConfig c = RetroConfig::load((p.tmp / "config.json").string());
    c.num_tokens = 1024;
    c.save((p.tmp / "wide.json").string());
    const fs::path wide = p.tmp / "wide-run";
    auto r = test::run_tool("retro-train", "--db " + p.db.string() + " --knn " + knn.string() + " --config " +
                                               (p.tmp / "wide.json").string() + " --out " + wide.string() +
                                               " --steps 2 --batch-size 2 --quiet --threads 1");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    for (const std::string flags : {"--seed 1", "--seed 2", "--seed 3 --temperature 3", "--greedy"}) {
        CAPTURE(flags);
        r = test::run_tool("retro-generate", wide.string() + " --index " + p.index.string() + " --db " + p.db.string() +
                                                 " --max-tokens 24 --quiet " + flags + " hello");
        CHECK_MESSAGE(r.exit_code == 0, r.err);
    }
    // eval of the same run: bits per byte from the tokenizer's 400 pieces, the ids past them at 0 bytes (before: no
    // bpb, silently, for a tokenizer smaller than num_tokens)
    r = test::run_tool("retro-train", "eval --run " + wide.string() + " --db " + p.db.string() + " --knn " + knn.string() +
                                          " --max-batches 1 --quiet --json");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    {
        const auto j = nlohmann::json::parse(r.out);
        INFO(r.out);
        CHECK(j.value("bytes", nlohmann::json()).is_number());
        REQUIRE(j.contains("filters"));
        for (const auto& f : j["filters"])
            for (const auto& m : f["modes"]) CHECK(m.value("bpb", nlohmann::json()).is_number());
    }
    // a config whose pad_id is not the database's (before: trained, its pads learnt as text and id 5 masked)
    RetroConfig padded = c;
    padded.num_tokens = 400;
    padded.pad_id = 5;
    padded.save((p.tmp / "pad5.json").string());
    r = test::run_tool("retro-train", "--db " + p.db.string() + " --knn " + knn.string() + " --config " +
                                          (p.tmp / "pad5.json").string() + " --out " + (p.tmp / "pad5-run").string() +
                                          " --steps 2 --batch-size 2 --quiet --threads 1");
    CHECK(r.exit_code == 2);
    CHECK(one_line(r));
    CHECK(r.err.find("pads with id 0; the model config's pad_id is 5") != std::string::npos);
    CHECK_FALSE(fs::exists(p.tmp / "pad5-run" / "manifest.json"));
    // a run trained with --no-retrieval: its CCA layers and encoder never learnt (before: retrieval through them,
    // silently); generating without retrieval still runs
    const fs::path plain = p.tmp / "plain-run";
    r = test::run_tool("retro-train", "--db " + p.db.string() + " --knn " + knn.string() + " --config " +
                                          (p.tmp / "config.json").string() + " --out " + plain.string() +
                                          " --steps 2 --batch-size 2 --quiet --threads 1 --no-retrieval");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    r = test::run_tool("retro-generate", plain.string() + " --index " + p.index.string() + " --db " + p.db.string() +
                                             " --quiet hello");
    CHECK(r.exit_code == 2);
    CHECK(one_line(r));
    CHECK(r.err.find("was trained with --no-retrieval") != std::string::npos);
    r = test::run_tool("retro-generate", plain.string() + " --db " + p.db.string() + " --no-retrieval --quiet hello");
    CHECK_MESSAGE(r.exit_code == 0, r.err);
    // weights from outside RetroKit (an RP user's: a folder of config.json alone, the weights file elsewhere): they
    // run, with one warning that nothing records the ids they were trained on (session 61: an RP model trained on
    // bert-base-cased ids gave noise without a word); a RetroKit run gets no such warning
    {
        const fs::path outside = p.tmp / "outside-run", weights = p.tmp / "outside.safetensors";
        fs::create_directories(outside);
        fs::copy_file(wide / "config.json", outside / "config.json");
        fs::copy_file(wide / "model.safetensors", weights);
        const std::string says = "records no training database or tokenizer (weights from outside RetroKit)";
        r = test::run_tool("retro-generate", outside.string() + " --checkpoint " + weights.string() + " --db " +
                                                 p.db.string() + " --no-retrieval --max-tokens 4 hello");
        CHECK_MESSAGE(r.exit_code == 0, r.err);
        CHECK(r.err.find(outside.string() + ": " + says) == std::string::npos);   // (a warning, not a refusal's form)
        CHECK(r.err.find(says) != std::string::npos);
        CHECK(r.err.find("(its 400 pieces are not the model's num_tokens 1024)") != std::string::npos);
        r = test::run_tool("retro-generate", wide.string() + " --db " + p.db.string() + " --no-retrieval --max-tokens 4 hello");
        CHECK_MESSAGE(r.exit_code == 0, r.err);
        CHECK(r.err.find(says) == std::string::npos);
        // eval: the same warning, and the held-out share it masks said with where it came from
        r = test::run_tool("retro-train", "eval " + outside.string() + " --weights " + weights.string() + " --db " +
                                              p.db.string() + " --knn " + knn.string() + " --max-batches 1 --split train");
        CHECK_MESSAGE(r.exit_code == 0, r.err);
        CHECK(r.err.find(says) != std::string::npos);
        CHECK(r.err.find("(its 400 pieces are not the model's num_tokens 1024)") != std::string::npos);
        CHECK(r.err.find("held out: 0.05 of the documents (" + outside.string() + " records none: the default, a fixed "
                         "hash): on any split a neighbour inside them reads as none") != std::string::npos);
        r = test::run_tool("retro-train", "eval " + outside.string() + " --weights " + weights.string() + " --db " +
                                              p.db.string() + " --knn " + knn.string() + " --max-batches 1 --split all");
        CHECK_MESSAGE(r.exit_code == 0, r.err);
        CHECK(r.err.find("held out:") == std::string::npos);
    }
    // a prompt on stdin that does not end (before: read into memory until it ran out)
    // (in a shell of its own: run_command gives the command line its own standard input)
    r = test::run_command("sh -c " + q("head -c 70000000 /dev/zero | " + test::tool_path("retro-generate") + " " +
                                       p.run.string() + " --db " + p.db.string() + " --no-retrieval --quiet"));
    INFO(r.err);
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("standard input: holds more than 64 MiB") != std::string::npos);
    // standard input closed, or a folder: named (it said "prompt: is empty", or read nothing)
    for (const auto& [redirect, says] : std::vector<std::pair<std::string, std::string>>{
             {" <&-", "standard input: is closed"}, {" < /tmp", "standard input: cannot be read"}}) {
        r = test::run_command("sh -c " + q(test::tool_path("retro-generate") + " " + p.run.string() + " --db " + p.db.string() +
                                           " --no-retrieval --quiet" + redirect));
        CHECK(r.exit_code == 2);
        CHECK_MESSAGE(r.err.find(says) != std::string::npos, r.err);
    }
    // weights that load (finite) but give infinite logits, as a diverged run's can: refused naming the weights, greedy
    // too (before: token id -1 blamed on the tokenizer, or greedy text of whatever the first infinity was)
    {
        const RetroConfig rc = RetroConfig::load((p.run / "config.json").string());
        const ParamLayout layout(rc);
        std::vector<float> w;
        params_load((p.run / "model.safetensors").string(), w, layout, rc);
        const ParamEntry& emb = layout.at("token_emb.weight");
        std::fill(w.begin() + emb.offset, w.begin() + emb.offset + emb.numel, 3e38f);
        const std::string huge = (p.tmp / "huge.safetensors").string();
        params_save(huge, w, layout, rc);
        // (--device host-backend: the GPU decoder's code, whose draw is NnBackend::sample_rows; on a GPU the CUDA
        // kernel's -1 for such a row is held to this in tests/test_nn_sample_host.cpp)
        for (const std::string flags : {"", " --greedy", " --device host-backend", " --device host-backend --greedy"}) {
            r = test::run_tool("retro-generate", p.run.string() + " --db " + p.db.string() + " --no-retrieval --quiet " +
                                                     "--checkpoint " + huge + flags + " hello");
            INFO(r.err);
            CHECK(r.exit_code == 2);
            CHECK(one_line(r));
            CHECK(r.err.find(huge + ": gives logits that are not finite") != std::string::npos);
        }
    }
    // a temperature below which the draw is the argmax up to rounding, and overflows for tiny ones (before: 1e-320
    // drew id -1)
    r = test::run_tool("retro-generate", p.run.string() + " --db " + p.db.string() + " --no-retrieval --quiet "
                                         "--temperature 1e-320 hello");
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("--temperature") != std::string::npos);
    // the tokenizer moved after chunking: named, with the way out (before: "cannot open: No such file or directory")
    fs::rename(p.tmp / "a-tok", p.tmp / "a-tok-moved");
    r = test::run_tool("retro-generate", p.run.string() + " --db " + p.db.string() + " --no-retrieval --quiet hello");
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("has moved or was removed (fix: pass --tokenizer") != std::string::npos);
    r = test::run_tool("retro-generate", p.run.string() + " --db " + p.db.string() + " --no-retrieval --quiet --tokenizer " +
                                             (p.tmp / "a-tok-moved").string() + " hello");
    CHECK_MESSAGE(r.exit_code == 0, r.err);
}

TEST_CASE("generate: bad input exits 2 with one line") {
    Pipeline p;
    build(p, "a", 1, true);
    Pipeline o;
    build(o, "b", 2, false);   // another corpus and tokenizer
    const std::string base = p.run.string() + " --index " + p.index.string() + " --db " + p.db.string() + " --quiet";
    auto expect2 = [](const test::RunResult& r, const std::string& needle) {
        INFO(r.err);
        CHECK(r.exit_code == 2);
        CHECK(one_line(r));
        CHECK(r.err.find(needle) != std::string::npos);
    };
    expect2(test::run_tool("retro-generate", base + " ''"), "empty");
    expect2(test::run_tool("retro-generate", base, ""), "empty");
    expect2(test::run_tool("retro-generate", base + " " + q(synthetic_text(7, 400))), "max_seq_len");
    expect2(test::run_tool("retro-generate", base + " hello --top-p 0"), "--top-p");
    expect2(test::run_tool("retro-generate", base + " hello --top-p 1.5"), "--top-p");
    expect2(test::run_tool("retro-generate", base + " hello --temperature 0"), "--temperature");
    // an index built from another database
    expect2(test::run_tool("retro-generate", p.run.string() + " --index " + o.index.string() + " --db " + p.db.string() + " hello"),
            "fingerprint");
    // a database of another tokenizer than the run's
    expect2(test::run_tool("retro-generate", p.run.string() + " --index " + o.index.string() + " --db " + o.db.string() + " hello"),
            "tokenizer");
    // not a run
    expect2(test::run_tool("retro-generate", p.db.string() + " --index " + p.index.string() + " --db " + p.db.string() + " hello"),
            "config.json");
    // (retrieval without --index takes the index the run's neighbours were searched in: test_bad_input_generate.cpp)
    // batch file with a bad line
    test::write_text(p.tmp / "bad.jsonl", "\"ok\"\n{\"nope\": 1}\n");
    expect2(test::run_tool("retro-generate", base + " --prompts " + (p.tmp / "bad.jsonl").string() + " --output " +
                                                 (p.tmp / "x.jsonl").string()),
            "bad.jsonl:2");
    CHECK_FALSE(fs::exists(p.tmp / "x.jsonl"));
}

TEST_CASE("generate: a checkpoint held to its own records - outputs over inputs - closed stdout - ids kept as written") {
    // found by a helper's exploratory pass (session 53)
    Pipeline p;
    build(p, "a", 1, true);
    const fs::path knn = p.tmp / "a-knn";
    const std::string base = p.run.string() + " --index " + p.index.string() + " --db " + p.db.string();
    auto expect2 = [](const test::RunResult& r, const std::string& needle) {
        INFO(r.err);
        CHECK(r.exit_code == 2);
        CHECK(one_line(r));
        CHECK(r.err.find(needle) != std::string::npos);
    };
    // --checkpoint of a run trained without retrieval, used with retrieval (the run folder itself was refused)
    const fs::path nr = p.tmp / "nr-run";
    REQUIRE(test::run_tool("retro-train", "--db " + p.db.string() + " --config " + (p.tmp / "config.json").string() + " --out " +
                                              nr.string() + " --steps 2 --batch-size 2 --quiet --threads 1 --no-retrieval --checkpoint-every 1")
                .exit_code == 0);
    for (const fs::path& ck : {nr / "checkpoints" / "step_00000002", nr / "model.safetensors"}) {
        CAPTURE(ck);
        expect2(test::run_tool("retro-generate", base + " hello --quiet --checkpoint " + ck.string()), "was trained with --no-retrieval");
    }
    CHECK(test::run_tool("retro-generate", base + " hello --quiet --no-retrieval --checkpoint " +
                                               (nr / "checkpoints" / "step_00000002").string()).exit_code == 0);
    // a checkpoint whose state.json records another tokenizer than the database's
    const fs::path ck = p.tmp / "ck";
    fs::copy(p.run / "checkpoints" / "step_00000002", ck, fs::copy_options::recursive);
    nlohmann::json st = nlohmann::json::parse(test::read_text(ck / "state.json"));
    st["tokenizer_fingerprint"] = "0123456789abcdef";
    test::write_text(ck / "state.json", st.dump(2));
    expect2(test::run_tool("retro-generate", base + " hello --quiet --no-verify --checkpoint " + ck.string()),
            "was trained on the ids of another tokenizer");
    // a checkpoint's weights named as a file are held to its state.json's fingerprints, as its folder is (unchecked before)
    const fs::path ck2 = p.tmp / "ck2";
    fs::copy(p.run / "checkpoints" / "step_00000002", ck2, fs::copy_options::recursive);
    std::string weights = test::read_text(ck2 / "model.safetensors");
    weights[weights.size() - 3] ^= 0x10;
    test::write_text(ck2 / "model.safetensors", weights);
    expect2(test::run_tool("retro-generate", base + " hello --quiet --checkpoint " + (ck2 / "model.safetensors").string()),
            "has changed since retro-train wrote it");

    // --output over an input named as a file, or over the database's tokenizer (--force replaced them)
    test::write_text(p.tmp / "two.jsonl", "\"a b\"\n\"c d\"\n");
    const std::string prompts = " --quiet --max-tokens 2 --prompts " + (p.tmp / "two.jsonl").string() + " --force --output ";
    fs::copy_file(p.run / "model.safetensors", p.tmp / "w.safetensors");
    const std::string weights_before = test::read_text(p.tmp / "w.safetensors");
    expect2(test::run_tool("retro-generate", base + " --checkpoint " + (p.tmp / "w.safetensors").string() + prompts +
                                                 (p.tmp / "w.safetensors").string()),
            "is the --checkpoint file");
    CHECK(test::read_text(p.tmp / "w.safetensors") == weights_before);
    const fs::path tok_model = p.tmp / "a-tok" / "tok.model";
    const std::string tok_before = test::read_text(tok_model);
    expect2(test::run_tool("retro-generate", base + prompts + tok_model.string()), "tok.model");
    CHECK(test::read_text(tok_model) == tok_before);

    // standard output closed: the text would go nowhere (exit 0 before)
    expect2(test::run_command("sh -c " + q(test::tool_path("retro-generate") + " " + base + " hello --max-tokens 2 >&-")),
            "standard output: is closed");
    // a prompt on standard input that is not UTF-8 (an argument is refused so; stdin was taken)
    expect2(test::run_tool("retro-generate", base + " -", std::string("caf\xe9\n")), "standard input: is not UTF-8 text");
    // an id that is not a 64-bit integer would come back otherwise
    test::write_text(p.tmp / "big.jsonl", "{\"id\": 12345678901234567890123, \"prompt\": \"a\"}\n");
    expect2(test::run_tool("retro-generate", base + " --quiet --prompts " + (p.tmp / "big.jsonl").string() + " --output " +
                                                 (p.tmp / "big.out").string()),
            "a number that is not a 64-bit integer");
    // --show-neighbours in batch mode names each prompt's id beside its line
    test::write_text(p.tmp / "ids.jsonl", "{\"id\": \"first\", \"prompt\": \"a b c d e f\"}\n");
    const auto shown = test::run_tool("retro-generate", base + " --max-tokens 6 --show-neighbours --prompts " +
                                                            (p.tmp / "ids.jsonl").string() + " --output " + (p.tmp / "ids.out").string());
    CHECK_MESSAGE(shown.exit_code == 0, shown.err);
    CHECK(shown.err.find("[prompt 1, id \"first\"]") != std::string::npos);
    // a prompts line may hold its text under "text" (docs/generate.md): the same prompt as under "prompt" (a mutant
    // that read "prompt" alone survived)
    test::write_text(p.tmp / "keys.jsonl", "{\"prompt\": \"a b c d e f\"}\n{\"text\": \"a b c d e f\"}\n");
    const auto keys = test::run_tool("retro-generate", base + " --max-tokens 6 --greedy --quiet --prompts " +
                                                           (p.tmp / "keys.jsonl").string() + " --output " + (p.tmp / "keys.out").string());
    REQUIRE_MESSAGE(keys.exit_code == 0, keys.err);
    std::istringstream key_lines(test::read_text(p.tmp / "keys.out"));
    std::vector<nlohmann::json> results;
    for (std::string line; std::getline(key_lines, line);) results.push_back(nlohmann::json::parse(line));
    REQUIRE(results.size() == 2);
    CHECK(results[1].at("id") == 1);
    CHECK(results[1].at("prompt") == "a b c d e f");
    CHECK(results[1].at("completion") == results[0].at("completion"));
}

TEST_CASE("generate: the journal tells its count once a line is written, before the sync - and reads its lines back") {
    // retro-generate's Ctrl-C note said one prompt fewer than the journal held (3 of 3 tries of a helper's pass): a
    // SIGTERM lands in the fdatasync, after the line is in the file, and the note was updated after the sync
    test::TempDir t("journal-count");
    const std::string out = (t / "out.jsonl").string();
    const nlohmann::json job = {{"seed", 1}};
    std::vector<std::size_t> told;
    {
        GenerateJournal journal(out, job, false, 3);
        journal.set_on_written([&](std::size_t kept) {
            told.push_back(kept);
            // the line is in the file when the count is told
            std::istringstream in(test::read_text(out + ".partial"));
            std::size_t lines = 0;
            for (std::string line; std::getline(in, line);) lines++;
            CHECK(lines == kept + 1);   // the job line and the finished prompts
        });
        journal.add(2, {{"id", 2}, {"prompt", "c"}});
        journal.add(0, {{"id", 0}, {"prompt", "a"}});
    }
    CHECK(told == std::vector<std::size_t>{1, 2});
    GenerateJournal again(out, job, true, 3);
    CHECK(again.done().size() == 2);
    CHECK(again.done().at(2).at("prompt") == "c");
}

TEST_CASE("generate: a journal of another version, or another tool's, is refused at its first line") {
    // (a mutant that read a journal of any version as this one's survived: a later format's lines taken as results)
    test::TempDir t("journal-version");
    const std::string out = (t / "out.jsonl").string();
    const nlohmann::json job = {{"seed", 1}};
    const std::string line = R"({"index": 0, "result": {"id": 0, "prompt": "a"}})";
    const auto journal = [&](const nlohmann::json& head) { test::write_text(out + ".partial", head.dump() + "\n" + line + "\n"); };
    journal({{"tool", "retro-generate"}, {"journal", 2}, {"job", job}});
    CHECK_THROWS_WITH_AS(GenerateJournal(out, job, true, 2),
                         doctest::Contains(".partial:1: is a journal of another version (2); this retro-generate writes 1"), UserError);
    journal({{"tool", "retro-generate"}, {"job", job}});
    CHECK_THROWS_WITH_AS(GenerateJournal(out, job, true, 2), doctest::Contains("is a journal of another version (null)"), UserError);
    journal({{"tool", "retro-chunk"}, {"journal", 1}, {"job", job}});
    CHECK_THROWS_WITH_AS(GenerateJournal(out, job, true, 2), doctest::Contains(".partial:1: is not a retro-generate journal"), UserError);
    journal({{"tool", "retro-generate"}, {"journal", 1}, {"job", job}});   // this version's: its line is kept
    CHECK(GenerateJournal(out, job, true, 2).done().size() == 1);
}

TEST_CASE("generate: a greedy journal resumes whatever temperature, top-k or top-p either command gave") {
    // greedy decoding reads none of them: `--greedy --temperature 2` interrupted was refused resumed with `--greedy`
    test::TempDir t("journal-greedy");
    const std::string out = (t / "out.jsonl").string();
    const nlohmann::json greedy2 = {{"greedy", true}, {"temperature", 2.0}, {"top_k", 5}, {"top_p", 0.5}, {"seed", 1}};
    {
        GenerateJournal journal(out, greedy2, false, 2);
        journal.add(0, {{"id", 0}, {"prompt", "a"}});
    }
    const nlohmann::json greedy1 = {{"greedy", true}, {"temperature", 1.0}, {"top_k", 0}, {"top_p", 1.0}, {"seed", 1}};
    GenerateJournal again(out, greedy1, true, 2);
    CHECK(again.done().size() == 1);
    // sampled, they are the job's: another temperature is another job
    const nlohmann::json sampled = {{"greedy", false}, {"temperature", 1.0}, {"top_k", 0}, {"top_p", 1.0}, {"seed", 1}};
    CHECK_THROWS_WITH_AS(GenerateJournal(out, sampled, true, 2), doctest::Contains("another retro-generate job"), UserError);
    const nlohmann::json greedy_seed2 = {{"greedy", true}, {"temperature", 1.0}, {"top_k", 0}, {"top_p", 1.0}, {"seed", 2}};
    CHECK_THROWS_WITH_AS(GenerateJournal(out, greedy_seed2, true, 2), doctest::Contains("seed"), UserError);   // (the rest still compared)
}

TEST_CASE("generate: --max-tokens tokens exactly, or up to max_seq_len in all - and the stop says which") {
    // docs/generate.md: generation stops after --max-tokens or at the model's max_seq_len (prompt and completion
    // together; this run's config has 32). Where both fall on the same token, --max-tokens is what stopped it.
    Pipeline p;
    build(p, "m", 4, true);
    const std::string base = p.run.string() + " --index " + p.index.string() + " --db " + p.db.string() +
                             " --threads 1 --ignore-eos --seed 3 --quiet --prompts " + (p.tmp / "prompts.jsonl").string() +
                             " --output " + (p.tmp / "out.jsonl").string() + " --force";
    test::write_text(p.tmp / "prompts.jsonl", nlohmann::json(synthetic_text(400, 30)).dump() + "\n" +
                                                  nlohmann::json(synthetic_text(401, 60)).dump() + "\n");
    const auto rows = [&](const std::string& extra) {
        const auto r = test::run_tool("retro-generate", base + extra);
        REQUIRE_MESSAGE(r.exit_code == 0, r.err);
        std::vector<nlohmann::json> out;
        std::istringstream in(test::read_text(p.tmp / "out.jsonl"));
        for (std::string line; std::getline(in, line);)
            if (!line.empty()) out.push_back(nlohmann::json::parse(line));
        REQUIRE(out.size() == 2);
        return out;
    };
    for (const auto& row : rows(" --max-tokens 5")) {
        CHECK(row["completion_tokens"] == 5);
        CHECK(row["stop"] == "max_tokens");
    }
    std::vector<int> room;   // tokens left to max_seq_len after each prompt
    for (const auto& row : rows(" --max-tokens 100")) {
        const int prompt_tokens = row["prompt_tokens"].get<int>();
        REQUIRE(prompt_tokens < 32 - 2);
        CHECK(row["completion_tokens"].get<int>() + prompt_tokens == 32);
        CHECK(row["stop"] == "max_seq_len");
        room.push_back(32 - prompt_tokens);
    }
    REQUIRE(room.size() == 2);
    REQUIRE(room[0] != room[1]);
    const int shortest = std::min(room[0], room[1]);
    const auto tie = rows(" --max-tokens " + std::to_string(shortest));
    for (int i = 0; i < 2; i++) {
        CAPTURE(i);
        CHECK(tie[static_cast<std::size_t>(i)]["completion_tokens"] == shortest);
        // one prompt reaches only --max-tokens, the other both limits at once: max_tokens for both
        CHECK(tie[static_cast<std::size_t>(i)]["stop"] == "max_tokens");
    }
}

TEST_CASE("generate: the streamed text equals the completion where characters come as several byte tokens") {
    // A character outside the tokenizer's pieces is byte tokens (3 for U+4E2D), and the text decoded part way ends in
    // one U+FFFD per byte so far: the stream must hold back every trailing U+FFFD until the character is whole (a
    // mutant holding back only the last one printed U+FFFD after two of the three bytes, and never the character).
    // The reference is the batch mode's completion (decoded once at the end, nothing streamed), same prompt and seed.
    test::TempDir tmp("gen-bytes");
    const fs::path latin = tmp / "latin", cjk = tmp / "cjk", tok = tmp / "tok", db = tmp / "db", run = tmp / "run";
    fs::create_directories(latin);
    fs::create_directories(cjk);
    for (int d = 0; d < 8; d++) test::write_text(latin / ("l" + std::to_string(d) + ".txt"), synthetic_text(700 + d, 400));
    const std::string chars[3] = {"\xE4\xB8\xAD", "\xE6\x96\x87", "\xE5\xAD\x97"};   // U+4E2D U+6587 U+5B57
    for (int d = 0; d < 24; d++) {
        std::string text;
        for (int i = 0; i < 60; i++) text += chars[(i + d) % 3];
        test::write_text(cjk / ("c" + std::to_string(d) + ".txt"), text);
    }
    auto r = test::run_tool("retro-tokenizer", "train " + latin.string() + " --out " + tok.string() + " --vocab-size 400 --quiet");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    r = test::run_tool("retro-chunk", cjk.string() + " --tokenizer " + tok.string() + " --out " + db.string() +
                                          " --chunk-size 4 --seq-len 16 --quiet");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    {   // the precondition: the characters are byte tokens
        Tokenizer t((tok / "tok.model").string());
        REQUIRE(t.encode(chars[0]).size() >= 3);
    }
    RetroConfig c = RetroConfig::load((test::source_dir() / "examples" / "configs" / "tiny.json").string());
    c.num_tokens = 400;
    c.max_seq_len = 32;
    c.save((tmp / "config.json").string());
    r = test::run_tool("retro-train", "--db " + db.string() + " --config " + (tmp / "config.json").string() + " --out " +
                                          run.string() + " --steps 300 --batch-size 8 --lr 5e-3 --warmup 10 --no-retrieval"
                                          " --val-fraction 0 --val-every 0 --quiet --threads 1");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    const std::string prompt = chars[0] + chars[1];
    test::write_text(tmp / "prompts.jsonl", nlohmann::json(prompt).dump() + "\n");
    int whole = 0;   // generated characters of three bytes
    for (int seed : {1, 2, 3}) {
        CAPTURE(seed);
        const std::string common = run.string() + " --db " + db.string() + " --no-retrieval --ignore-eos --max-tokens 24"
                                   " --threads 1 --quiet --seed " + std::to_string(seed);
        const auto single = test::run_tool("retro-generate", common + " " + q(prompt));
        REQUIRE_MESSAGE(single.exit_code == 0, single.err);
        const auto batch = test::run_tool("retro-generate", common + " --prompts " + (tmp / "prompts.jsonl").string() +
                                                                " --output " + (tmp / "out.jsonl").string() + " --force");
        REQUIRE_MESSAGE(batch.exit_code == 0, batch.err);
        const std::string completion = nlohmann::json::parse(test::read_text(tmp / "out.jsonl"))["completion"].get<std::string>();
        CHECK(single.out == completion + "\n");
        for (const auto& ch : chars)
            for (std::size_t at = completion.find(ch); at != std::string::npos; at = completion.find(ch, at + 1)) whole++;
    }
    CHECK(whole > 0);   // (the model writes whole characters: what the stream must not break)
}

// generate_journal.h: `prompts` is how many the input holds, so indices run 0..prompts-1 and a line for index
// `prompts` (one past the last: a journal edited by hand, or a job's prompts file cut short) is damaged, never a
// finished prompt that would add a row past the input to the output.
TEST_CASE("generate: a journal line for the index one past the last prompt is damaged, not a finished prompt") {
    test::TempDir t("journal-past-end");
    const std::string out = (t / "out.jsonl").string();
    const nlohmann::json job = {{"greedy", true}, {"seed", 1}};
    {
        GenerateJournal journal(out, job, false, 3);
        journal.add(0, {{"id", 0}, {"prompt", "a"}});
        journal.add(2, {{"id", 2}, {"prompt", "c"}});
        journal.add(1, {{"id", 1}, {"prompt", "b"}});
    }
    {
        GenerateJournal three(out, job, true, 3);
        CHECK(three.done().size() == 3);
    }
    GenerateJournal two(out, job, true, 2);   // the same job read with two prompts: index 2 is past the end
    std::set<std::int64_t> kept;
    for (const auto& [index, result] : two.done()) kept.insert(index);
    CHECK(kept == std::set<std::int64_t>{0, 1});
}

// docs/generate.md's defaults: --temperature 1, --top-k 0 (off), --top-p 0.9. What a run without them used is
// the job its journal records (stopped after one prompt, as if killed), and the text equals the one the options
// given explicitly write.
TEST_CASE("generate: without sampling options a run samples at docs/generate.md's defaults - T 1, top-k off, top-p 0.9") {
    Pipeline p;
    build(p, "d", 5, true);
    test::write_text(p.tmp / "prompts.jsonl", nlohmann::json(synthetic_text(500, 30)).dump() + "\n" +
                                                  nlohmann::json(synthetic_text(501, 30)).dump() + "\n");
    const std::string base = p.run.string() + " --index " + p.index.string() + " --db " + p.db.string() +
                             " --threads 1 --ignore-eos --seed 3 --quiet --max-tokens 12 --batch-size 1 --prompts " +
                             (p.tmp / "prompts.jsonl").string();
    const fs::path stopped = p.tmp / "stopped.jsonl";
    auto k = test::run_tool("retro-generate", base + " --output " + stopped.string() + " --stop-after 1");
    REQUIRE_MESSAGE(k.exit_code == 0, k.err);
    std::istringstream journal(test::read_text(stopped.string() + ".partial"));
    std::string header;
    REQUIRE(std::getline(journal, header));
    const auto job = nlohmann::json::parse(header).at("job");
    CHECK(job.at("greedy") == false);
    CHECK(job.at("temperature").get<double>() == 1.0);
    CHECK(job.at("top_k").get<int>() == 0);
    CHECK(job.at("top_p").get<double>() == 0.9);
    const auto run = [&](const std::string& name, const std::string& extra) {
        const auto r = test::run_tool("retro-generate", base + " --output " + (p.tmp / name).string() + extra);
        REQUIRE_MESSAGE(r.exit_code == 0, r.err);
        return test::read_text(p.tmp / name);
    };
    CHECK(run("default.jsonl", "") == run("explicit.jsonl", " --temperature 1 --top-k 0 --top-p 0.9"));
}
