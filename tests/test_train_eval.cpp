// `retro-train eval` (RETRO §2.6 / §4.4): the overlap r against a brute-force oracle, bytes per token,
// and the filtered report on a database whose neighbours are built to overlap (copied documents): chunk
// and label counts per alpha, filtered losses recomputed from the model's logits, bits per byte from the
// tokenizer's pieces, the shuffled control, the JSON and the table.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>

#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/npy.h"
#include "model/params.h"
#include "model/retro.h"
#include "test_chunk_util.h"
#include "test_train_fixtures.h"
#include "test_util.h"
#include "text/token_bytes.h"
#include "text/tokenizer.h"
#include "train/chunk_overlap.h"
#include "train/data.h"
#include "train/eval.h"

using namespace retro;
namespace fs = std::filesystem;

namespace {

// Longest common run by trying every pair of start positions.
int brute_longest_run(const std::vector<std::int32_t>& a, const std::vector<std::int32_t>& b, std::int32_t pad) {
    int best = 0;
    for (std::size_t i = 0; i < a.size(); i++)
        for (std::size_t j = 0; j < b.size(); j++) {
            int len = 0;
            while (i + len < a.size() && j + len < b.size() && a[i + len] != pad && a[i + len] == b[j + len]) len++;
            best = std::max(best, len);
        }
    return best;
}

// Documents of random ids 4..63 (bos 2, eos 3, rows of cs padded with 0); documents d = 1 mod 4 copy
// the one before, so a chunk of such a pair has its twin in the other as neighbour 0 (r = 1); every
// other neighbour is a random chunk of another document (r small).
test::TinyDb write_eval_db(const fs::path& db, const fs::path& knn, const std::string& tokenizer, int cs, int seq_len,
                     int docs) {
    std::mt19937 rng(7);
    test::TinyDb t;
    t.kk = 2;
    std::vector<std::int32_t> ids;
    for (int d = 0; d < docs; d++) {
        if (d % 4 != 1) {
            ids = {2};
            const int len = 6 + static_cast<int>(rng() % 30);
            for (int i = 0; i < len; i++) ids.push_back(4 + static_cast<std::int32_t>(rng() % 60));
            ids.push_back(3);
            ids.resize((ids.size() + cs - 1) / cs * cs, 0);
        }
        const std::int64_t first = t.n, nrows = static_cast<std::int64_t>(ids.size()) / cs;
        t.rows.insert(t.rows.end(), ids.begin(), ids.end());
        for (std::int64_t r = 0; r < nrows; r++) t.doc_ids.push_back(d);
        for (std::int64_t r = 0; r < nrows; r += seq_len / cs) t.seq_starts.push_back(first + r);
        t.n += nrows;
        t.doc_offsets.push_back(t.n);
    }
    for (std::int64_t c = 0; c < t.n; c++) {
        const std::int64_t d = t.doc_ids[c];
        for (int j = 0; j < 2; j++) {
            std::int64_t id = static_cast<std::int64_t>(rng() % t.n);
            if (t.doc_ids[id] == d) id = -1;
            if (j == 0 && d % 4 < 2) id = t.doc_offsets[d ^ 1] + (c - t.doc_offsets[d]);   // the twin
            t.knn.push_back(id);
        }
    }
    test::save_tiny_db(db, knn, t, cs, seq_len, tokenizer);
    return t;
}


}  // namespace

TEST_CASE("eval: longest common run equals a brute-force search, pads never match") {
    std::mt19937 rng(3);
    for (int trial = 0; trial < 2000; trial++) {
        std::vector<std::int32_t> a(rng() % 10), b(rng() % 14);
        for (auto& x : a) x = static_cast<std::int32_t>(rng() % 4);   // 0 = pad
        for (auto& x : b) x = static_cast<std::int32_t>(rng() % 4);
        CHECK(longest_common_run(a.data(), (int)a.size(), b.data(), (int)b.size(), 0) == brute_longest_run(a, b, 0));
    }
    const std::vector<std::int32_t> chunk = {5, 6, 7, 8}, half = {0, 0, 0, 0};
    const std::vector<std::int32_t> nb = {9, 5, 6, 7, 8, 1, 1, 1, /* second neighbour */ 6, 7, 0, 0, 0, 0, 0, 0};
    CHECK(chunk_overlap(chunk.data(), 4, nb.data(), 2, 8, 0) == 1.0);
    CHECK(chunk_overlap(chunk.data(), 4, nb.data() + 8, 1, 8, 0) == 0.5);
    CHECK(chunk_overlap(half.data(), 4, nb.data(), 2, 8, 0) == 0.0);
    const std::vector<std::int32_t> short_chunk = {6, 7, 0, 0};   // 2 ids, both found: r = 1
    CHECK(chunk_overlap(short_chunk.data(), 4, nb.data() + 8, 1, 8, 0) == 1.0);
}

TEST_CASE("eval: bytes per token from the sentencepiece pieces") {
    CHECK(piece_byte_length("\xE2\x96\x81the") == 4);   // "▁the" decodes to " the"
    CHECK(piece_byte_length("<0x0A>") == 1);
    CHECK(piece_byte_length("\xC3\xA9t\xC3\xA9") == 5);  // "été"
    Tokenizer tok(test::chunk_test_tokenizer());
    const auto bytes = token_byte_lengths(tok);
    CHECK(bytes[TOKEN_PAD] == 0);
    CHECK(bytes[TOKEN_EOS] == 0);
    // every ordinary id: its pieces decode to that many bytes (decode drops a leading space once)
    for (int id = 4; id < tok.vocab_size(); id += 7) {
        if (tok.piece(id).rfind("<0x", 0) == 0) continue;   // a lone byte decodes to U+FFFD; it is 1 byte of text
        const std::string text = tok.decode({5, id});   // a leading piece keeps id's own space
        const std::string lead = tok.decode({5});
        CHECK_MESSAGE(static_cast<std::int64_t>(text.size() - lead.size()) == bytes[id], tok.piece(id));
    }
}

TEST_CASE("eval: overlap filters, filtered losses and bits per byte against an oracle") {
    test::TempDir dir("train-eval-r");
    const int cs = 4, seq_len = 16;
    const auto t = write_eval_db(dir / "db", dir / "knn", test::chunk_test_tokenizer(), cs, seq_len, 24);
    const std::string data = "--db " + (dir / "db").string() + " --knn " + (dir / "knn").string();
    auto tr = test::run_tool("retro-train", data + " --config " + test::config_path() + " --out " + (dir / "run").string() +
                                                " --steps 3 --batch-size 4 --val-every 0 --quiet --threads 1");
    REQUIRE_MESSAGE(tr.exit_code == 0, tr.err);

    EvalOptions o;
    o.run = (dir / "run").string();
    o.db = (dir / "db").string();
    o.neighbours = (dir / "knn").string();
    o.split = "all";
    o.batch_size = 5;
    o.alphas = {0.25, 0.5};
    const EvalReport rep = train_eval(o);
    REQUIRE(rep.modes == std::vector<std::string>{"retrieval", "no retrieval", "shuffled neighbours"});
    REQUIRE(rep.filters.size() == 3);
    CHECK(rep.filters.back().alpha == 1.0);
    CHECK(rep.has_bytes);

    // the oracle: every label's chunk, its r by brute force, its loss from the model's logits
    const auto config = RetroConfig::load((dir / "run" / "config.json").string());
    RetroModel<float> model(config);
    params_load((dir / "run" / "model.safetensors").string(), model.params(), model.layout(), config);
    RetroData rd(o.db, o.neighbours, config, 0.0);
    Tokenizer tok(test::chunk_test_tokenizer());
    const std::vector<double> alphas = {0.25, 0.5, 1.0};
    std::vector<double> nats(3, 0), nats_off(3, 0);
    std::vector<std::int64_t> labels(3, 0), bytes(3, 0);
    std::vector<std::set<std::int64_t>> chunks(3);
    // r of chunk `row` against the neighbours (and continuations) of chunk `source` (the paper: source = row)
    auto r_against = [&](std::int64_t row, std::int64_t source) {
        const std::vector<std::int32_t> chunk(t.rows.begin() + row * cs, t.rows.begin() + (row + 1) * cs);
        int len = static_cast<int>(std::count_if(chunk.begin(), chunk.end(), [](std::int32_t x) { return x != 0; }));
        int best = 0;
        for (int j = 0; j < 2; j++) {
            const std::int64_t id = t.knn[source * 2 + j];
            if (id < 0) continue;
            std::vector<std::int32_t> unit(t.rows.begin() + id * cs, t.rows.begin() + (id + 1) * cs);
            const bool cont = id + 1 < t.n && t.doc_ids[id + 1] == t.doc_ids[id] && t.rows[(id + 1) * cs] != 3;   // RP: no EOS-alone row
            for (int c = 0; c < cs; c++) unit.push_back(cont ? t.rows[(id + 1) * cs + c] : 0);
            best = std::max(best, brute_longest_run(chunk, unit, 0));
        }
        return len ? static_cast<double>(best) / len : 0.0;
    };
    auto r_of = [&](std::int64_t row) { return r_against(row, row); };
    struct Label {
        std::int64_t row;
        bool first;   // the sequence's first chunk
        double ce;
    };
    std::vector<Label> seen;   // the retrieval pass's labels
    const auto& seqs = rd.train_seqs();
    for (bool retrieval : {true, false})
        for (std::size_t i = 0; i < seqs.size(); i += 5) {
            std::vector<std::int64_t> ids(seqs.begin() + i, seqs.begin() + std::min(seqs.size(), i + 5));
            RetroBatch batch;
            rd.make_batch(ids, retrieval, batch);
            model.forward(batch);
            const auto& z = model.logits();
            for (std::int64_t b = 0; b < batch.B; b++)
                for (std::int64_t p = 0; p < seq_len; p++) {
                    const std::int32_t label = batch.seq[b * (seq_len + 1) + p + 1];
                    if (label == 0) continue;
                    const float* zz = z.data() + (b * seq_len + p) * config.num_tokens;
                    double lse = 0, mx = *std::max_element(zz, zz + config.num_tokens);
                    for (int v = 0; v < config.num_tokens; v++) lse += std::exp(zz[v] - mx);
                    const double ce = mx + std::log(lse) - zz[label];
                    const std::int64_t row = t.seq_starts[ids[b]] + (p + 1) / cs;
                    if (retrieval) seen.push_back({row, row == t.seq_starts[ids[b]], ce});
                    const double r = r_of(row);
                    for (int f = 0; f < 3; f++)
                        if (r <= alphas[f]) {
                            (retrieval ? nats : nats_off)[f] += ce;
                            if (retrieval) {
                                labels[f]++;
                                bytes[f] += piece_byte_length(tok.piece(label)) * (label > 3);
                                chunks[f].insert(row);
                            }
                        }
                }
        }
    std::int64_t full_overlap = 0;
    for (const auto row : chunks[2]) full_overlap += r_of(row) == 1.0;
    CHECK(full_overlap > 0);                                  // the copies give r = 1 ...
    CHECK(chunks[0].size() > 0);                              // ... and the first documents' chunks low r
    CHECK(chunks[1].size() < chunks[2].size());
    for (int f = 0; f < 3; f++) {
        CAPTURE(alphas[f]);
        const auto& fl = rep.filters[f];
        CHECK(fl.alpha == alphas[f]);
        CHECK(fl.chunks == static_cast<std::int64_t>(chunks[f].size()));
        CHECK(fl.labels == labels[f]);
        CHECK(fl.bytes == bytes[f]);
        // the JSON's share: the filter's chunks over all the chunks, the last filter's (a mutant dividing by the
        // labels survived)
        CHECK(rep.to_json().at("filters")[f].at("share").get<double>() ==
              doctest::Approx(static_cast<double>(chunks[f].size()) / static_cast<double>(chunks[2].size())).epsilon(1e-12));
        CHECK(fl.modes[0].loss == doctest::Approx(nats[f] / labels[f]).epsilon(1e-9));
        CHECK(fl.modes[1].loss == doctest::Approx(nats_off[f] / labels[f]).epsilon(1e-9));
        CHECK(fl.modes[0].perplexity == doctest::Approx(std::exp(nats[f] / labels[f])).epsilon(1e-9));
        CHECK(fl.modes[0].bpb == doctest::Approx(nats[f] / std::log(2.0) / bytes[f]).epsilon(1e-9));
    }
    // --overlap-with read: r against what CCA reads for the chunk, the previous chunk's neighbours (0 first)
    EvalOptions o_read = o;
    o_read.overlap_with = "read";
    o_read.shuffled = false;
    const EvalReport rep_read = train_eval(o_read);
    CHECK(rep_read.overlap_with == "read");
    for (int f = 0; f < 3; f++) {
        CAPTURE(alphas[f]);
        double n_read = 0;
        std::int64_t l_read = 0;
        for (const auto& lab : seen)
            if ((lab.first ? 0.0 : r_against(lab.row, lab.row - 1)) <= alphas[f]) n_read += lab.ce, l_read++;
        CHECK(rep_read.filters[f].labels == l_read);
        CHECK(rep_read.filters[f].modes[0].loss == doctest::Approx(n_read / l_read).epsilon(1e-9));
    }
    CHECK(rep_read.filters[0].labels != rep.filters[0].labels);   // the two overlaps filter differently here
    CHECK(rep_read.to_json()["overlap_with"] == "read");

    // the shuffled control reads other chunks' neighbours: another loss than both
    CHECK(rep.all().modes[2].loss != rep.all().modes[0].loss);
    CHECK(rep.all().modes[2].loss != rep.all().modes[1].loss);
    CHECK(rep.loss_minus("no retrieval", "retrieval") == doctest::Approx(rep.all().modes[1].loss - rep.all().modes[0].loss));

    // the tool: the table, --json, --json-out, a baseline run, and errors
    auto e = test::run_tool("retro-train", "eval --run " + o.run + " " + data + " --split all --alphas 0.25,0.5 --baseline " +
                                               o.run + " --json-out " + (dir / "eval.json").string() + " --quiet");
    REQUIRE_MESSAGE(e.exit_code == 0, e.err);
    CHECK(e.out.find("shuffled neighbours") != std::string::npos);
    CHECK(e.out.find("1 (all)") != std::string::npos);
    const auto j = nlohmann::json::parse(std::ifstream(dir / "eval.json"));
    CHECK(j.at("modes").size() == 4);
    CHECK(j.at("filters").size() == 3);
    // the baseline is this run without retrieval: the same figures as "no retrieval"
    CHECK(j.at("filters")[0].at("modes").at("baseline").at("loss").get<double>() ==
          j.at("filters")[0].at("modes").at("no retrieval").at("loss").get<double>());
    CHECK(j.at("filters")[0].at("chunks").get<std::int64_t>() == rep.filters[0].chunks);
    // --token-losses: every label's loss per mode; their means are the report's losses, NaN at pads
    auto tl = test::run_tool("retro-train", "eval --run " + o.run + " " + data + " --split all --token-losses " +
                                                (dir / "tl.npy").string() + " --json --quiet");
    REQUIRE_MESSAGE(tl.exit_code == 0, tl.err);
    const auto jt = nlohmann::json::parse(tl.out);
    NpyArray losses((dir / "tl.npy").string());
    const std::int64_t S = jt.at("sequences").get<std::int64_t>();
    REQUIRE(losses.shape() == std::vector<std::int64_t>{3, S, seq_len});
    REQUIRE(jt.at("token_losses").at("sequence_first_chunks").size() == static_cast<std::size_t>(S));
    CHECK(jt.at("token_losses").at("sequence_first_chunks")[0].get<std::int64_t>() == t.seq_starts[rd.train_seqs()[0]]);
    for (std::int64_t m = 0; m < 3; m++) {
        double sum = 0;
        std::int64_t count = 0;
        for (std::int64_t i = 0; i < S * seq_len; i++) {
            const float v = losses.data<float>()[m * S * seq_len + i];
            if (!std::isnan(v)) sum += v, count++;
        }
        CHECK(count == jt.at("labels").get<std::int64_t>());
        CHECK(sum / count == doctest::Approx(jt.at("filters").back().at("modes").at(jt.at("modes")[m].get<std::string>())
                                                 .at("loss").get<double>()).epsilon(1e-6));
    }
    // --index: the neighbours searched at eval time give the report of retro-knn's folder from that index
    auto idx = test::run_tool("retro-index", o.db + " --kind bm25 --out " + (dir / "bm25").string() + " --quiet");
    REQUIRE_MESSAGE(idx.exit_code == 0, idx.err);
    auto kn = test::run_tool("retro-knn", (dir / "bm25").string() + " --db " + o.db + " --out " + (dir / "knn-bm25").string() +
                                              " --neighbours 2 --quiet");
    REQUIRE_MESSAGE(kn.exit_code == 0, kn.err);
    const std::string common = "eval --run " + o.run + " --db " + o.db + " --split all --json --quiet";
    auto via_knn = test::run_tool("retro-train", common + " --knn " + (dir / "knn-bm25").string());
    auto via_index = test::run_tool("retro-train", common + " --index " + (dir / "bm25").string());
    REQUIRE_MESSAGE(via_index.exit_code == 0, via_index.err);
    auto jk = nlohmann::json::parse(via_knn.out), ji = nlohmann::json::parse(via_index.out);
    CHECK(ji.at("knn").get<std::string>().find("bm25") != std::string::npos);
    jk.erase("knn");
    ji.erase("knn");
    CHECK(jk == ji);
    auto both = test::run_tool("retro-train", common + " --knn " + (dir / "knn").string() + " --index " + (dir / "bm25").string());
    CHECK(both.exit_code == 2);
    auto bad = test::run_tool("retro-train", "eval --run " + o.run + " " + data + " --alphas 0,0.5 --quiet");
    CHECK(bad.exit_code == 2);
    CHECK(bad.err.find("alpha") != std::string::npos);
    // the options are checked before --index searches: the bad alpha is named, not the (missing) index
    auto bad_first = test::run_tool("retro-train", common + " --index " + (dir / "no-such-index").string() + " --alphas 0");
    CHECK(bad_first.exit_code == 2);
    CHECK(bad_first.err.find("alpha") != std::string::npos);
    // ... and so is an empty split
    auto empty_first = test::run_tool("retro-train", "eval --run " + o.run + " --db " + o.db + " --split val --val-fraction 0 "
                                                     "--quiet --index " + (dir / "no-such-index").string());
    CHECK(empty_first.exit_code == 2);
    CHECK(empty_first.err.find("has no sequences in the val split") != std::string::npos);
}

TEST_CASE("eval: the val split is the run's own --val-fraction unless given, and a larger share is said") {
    test::TempDir dir("train-eval-vf");
    const int cs = 4, seq_len = 16;
    write_eval_db(dir / "db", dir / "knn", test::chunk_test_tokenizer(), cs, seq_len, 24);
    const std::string data = "--db " + (dir / "db").string() + " --knn " + (dir / "knn").string();
    auto tr = test::run_tool("retro-train", data + " --config " + test::config_path() + " --out " + (dir / "run").string() +
                                                " --steps 2 --batch-size 4 --val-every 0 --val-fraction 0.3 --quiet --threads 1");
    REQUIRE_MESSAGE(tr.exit_code == 0, tr.err);
    const RetroConfig config = RetroConfig::load(test::config_path());
    const auto val_sequences = [&](double fraction) {
        return static_cast<std::int64_t>(RetroData((dir / "db").string(), (dir / "knn").string(), config, fraction)
                                             .val_seqs().size());
    };
    REQUIRE(val_sequences(0.3) != val_sequences(0.05));   // the default would be another split
    const std::string common = "eval --run " + (dir / "run").string() + " " + data + " --json";
    auto own = test::run_tool("retro-train", common);
    REQUIRE_MESSAGE(own.exit_code == 0, own.err);
    const auto j = nlohmann::json::parse(own.out);
    CHECK(j.at("val_fraction").get<double>() == 0.3);
    CHECK(j.at("split_sequences").get<std::int64_t>() == val_sequences(0.3));
    CHECK(own.err.find("holds out more") == std::string::npos);
    auto larger = test::run_tool("retro-train", common + " --val-fraction 0.5");
    REQUIRE_MESSAGE(larger.exit_code == 0, larger.err);
    CHECK(nlohmann::json::parse(larger.out).at("val_fraction").get<double>() == 0.5);
    CHECK(larger.err.find("--val-fraction 0.5 holds out more documents than") != std::string::npos);
    auto same = test::run_tool("retro-train", common + " --val-fraction 0.3");   // the run's own share, given: not said
    REQUIRE_MESSAGE(same.exit_code == 0, same.err);                              // (a mutant that said it survived)
    CHECK(same.err.find("holds out more") == std::string::npos);
    auto smaller = test::run_tool("retro-train", common + " --val-fraction 0.1");
    REQUIRE_MESSAGE(smaller.exit_code == 0, smaller.err);
    CHECK(smaller.err.find("holds out more") == std::string::npos);
    CHECK(test::run_tool("retro-train", common + " --val-fraction 1").exit_code == 2);
}

TEST_CASE("eval: --max-batches keeps sequences spread over the split (or the first ones), and says which") {
    std::vector<std::int64_t> split(10);
    for (int i = 0; i < 10; i++) split[static_cast<std::size_t>(i)] = 100 + 3 * i;
    CHECK(sample_sequences(split, 4, "spread") == std::vector<std::int64_t>{100, 106, 115, 121});   // i * 10 / 4
    CHECK(sample_sequences(split, 4, "first") == std::vector<std::int64_t>{100, 103, 106, 109});
    CHECK(sample_sequences(split, 0, "spread") == split);
    CHECK(sample_sequences(split, 10, "spread") == split);
    CHECK(sample_sequences(split, 25, "first") == split);
    // every count: distinct, in split order, reaching past the split's first half
    std::vector<std::int64_t> big(457);
    for (std::size_t i = 0; i < big.size(); i++) big[i] = static_cast<std::int64_t>(i);
    for (std::int64_t count = 1; count < 457; count++) {
        const auto s = sample_sequences(big, count, "spread");
        REQUIRE(static_cast<std::int64_t>(s.size()) == count);
        CHECK(std::is_sorted(s.begin(), s.end()));
        CHECK(std::adjacent_find(s.begin(), s.end()) == s.end());
        CHECK(s.front() == 0);
        CHECK(s.back() >= 457 - (457 + count - 1) / count);   // the last one within a stride of the end
    }

    // the tool: a spread sample reads other sequences than the first ones, and the report names its sample
    test::TempDir dir("train-eval-sample");
    const int cs = 4, seq_len = 16;
    const auto t = write_eval_db(dir / "db", dir / "knn", test::chunk_test_tokenizer(), cs, seq_len, 24);
    const std::string data = "--db " + (dir / "db").string() + " --knn " + (dir / "knn").string();
    auto tr = test::run_tool("retro-train", data + " --config " + test::config_path() + " --out " + (dir / "run").string() +
                                                " --steps 2 --batch-size 4 --val-every 0 --quiet --threads 1");
    REQUIRE_MESSAGE(tr.exit_code == 0, tr.err);
    RetroData rd((dir / "db").string(), (dir / "knn").string(), RetroConfig::load((dir / "run" / "config.json").string()), 0.0);
    const auto& seqs = rd.train_seqs();
    REQUIRE(seqs.size() > 6);
    auto first_chunks = [&](const std::string& sample) {
        auto e = test::run_tool("retro-train", "eval --run " + (dir / "run").string() + " " + data +
                                                   " --split all --batch-size 3 --max-batches 2 --sample " + sample +
                                                   " --token-losses " + (dir / (sample + ".npy")).string() +
                                                   " --json --quiet --threads 1");
        REQUIRE_MESSAGE(e.exit_code == 0, e.err);
        const auto j = nlohmann::json::parse(e.out);
        CHECK(j.at("sample") == sample);
        CHECK(j.at("sequences") == 6);
        CHECK(j.at("split_sequences") == seqs.size());
        return j.at("token_losses").at("sequence_first_chunks").get<std::vector<std::int64_t>>();
    };
    std::vector<std::int64_t> spread_starts, first_starts;
    for (const auto s : sample_sequences(seqs, 6, "spread")) spread_starts.push_back(t.seq_starts[static_cast<std::size_t>(s)]);
    for (const auto s : sample_sequences(seqs, 6, "first")) first_starts.push_back(t.seq_starts[static_cast<std::size_t>(s)]);
    CHECK(first_chunks("spread") == spread_starts);
    CHECK(first_chunks("first") == first_starts);
    CHECK(spread_starts != first_starts);
    auto whole = test::run_tool("retro-train", "eval --run " + (dir / "run").string() + " " + data +
                                                   " --split all --no-shuffled --json --quiet --threads 1");
    REQUIRE_MESSAGE(whole.exit_code == 0, whole.err);
    CHECK(nlohmann::json::parse(whole.out).at("sample") == "all");
    auto bad = test::run_tool("retro-train", "eval --run " + (dir / "run").string() + " " + data + " --sample random --quiet");
    CHECK(bad.exit_code == 2);
    CHECK(bad.err.find("--sample") != std::string::npos);
    auto negative =
        test::run_tool("retro-train", "eval --run " + (dir / "run").string() + " " + data + " --max-batches -1 --quiet");
    CHECK(negative.exit_code == 2);
    CHECK(negative.err.find("--max-batches") != std::string::npos);
}

TEST_CASE("eval: the shuffled control moves every chunk's neighbours away - on two chunks it always swaps them") {
    // The shuffled mode reads each chunk's neighbours from another chunk (a derangement: no chunk keeps its own). On
    // a database of two chunks the only derangement swaps them, whatever --shuffle-seed: chunk 0 then reads chunk 1's
    // neighbours, which differ from its own, so the shuffled loss differs from the retrieval loss for every seed. (A
    // plain shuffle leaves both in place for about half the seeds, and the two losses are then the same number.)
    test::TempDir dir("train-eval-derange");
    const int cs = 4, seq_len = 8;
    test::TinyDb t;
    t.rows = {2, 10, 17, 24, 31, 38, 45, 3};   // one document of two rows: bos, 6 ids, eos
    t.n = 2;
    t.doc_ids = {0, 0};
    t.doc_offsets = {0, 2};
    t.seq_starts = {0};
    t.kk = 2;
    t.knn = {1, -1, 0, -1};   // chunk 0 retrieves chunk 1, chunk 1 chunk 0
    test::save_tiny_db(dir / "db", dir / "knn", t, cs, seq_len);
    const std::string data = "--db " + (dir / "db").string() + " --knn " + (dir / "knn").string();
    auto tr = test::run_tool("retro-train", data + " --config " + test::config_path() + " --out " + (dir / "run").string() +
                                                " --steps 2 --batch-size 1 --val-fraction 0 --val-every 0 --quiet --threads 1");
    REQUIRE_MESSAGE(tr.exit_code == 0, tr.err);
    EvalOptions o;
    o.run = (dir / "run").string();
    o.db = (dir / "db").string();
    o.neighbours = (dir / "knn").string();
    o.split = "all";
    o.batch_size = 1;
    for (std::uint64_t seed = 1; seed <= 8; seed++) {
        CAPTURE(seed);
        o.shuffle_seed = seed;
        const EvalReport rep = train_eval(o);
        REQUIRE(rep.modes.size() == 3);
        REQUIRE(rep.modes[2] == "shuffled neighbours");
        CHECK(rep.all().modes[2].loss != rep.all().modes[0].loss);
    }
}
