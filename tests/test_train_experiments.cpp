// retro-train's retrieval experiments (issue 17, docs/retrieval.md sections 8-9), and examples/scratch-study.sh:
//   --retrieval-dropout: a fixed hash picks which training sequences read no neighbours (their retrieved tokens all
//   pad, so every neighbour is masked); the draw is the same for any --grad-accum and after --resume, and a run
//   resumed with another share is refused;
//   --oracle-neighbours: a fixed hash picks which training chunks read themselves and their continuation in which
//   neighbour slot; the same checks of the CLI as for the dropout;
//   --train-docs-fraction: training sequences from a fixed-hash share of the non-validation documents, every
//   document still retrievable.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/shell_quote.h"
#include "model/config.h"
#include "model/param_groups.h"
#include "model/params.h"
#include "model/retro.h"
#include "test_train_fixtures.h"
#include "test_util.h"
#include "train/adamw.h"
#include "train/data.h"

using namespace retro;
namespace fs = std::filesystem;

TEST_CASE("train dropout: the draw is a fixed hash at the asked share, and only dropped sequences are masked") {
    int dropped = 0, unstable = 0, at0 = 0, at1 = 0;
    for (std::int64_t seq = 0; seq < 20000; seq++) {
        const bool d = retrieval_dropped(7, 3, seq, 0.3);
        unstable += d != retrieval_dropped(7, 3, seq, 0.3);
        dropped += d;
        at0 += retrieval_dropped(7, 3, seq, 0.0);
        at1 += retrieval_dropped(7, 3, seq, 1.0);
    }
    CHECK(unstable == 0);
    CHECK(at0 == 0);
    CHECK(at1 == 20000);
    CHECK(dropped > 0.28 * 20000);
    CHECK(dropped < 0.32 * 20000);
    int differ = 0;   // another epoch or seed draws again
    for (std::int64_t seq = 0; seq < 1000; seq++)
        differ += retrieval_dropped(7, 3, seq, 0.5) != retrieval_dropped(7, 4, seq, 0.5);
    CHECK(differ > 400);

    RetroBatch b;
    b.B = 3;
    b.retrieved.assign(3 * 6, 5);
    mask_dropped_neighbours(b, {false, true, false}, 0);
    for (std::size_t i = 0; i < b.retrieved.size(); i++) CHECK(b.retrieved[i] == (i / 6 == 1 ? 0 : 5));
}

namespace {

// retro-train's options for a run on a tiny db written into `dir` (batch 4, lr 3e-3, seed 5, one thread, quiet),
// with the step counts in `schedule`.
std::string tiny_recipe_run(const fs::path& dir, const std::string& schedule) {
    test::write_tiny_db(dir / "db", dir / "knn", 4, 16, 40, 6);
    return "--db " + (dir / "db").string() + " --knn " + (dir / "knn").string() + " --config " + test::config_path() +
           " --batch-size 4 --lr 3e-3 --val-batches 2 --val-fraction 0.2 --seed 5 --quiet --threads 1 " + schedule;
}

// Training-recipe options of retro-train (`with`) on the tiny db: they train, differ from the plain run, resume bit
// for bit after a stop, refuse a resume with the options `changed` naming `flag` in the error, and refuse `bad` in
// one line (exit 2) without leaving a model.
void check_recipe_option(const std::string& with, const std::string& changed, const std::string& bad,
                         const std::string& flag) {
    test::TempDir dir("train-recipe");
    const std::string common = tiny_recipe_run(dir.path, "--steps 12 --grad-accum 2 --warmup 3 --val-every 6 --checkpoint-every 6");
    auto none = test::run_tool("retro-train", common + " --out " + (dir / "none").string());
    auto a = test::run_tool("retro-train", common + " " + with + " --out " + (dir / "a").string());
    INFO(with << ": " << a.err);
    REQUIRE(none.exit_code == 0);
    REQUIRE(a.exit_code == 0);
    CHECK(test::losses(dir / "a") != test::losses(dir / "none"));

    auto b1 = test::run_tool("retro-train", common + " " + with + " --stop-after 8 --out " + (dir / "b").string());
    REQUIRE(b1.exit_code == 0);
    auto other = test::run_tool("retro-train", common + " " + changed + " --resume --out " + (dir / "b").string());
    CHECK(other.exit_code == 2);
    CHECK(other.err.find(flag) != std::string::npos);
    auto b2 = test::run_tool("retro-train", common + " " + with + " --resume --out " + (dir / "b").string());
    INFO(b2.err);
    REQUIRE(b2.exit_code == 0);
    CHECK(test::losses(dir / "b") == test::losses(dir / "a"));
    CHECK(test::bytes(dir / "b" / "model.safetensors") == test::bytes(dir / "a" / "model.safetensors"));

    auto refused = test::run_tool("retro-train", common + " " + bad + " --out " + (dir / "bad").string());
    CHECK(refused.exit_code == 2);
    CHECK_FALSE(fs::exists(dir / "bad" / "model.safetensors"));
}

}  // namespace

TEST_CASE("train dropout: retro-train --retrieval-dropout trains, differs from 0, resumes bit for bit, and refuses another share") {
    check_recipe_option("--retrieval-dropout 0.5", "--retrieval-dropout 0.25", "--retrieval-dropout 1.5", "--retrieval-dropout");
}

TEST_CASE("train oracle: the draw is a fixed hash at the asked share, over every slot and cut") {
    int picked = 0, unstable = 0, at0 = 0, at1 = 0, differ = 0;
    std::vector<int> per_slot(3, 0), per_cut(9, 0);
    for (std::int64_t seq = 0; seq < 2000; seq++)
        for (std::int64_t u = 0; u < 10; u++) {
            const auto pick = oracle_pick(7, 3, seq, u, 0.2, 3, 8);
            const auto again = oracle_pick(7, 3, seq, u, 0.2, 3, 8);
            unstable += pick.slot != again.slot || pick.cut != again.cut;
            differ += (pick.slot >= 0) != (oracle_pick(7, 4, seq, u, 0.2, 3, 8).slot >= 0);   // another epoch draws again
            if (pick.slot >= 0) {
                REQUIRE(pick.slot < 3);
                REQUIRE(pick.cut >= 0);
                REQUIRE(pick.cut <= 8);
                picked++;
                per_slot[static_cast<std::size_t>(pick.slot)]++;
                per_cut[static_cast<std::size_t>(pick.cut)]++;
            }
            at0 += oracle_pick(7, 3, seq, u, 0.0, 3, 8).slot >= 0;
            at1 += oracle_pick(7, 3, seq, u, 1.0, 3, 8).slot >= 0;
        }
    CHECK(unstable == 0);
    CHECK(at0 == 0);
    CHECK(at1 == 20000);
    CHECK(picked > 0.18 * 20000);
    CHECK(picked < 0.22 * 20000);
    for (int n : per_slot) CHECK(n > picked / 4);
    for (int n : per_cut) CHECK(n > picked / 18);   // every cut 0..cs drawn, about evenly
    CHECK(differ > 0.2 * 20000);
}

TEST_CASE("train oracle: a picked chunk reads its own row and continuation in the picked slot (spliced: up to the cut), nothing else changes") {
    test::TempDir dir("train-oracle");
    const auto t = test::write_tiny_db(dir / "db", dir / "knn", 4, 16, 30, 11);
    const RetroConfig c = RetroConfig::load(test::config_path());   // chunk 4, k 2, chunk alignment
    RetroData data((dir / "db").string(), (dir / "knn").string(), c, 0.2);
    const auto& seqs = data.train_seqs();
    REQUIRE(seqs.size() >= 6);
    const std::vector<std::int64_t> batch_seqs(seqs.begin(), seqs.begin() + 6), epochs(6, 2);
    const std::int64_t cs = 4, l = 16 / cs, k = 2, r = 2 * cs;
    for (const bool splice : {false, true}) {
        RetroBatch plain, oracle;
        data.make_batch(batch_seqs, true, plain);
        data.make_batch(batch_seqs, true, oracle);
        data.plant_oracle_neighbours(batch_seqs, epochs, 9, 0.5, splice, false, oracle);
        int planted = 0, spliced = 0;
        for (std::size_t b = 0; b < batch_seqs.size(); b++) {
            const std::int64_t c0 = data.db().seq_start(batch_seqs[b]), end = data.db().doc_end(data.db().doc_of(c0));
            for (std::int64_t u = 0; u < l; u++) {
                const auto pick = c0 + u < end ? oracle_pick(9, 2, batch_seqs[b], u, 0.5, k, cs) : OraclePick{};
                for (std::int64_t j = 0; j < k; j++)
                    for (std::int64_t i = 0; i < r; i++) {
                        const std::size_t at = static_cast<std::size_t>(((static_cast<std::int64_t>(b) * l + u) * k + j) * r + i);
                        INFO("splice " << splice << " seq " << b << " chunk " << u << " slot " << j << " token " << i);
                        if (j != pick.slot || (splice && i >= cs + pick.cut)) {   // retrieved, as without the oracle
                            CHECK(oracle.retrieved[at] == plain.retrieved[at]);
                            continue;
                        }
                        const std::int64_t row = c0 + u + i / cs;   // the chunk, then its continuation (pads past the doc)
                        CHECK(oracle.retrieved[at] == (row < end ? t.rows[static_cast<std::size_t>(row * cs + i % cs)] : 0));
                    }
                planted += pick.slot >= 0;
                spliced += pick.slot >= 0 && pick.cut < cs;
            }
        }
        CHECK(planted > 0);
        CHECK(spliced > 0);
        CHECK(oracle.seq == plain.seq);
    }
}

TEST_CASE("train oracle: under match alignment the oracle is still the chunk and its continuation where chunks repeat") {
    // A chunk equal to the one before it (rows 1 and 2 of each document below) matches itself there first: a match
    // search would shift the window by -cs. The oracle must stay the chunk-aligned window.
    test::TempDir dir("train-oracle-match");
    test::TinyDb t;
    t.kk = 2;
    for (int d = 0; d < 4; d++) {
        const std::vector<std::int32_t> doc = {2, 5, 6, 7, 8, 5, 6, 7, 8, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15,
                                               16, 17, 18, 19, 20, 3, 0, 0};
        const std::int64_t first = t.n, nrows = static_cast<std::int64_t>(doc.size()) / 4;
        t.rows.insert(t.rows.end(), doc.begin(), doc.end());
        for (std::int64_t r = 0; r < nrows; r++) t.doc_ids.push_back(d);
        for (std::int64_t r = 0; r + 4 <= nrows; r += 4) t.seq_starts.push_back(first + r);
        t.n += nrows;
        t.doc_offsets.push_back(t.n);
    }
    for (std::int64_t c = 0; c < t.n; c++)
        for (std::int64_t j = 0; j < t.kk; j++) t.knn.push_back((c + 7 * (j + 1)) % t.n);   // other documents
    test::save_tiny_db(dir / "db", dir / "knn", t, 4, 16);
    RetroConfig c = RetroConfig::load(test::config_path());
    c.neighbour_alignment = "match";
    RetroData data((dir / "db").string(), (dir / "knn").string(), c, 0.0);
    const auto& seqs = data.train_seqs();
    REQUIRE(!seqs.empty());
    const std::vector<std::int64_t> epochs(seqs.size(), 0);
    RetroBatch b;
    data.make_batch(seqs, true, b);
    data.plant_oracle_neighbours(seqs, epochs, 3, 1.0, false, false, b);   // every chunk
    const std::int64_t cs = 4, l = 4, k = 2, r = 8;
    for (std::size_t s = 0; s < seqs.size(); s++) {
        const std::int64_t c0 = data.db().seq_start(seqs[s]), end = data.db().doc_end(data.db().doc_of(c0));
        for (std::int64_t u = 0; u < l; u++) {
            const auto pick = oracle_pick(3, 0, seqs[s], u, 1.0, k, cs);
            REQUIRE(pick.slot >= 0);
            for (std::int64_t i = 0; i < r; i++) {
                const std::int64_t row = c0 + u + i / cs;
                const std::size_t at = static_cast<std::size_t>(((static_cast<std::int64_t>(s) * l + u) * k + pick.slot) * r + i);
                INFO("seq " << s << " chunk " << u << " token " << i);
                CHECK(b.retrieved[at] == (row < end ? t.rows[static_cast<std::size_t>(row * cs + i % cs)] : 0));
            }
        }
    }
}

TEST_CASE("train oracle: --oracle-hindsight reads the next chunk's neighbour one chunk earlier, at its match") {
    // Document 1 holds document 0's tokens 14..21 (its chunks 1 and 2) two tokens off the chunk grid; the knn row of
    // document 0's chunk 2 names document 1's chunk 1 in both slots. The hindsight oracle of document 0's chunk 1 must
    // then read document 1's tokens 14..21: chunk 1 and its continuation, found in another document and aligned.
    test::TempDir dir("train-oracle-hindsight");
    test::TinyDb t;
    t.kk = 2;
    std::vector<std::int32_t> a, b = {100, 101, 14, 15, 16, 17, 18, 19, 20, 21};
    for (std::int32_t v = 10; v < 42; v++) a.push_back(v);
    for (std::int32_t v = 102; b.size() < 32; v++) b.push_back(v);
    for (const auto* doc : {&a, &b}) {
        const std::int64_t first = t.n, nrows = static_cast<std::int64_t>(doc->size()) / 4;
        t.rows.insert(t.rows.end(), doc->begin(), doc->end());
        for (std::int64_t r = 0; r < nrows; r++) t.doc_ids.push_back(static_cast<std::int64_t>(t.doc_offsets.size()) - 1);
        for (std::int64_t r = 0; r + 4 <= nrows; r += 4) t.seq_starts.push_back(first + r);
        t.n += nrows;
        t.doc_offsets.push_back(t.n);
    }
    for (std::int64_t c = 0; c < t.n; c++)
        for (std::int64_t j = 0; j < t.kk; j++) t.knn.push_back(c == 2 ? 9 : (c < 8 ? 12 : 3));   // 9: doc 1's chunk 1
    test::save_tiny_db(dir / "db", dir / "knn", t, 4, 16);
    RetroConfig c = RetroConfig::load(test::config_path());   // chunk 4, k 2
    c.neighbour_alignment = "match";
    c.num_tokens = 256;   // (document 1's ids pass 100: batches refuse ids the config has no embedding for)
    RetroData data((dir / "db").string(), (dir / "knn").string(), c, 0.0);
    const std::vector<std::int64_t> seqs = {0}, epochs = {0};   // document 0's first sequence: chunks 0..3
    RetroBatch plain, b1;
    data.make_batch(seqs, true, plain);
    data.make_batch(seqs, true, b1);
    data.plant_oracle_neighbours(seqs, epochs, 3, 1.0, false, true, b1);   // every chunk
    const std::int64_t k = 2, r = 8;
    const int slot = oracle_pick(3, 0, 0, 1, 1.0, k, 4).slot;
    REQUIRE(slot >= 0);
    const std::vector<std::int32_t> want = {14, 15, 16, 17, 18, 19, 20, 21},
                                    got(b1.retrieved.begin() + (1 * k + slot) * r, b1.retrieved.begin() + (1 * k + slot + 1) * r);
    CHECK(got == want);   // (chunk 0's next chunk was read first: a query left over from it would shift this by -4)
    // the other chunks' next chunks name doc 1's chunk 12 - 8 = 4 (tokens 108..111, no match): read from chunk 3
    // (chunk-aligned, one chunk earlier); chunk 3's next chunk is past the sequence but in the document
    for (std::int64_t u : {0, 2, 3}) {
        const int s = oracle_pick(3, 0, 0, u, 1.0, k, 4).slot;
        const std::vector<std::int32_t> got(b1.retrieved.begin() + (u * k + s) * r, b1.retrieved.begin() + (u * k + s + 1) * r);
        INFO("chunk " << u);
        CHECK(got == std::vector<std::int32_t>{t.rows.begin() + 11 * 4, t.rows.begin() + 13 * 4});
    }
    // the slots not picked are as retrieved
    for (std::int64_t u = 0; u < 4; u++) {
        const int other = 1 - oracle_pick(3, 0, 0, u, 1.0, k, 4).slot;
        CHECK(std::equal(b1.retrieved.begin() + (u * k + other) * r, b1.retrieved.begin() + (u * k + other + 1) * r,
                         plain.retrieved.begin() + (u * k + other) * r));
    }
}

TEST_CASE("train oracle: retro-train --oracle-neighbours [--oracle-splice] trains, differs from 0, resumes bit for bit, and refuses another share") {
    check_recipe_option("--oracle-neighbours 0.3", "--oracle-neighbours 0.1", "--oracle-neighbours 1.5", "--oracle-neighbours");
    check_recipe_option("--oracle-neighbours 0.3 --oracle-splice", "--oracle-neighbours 0.3", "--oracle-splice",
                        "--oracle-splice");
    check_recipe_option("--oracle-neighbours 0.5 --oracle-hindsight", "--oracle-neighbours 0.5", "--oracle-hindsight",
                        "--oracle-hindsight");
    // the flag reaches the batches (its losses are not the self-oracle's), and it refuses --oracle-splice
    test::TempDir dir("train-hindsight");
    const std::string common = tiny_recipe_run(dir.path, "--steps 6 --warmup 2 --val-every 6 --oracle-neighbours 0.5");
    const auto self = test::run_tool("retro-train", common + " --out " + (dir / "self").string());
    const auto hind = test::run_tool("retro-train", common + " --oracle-hindsight --out " + (dir / "hind").string());
    REQUIRE(self.exit_code == 0);
    REQUIRE(hind.exit_code == 0);
    CHECK(test::losses(dir / "hind") != test::losses(dir / "self"));
    const auto both = test::run_tool("retro-train", common + " --oracle-hindsight --oracle-splice --out " + (dir / "both").string());
    CHECK(both.exit_code == 2);
    CHECK(both.err.find("--oracle-hindsight") != std::string::npos);
    // --oracle-until 6 of 12 steps: the first half differs from P throughout, resumes bit for bit across the fall
    check_recipe_option("--oracle-neighbours 0.6 --oracle-until 6", "--oracle-neighbours 0.6 --oracle-until 4",
                        "--oracle-until 6", "--oracle-until");
}

TEST_CASE("train oracle: --oracle-until falls linearly to 0, and a lower share picks a subset of a higher one's chunks") {
    CHECK(oracle_share(0.3, 0, 1) == 0.3);
    CHECK(oracle_share(0.3, 0, 5000) == 0.3);
    CHECK(oracle_share(0.4, 4, 1) == doctest::Approx(0.4));
    CHECK(oracle_share(0.4, 4, 2) == doctest::Approx(0.3));
    CHECK(oracle_share(0.4, 4, 4) == doctest::Approx(0.1));
    CHECK(oracle_share(0.4, 4, 5) == 0.0);
    CHECK(oracle_share(0.4, 4, 100) == 0.0);
    int high = 0, low = 0, outside = 0;
    for (std::int64_t seq = 0; seq < 500; seq++)
        for (std::int64_t u = 0; u < 8; u++) {
            const bool at_high = oracle_pick(3, 1, seq, u, 0.4, 2, 8).slot >= 0;
            const auto at_low = oracle_pick(3, 1, seq, u, 0.1, 2, 8);
            high += at_high;
            low += at_low.slot >= 0;
            outside += at_low.slot >= 0 && !at_high;
            if (at_low.slot >= 0) CHECK(at_low.slot == oracle_pick(3, 1, seq, u, 0.4, 2, 8).slot);
        }
    CHECK(outside == 0);
    CHECK(low > 0);
    CHECK(low < high);
}

TEST_CASE("train docs fraction: a fixed share of the training documents, the rest still retrievable") {
    test::TempDir dir("train-docs-fraction");
    test::write_tiny_db(dir / "db", dir / "knn", 4, 16, 60, 8);
    const RetroConfig c = RetroConfig::load(test::config_path());
    RetroData all((dir / "db").string(), (dir / "knn").string(), c, 0.2);
    RetroData half((dir / "db").string(), (dir / "knn").string(), c, 0.2);
    half.keep_train_docs(0.5);
    std::set<std::int64_t> docs_all, docs_half;
    for (auto s : all.train_seqs()) docs_all.insert(all.db().doc_of(all.db().seq_start(s)));
    for (auto s : half.train_seqs()) {
        const auto d = half.db().doc_of(half.db().seq_start(s));
        docs_half.insert(d);
        CHECK(docs_all.count(d) == 1);
    }
    CHECK(docs_half.size() < docs_all.size());
    CHECK(docs_half.size() > docs_all.size() / 4);
    for (auto s : all.train_seqs())   // every sequence of a kept document is kept
        if (docs_half.count(all.db().doc_of(all.db().seq_start(s))))
            CHECK(std::count(half.train_seqs().begin(), half.train_seqs().end(), s) == 1);
    CHECK(half.val_seqs() == all.val_seqs());
    // neighbours do not depend on it: the same ids for every chunk
    std::vector<std::int64_t> a(static_cast<std::size_t>(c.num_neighbours)), b(a.size());
    for (std::int64_t row = 0; row < all.db().chunk_count(); row++) {
        const auto end = all.db().doc_end(all.db().doc_of(row));
        all.neighbour_ids(row, end, row, a.data());
        half.neighbour_ids(row, end, row, b.data());
        CHECK(a == b);
    }
    RetroData none((dir / "db").string(), (dir / "knn").string(), c, 0.2);
    CHECK_THROWS_AS(none.keep_train_docs(0.0), UserError);
    // the kept share is drawn apart from the validation split (a mutant drawing both from one hash kept only the
    // documents whose draw fell between the two shares: none at --val-fraction 0.5 with --train-docs-fraction 0.5)
    RetroData held((dir / "db").string(), (dir / "knn").string(), c, 0.5);
    const auto docs_of = [](const RetroData& d) {
        std::set<std::int64_t> docs;
        for (auto s : d.train_seqs()) docs.insert(d.db().doc_of(d.db().seq_start(s)));
        return docs.size();
    };
    const std::size_t held_docs = docs_of(held);
    REQUIRE(held_docs >= 20);
    held.keep_train_docs(0.5);
    CHECK(docs_of(held) > held_docs / 4);
    CHECK(docs_of(held) < held_docs * 3 / 4);

    const std::string common = "--db " + (dir / "db").string() + " --knn " + (dir / "knn").string() + " --config " +
                               test::config_path() +
                               " --steps 8 --batch-size 4 --lr 3e-3 --warmup 2 --val-every 4 --val-batches 2"
                               " --val-fraction 0.2 --quiet --threads 1 --checkpoint-every 4";
    auto r1 = test::run_tool("retro-train", common + " --train-docs-fraction 0.5 --stop-after 5 --out " + (dir / "r").string());
    REQUIRE(r1.exit_code == 0);
    auto other = test::run_tool("retro-train", common + " --resume --out " + (dir / "r").string());
    CHECK(other.exit_code == 2);
    CHECK(other.err.find("--train-docs-fraction") != std::string::npos);
    auto r2 = test::run_tool("retro-train", common + " --train-docs-fraction 0.5 --resume --out " + (dir / "r").string());
    INFO(r2.err);
    CHECK(r2.exit_code == 0);
}

TEST_CASE("train studies: examples/scratch-study.sh runs seeds side by side and its summary is the eval reports' losses") {
    test::TempDir dir("scratch-study");
    test::write_tiny_db(dir / "data" / "db8", dir / "data" / "knn8", 4, 16, 40, 10);
    const std::string bin = fs::path(test::tool_path("retro-train")).parent_path().string();
    auto r = test::run_command("cd " + shell_quote(test::source_dir().string()) + " && STEPS=4 EVAL_BATCHES=1 JOBS=2 THREADS=1 CONFIG=" +
                               shell_quote(test::config_path()) + " examples/scratch-study.sh " + shell_quote(bin) + " " +
                               shell_quote((dir / "data").string()) + " " + shell_quote((dir / "out").string()) + " '1 2'");
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(r.out.find("RETRO from scratch vs its twin at equal steps, 2 seed(s)") != std::string::npos);
    const std::string summary = test::read_text(dir / "out" / "summary.tsv");
    CHECK(std::count(summary.begin(), summary.end(), '\n') == 3);   // header, seed 1, seed 2 in order
    CHECK(summary.find("\n1\t") < summary.find("\n2\t"));
    for (int s : {1, 2}) {   // each row: the eval report's losses over all chunks, and their differences
        const auto j = nlohmann::json::parse(test::read_text(dir / "out" / ("eval-s" + std::to_string(s) + ".json")));
        const auto& all = j["filters"].back()["modes"];
        const double re = all["retrieval"]["loss"], sh = all["shuffled neighbours"]["loss"], tw = all["baseline"]["loss"];
        std::istringstream row(test::read_text(dir / "out" / ("row-s" + std::to_string(s) + ".tsv")));
        int seed = 0;
        double r_re = 0, r_no = 0, r_sh = 0, r_tw = 0, r_rs = 0, r_tr = 0;
        row >> seed >> r_re >> r_no >> r_sh >> r_tw >> r_rs >> r_tr;
        CHECK(seed == s);
        // the table prints 4 decimals
        CHECK(std::abs(r_re - re) <= 1e-4);
        CHECK(std::abs(r_sh - sh) <= 1e-4);
        CHECK(std::abs(r_tw - tw) <= 1e-4);
        CHECK(std::abs(r_tr - (tw - re)) <= 2e-4);
        CHECK(std::abs(r_rs - (sh - re)) <= 2e-4);
    }
    // run again, it resumes: an interrupted run (no model yet) continues from its checkpoint, which stays
    const auto study = [&](const std::string& steps) {
        return test::run_command("cd " + shell_quote(test::source_dir().string()) + " && STEPS=" + steps +
                                 " EVAL_BATCHES=1 THREADS=1 CONFIG=" + shell_quote(test::config_path()) +
                                 " examples/scratch-study.sh " + shell_quote(bin) + " " +
                                 shell_quote((dir / "data").string()) + " " + shell_quote((dir / "out").string()) + " 1");
    };
    const fs::path twin = dir / "out" / "twin-s1", state = twin / "checkpoints" / "step_00000004" / "state.json";
    const auto state_time = fs::last_write_time(state);
    fs::remove(twin / "model.safetensors");
    fs::remove(twin / "manifest.json");
    const auto again = study("4");
    INFO(again.out << again.err);
    CHECK(again.exit_code == 0);
    CHECK(fs::exists(twin / "manifest.json"));
    CHECK(fs::last_write_time(state) == state_time);   // (--force used to delete the checkpoints and train anew)
    // other settings in the same OUT_DIR: refused, naming the first difference
    const auto other = study("5");
    CHECK(other.exit_code == 2);
    CHECK(other.err.find("holds a study made with other settings (now STEPS=5") != std::string::npos);
}

TEST_CASE("train studies: examples/scratch-study.sh RECIPES trains the twins once and evaluates each recipe against them") {
    test::TempDir dir("scratch-recipes");
    test::write_tiny_db(dir / "data" / "db8", dir / "data" / "knn8", 4, 16, 40, 10);
    const std::string bin = fs::path(test::tool_path("retro-train")).parent_path().string();
    auto r = test::run_command("cd " + shell_quote(test::source_dir().string()) +
                               " && STEPS=4 EVAL_BATCHES=1 JOBS=2 THREADS=1 RECIPES='--retrieval-lr-scale 0.5;"
                               "--oracle-neighbours 0.5 --oracle-until 2' CONFIG=" +
                               shell_quote(test::config_path()) + " examples/scratch-study.sh " + shell_quote(bin) + " " +
                               shell_quote((dir / "data").string()) + " " + shell_quote((dir / "out").string()) + " '1 2'");
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(r.out.find("recipe 2: --oracle-neighbours 0.5 --oracle-until 2") != std::string::npos);
    CHECK(r.out.find("recipe 1 seed 2: retrieval") != std::string::npos);
    for (int i : {1, 2}) {
        const std::string summary = test::read_text(dir / "out" / ("summary-r" + std::to_string(i) + ".tsv"));
        CHECK(std::count(summary.begin(), summary.end(), '\n') == 3);   // header, seed 1, seed 2
        for (int s : {1, 2}) {
            const std::string tag = "r" + std::to_string(i) + "-s" + std::to_string(s);
            const auto j = nlohmann::json::parse(test::read_text(dir / "out" / ("eval-" + tag + ".json")));
            CHECK(j["baseline"].get<std::string>() == (dir / "out" / ("twin-s" + std::to_string(s))).string());
            const std::string manifest = test::read_text(dir / "out" / ("retro-" + tag) / "manifest.json");
            CHECK(manifest.find(i == 1 ? "\"retrieval_lr_scale\": 0.5" : "\"oracle_until\": 2") != std::string::npos);
        }
    }
    CHECK_FALSE(fs::exists(dir / "out" / "retro-s1"));   // the single-recipe names are not made
    CHECK_FALSE(fs::exists(dir / "out" / "summary.tsv"));
}

TEST_CASE("train studies: examples/retrofit-study.sh's summary is the eval report's losses, and run again it reuses and resumes") {
    test::TempDir dir("retrofit-study");
    test::write_tiny_db(dir / "data" / "db8", dir / "data" / "knn8", 4, 16, 40, 10);
    const std::string bin = fs::path(test::tool_path("retro-train")).parent_path().string();
    const auto study = [&](const std::string& fit_steps) {
        return test::run_command("cd " + shell_quote(test::source_dir().string()) + " && BASE_STEPS=4 FIT_STEPS=" +
                                 fit_steps + " EVAL_BATCHES=1 THREADS=1 CONFIG=" + shell_quote(test::config_path()) +
                                 " examples/retrofit-study.sh " + shell_quote(bin) + " " +
                                 shell_quote((dir / "data").string()) + " " + shell_quote((dir / "out").string()) + " 1");
    };
    const auto r = study("2");
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(r.out.find("retro-fit vs its continued twin at equal steps, 1 seed(s)") != std::string::npos);
    const auto row_of = [&] {
        std::istringstream row(test::read_text(dir / "out" / "row-s1.tsv"));
        std::vector<double> v(6);
        for (double& x : v) row >> x;
        return v;
    };
    // the row: seed, the retro-fit's loss, its loss on shuffled neighbours, the continued twin's, and the differences
    const auto j = nlohmann::json::parse(test::read_text(dir / "out" / "eval-s1.json"));
    const auto& all = j["filters"].back()["modes"];
    const double fit = all["retrieval"]["loss"], sh = all["shuffled neighbours"]["loss"], tw = all["baseline"]["loss"];
    const std::vector<double> row = row_of();
    CHECK(row[0] == 1);
    CHECK(std::abs(row[1] - fit) <= 1e-4);   // the table prints 4 decimals
    CHECK(std::abs(row[2] - sh) <= 1e-4);
    CHECK(std::abs(row[3] - tw) <= 1e-4);
    CHECK(std::abs(row[4] - (tw - fit)) <= 2e-4);
    CHECK(std::abs(row[5] - (sh - fit)) <= 2e-4);
    CHECK(j["baseline"].get<std::string>() == (dir / "out" / "cont-s1").string());
    // an interrupted base (no model yet) resumes from its last checkpoint, which stays; the finished runs are reused
    const fs::path base = dir / "out" / "base-s1", state = base / "checkpoints" / "step_00000004" / "state.json";
    REQUIRE(fs::exists(state));
    const auto state_time = fs::last_write_time(state), fit_time = fs::last_write_time(dir / "out" / "fit-s1" / "manifest.json");
    fs::remove(base / "model.safetensors");
    fs::remove(base / "manifest.json");
    const auto again = study("2");
    INFO(again.out << again.err);
    CHECK(again.exit_code == 0);
    CHECK(fs::exists(base / "manifest.json"));
    CHECK(fs::last_write_time(state) == state_time);
    CHECK(fs::last_write_time(dir / "out" / "fit-s1" / "manifest.json") == fit_time);
    CHECK(row_of() == row);   // the same runs, the same report
    // other settings in the same OUT_DIR: refused, naming the first difference
    const auto other = study("3");
    CHECK(other.exit_code == 2);
    CHECK(other.err.find("holds a study made with other settings (now FIT_STEPS=3") != std::string::npos);
    // a DATA_DIR without db8/: one line naming it, before anything is made
    const auto no_data = test::run_command("cd " + shell_quote(test::source_dir().string()) + " && examples/retrofit-study.sh " +
                                           shell_quote(bin) + " " + shell_quote(dir.path.string()) + " " +
                                           shell_quote((dir / "out2").string()) + " 1");
    CHECK(no_data.exit_code == 2);
    CHECK(no_data.err == "retrofit-study: error: " + (dir / "db8").string() +
                             " is missing (fix: make db8/ and knn8/ as examples/demo.sh does, or give the folder holding them)\n");
    CHECK_FALSE(fs::exists(dir / "out2"));
}

TEST_CASE("train lr scale: --retrieval-lr-scale steps CCA and the encoder at lr x S (AdamW's ranges), the rest at lr") {
    const RetroConfig c = RetroConfig::load(test::config_path());
    const ParamLayout layout(c);
    const double S = 3.0, lr = 1e-3;
    std::vector<double> scale;
    for (const auto& e : layout.entries()) scale.push_back(param_group(e.name) == ParamGroup::DECODER ? 1.0 : S);
    AdamWConfig oc;
    AdamW<double> scaled(layout, oc, {}, scale), at_lr(layout, oc), at_slr(layout, oc);
    CHECK(scaled.ranges().size() > 1);   // split where the scale changes
    CHECK(AdamW<double>(layout, oc, {}, std::vector<double>(scale.size(), 1.0)).ranges().size() == 1);
    std::mt19937 rng(3);
    std::uniform_real_distribution<double> u(-1, 1);
    std::vector<double> p0(static_cast<std::size_t>(layout.total())), g(p0.size());
    for (auto& x : p0) x = u(rng);
    auto p = p0, a = p0, b = p0;
    for (int step = 0; step < 3; step++) {
        for (auto& x : g) x = u(rng);
        scaled.step(p, g, lr);
        at_lr.step(a, g, lr);
        at_slr.step(b, g, lr * S);
    }
    int checked_scaled = 0;
    for (const auto& e : layout.entries()) {
        const bool retrieval = param_group(e.name) != ParamGroup::DECODER;
        checked_scaled += retrieval;
        const auto& want = retrieval ? b : a;
        bool same = true;
        for (std::int64_t i = e.offset; i < e.offset + e.numel; i++) same = same && p[i] == want[i];
        CAPTURE(e.name);
        CHECK(same);
    }
    CHECK(checked_scaled > 0);
    // the device path's constants: range_scalars scales the step and the decay, nothing else
    const auto base = scaled.next_step_scalars(lr);
    for (std::size_t r = 0; r < scaled.ranges().size(); r++) {
        const auto s = scaled.range_scalars(base, r, lr);
        const double k = scaled.range_lr_scale(r);
        CHECK(s.step_size == doctest::Approx(base.step_size * k));
        CHECK(s.decay == doctest::Approx(1.0 - lr * k * oc.weight_decay));
        CHECK(s.w1 == base.w1);
        CHECK(s.bc2_sqrt == base.bc2_sqrt);
    }
}

TEST_CASE("train lr scale: the GPU path's code on the CPU ops equals --device cpu with it, 1 changes nothing, resume refuses another") {
    test::TempDir dir("lr-scale");
    test::write_tiny_db(dir / "db", dir / "knn", 4, 16, 40, 10);
    const std::string data = "--db " + (dir / "db").string() + " --knn " + (dir / "knn").string() + " --config " +
                             test::config_path() + " --batch-size 4 --val-fraction 0.2 --val-batches 2 --quiet --threads 1"
                             " --lr 3e-3 --warmup 2 --steps 6 --val-every 3 --checkpoint-every 3";
    auto run = [&](const std::string& name, const std::string& extra) {
        auto r = test::run_tool("retro-train", data + extra + " --out " + (dir / name).string());
        INFO(r.err);
        REQUIRE(r.exit_code == 0);
        return test::bytes(dir / name / "model.safetensors");
    };
    const std::string plain = run("plain", ""), one = run("one", " --retrieval-lr-scale 1");
    const std::string cpu = run("cpu", " --retrieval-lr-scale 4"), dev = run("dev", " --retrieval-lr-scale 4 --device host-backend");
    CHECK(one == plain);
    CHECK(cpu != plain);
    CHECK(dev == cpu);
    auto r = test::run_tool("retro-train", data + " --retrieval-lr-scale 2 --resume --out " + (dir / "cpu").string());
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("--retrieval-lr-scale 4") != std::string::npos);
}

TEST_CASE("train oracle: with --oracle-until 1 the first step reads the oracle at the full share, the later ones none") {
    test::TempDir dir("train-oracle-until");
    const std::string common = tiny_recipe_run(dir.path, "--steps 4 --warmup 1 --val-every 4");
    auto none = test::run_tool("retro-train", common + " --out " + (dir / "none").string());
    auto full = test::run_tool("retro-train", common + " --oracle-neighbours 0.5 --out " + (dir / "full").string());
    auto once = test::run_tool("retro-train", common + " --oracle-neighbours 0.5 --oracle-until 1 --out " + (dir / "once").string());
    INFO(once.err);
    REQUIRE(none.exit_code == 0);
    REQUIRE(full.exit_code == 0);
    REQUIRE(once.exit_code == 0);
    const auto n = test::losses(dir / "none"), f = test::losses(dir / "full"), o = test::losses(dir / "once");
    REQUIRE(o.size() >= 2);
    CHECK(o[0] == f[0]);   // step 1: the share is P, the same chunks as P throughout
    CHECK(o[0] != n[0]);
    CHECK(o[1] != f[1]);   // step 2 on: no oracle (the weights differ from the no-oracle run's after step 1)
}
