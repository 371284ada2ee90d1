// What the encoder reads for a neighbour (data/neighbour_window.h): the longest shared run and the aligned
// window against a brute-force search over every pair of start positions, a planted copy whose continuation
// lands at the continuation positions, pads outside the document, the min-match filter, the config fields,
// and RetroData's batches reading exactly these windows.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <random>

#include "data/chunk_db.h"
#include "data/neighbour_window.h"
#include "model/config.h"
#include "test_train_fixtures.h"
#include "test_util.h"
#include "train/data.h"

using namespace retro;
namespace fs = std::filesystem;

namespace {

// Documents of ids from a small alphabet (so short runs are common); document 3 copies a stretch of
// document 1 at another offset, so long runs exist too. Neighbours: random chunks of other documents.
test::TinyDb write_match_db(const fs::path& db, const fs::path& knn, int cs, unsigned seed) {
    std::mt19937 rng(seed);
    test::TinyDb t;
    std::vector<std::vector<std::int32_t>> docs;
    for (int d = 0; d < 8; d++) {
        std::vector<std::int32_t> ids = {2};
        const int len = 20 + static_cast<int>(rng() % 30);
        for (int i = 0; i < len; i++) ids.push_back(4 + static_cast<std::int32_t>(rng() % 6));
        if (d == 3) ids.insert(ids.begin() + 5, docs[1].begin() + 3, docs[1].begin() + 3 + 2 * cs);
        ids.push_back(3);
        docs.push_back(ids);
    }
    for (std::size_t d = 0; d < docs.size(); d++) {
        auto ids = docs[d];
        const std::int64_t nrows = (static_cast<std::int64_t>(ids.size()) + cs - 1) / cs;
        ids.resize(static_cast<std::size_t>(nrows * cs), 0);
        t.rows.insert(t.rows.end(), ids.begin(), ids.end());
        for (std::int64_t r = 0; r < nrows; r++) t.doc_ids.push_back(static_cast<std::int64_t>(d));
        for (std::int64_t r = 0; r < nrows; r += 2) t.seq_starts.push_back(t.n + r);
        t.n += nrows;
        t.doc_offsets.push_back(t.n);
    }
    for (std::int64_t c = 0; c < t.n; c++)
        for (std::int64_t j = 0; j < t.kk; j++) {
            std::int64_t id = static_cast<std::int64_t>(rng() % t.n);
            if (t.doc_ids[id] == t.doc_ids[c]) id = -1;
            t.knn.push_back(id);
        }
    test::save_tiny_db(db, knn, t, cs, 2 * cs);
    return t;
}

// The oracle: every (query start, text start) pair, the rules of neighbour_match (longest; ties to the run
// ending latest in the query, then to the earliest text position), over chunks id-1 .. id+1 of id's document.
NeighbourMatch brute_match(const test::TinyDb& t, int cs, const std::int32_t* q, std::int64_t id) {
    const std::int64_t doc = t.doc_ids[id];
    const std::int64_t first = std::max(id - 1, t.doc_offsets[doc]), end = std::min(id + 2, t.doc_offsets[doc + 1]);
    const std::vector<std::int32_t> text(t.rows.begin() + first * cs, t.rows.begin() + end * cs);
    int best = 0, best_qend = -1, best_tend = -1;
    for (int qs = 0; qs < cs; qs++)
        for (int ts = 0; ts < static_cast<int>(text.size()); ts++) {
            int len = 0;
            while (qs + len < cs && ts + len < static_cast<int>(text.size()) && q[qs + len] != 0 &&
                   q[qs + len] == text[ts + len])
                len++;
            if (len == 0) continue;
            const int qend = qs + len - 1, tend = ts + len - 1;
            if (len > best || (len == best && (qend > best_qend || (qend == best_qend && tend < best_tend))))
                best = len, best_qend = qend, best_tend = tend;
        }
    NeighbourMatch m;
    m.run = best;
    if (best >= kMinAlignRun) m.offset = (first - id) * cs + best_tend - best_qend;
    return m;
}

}  // namespace

TEST_CASE("neighbour window: the match and the aligned window equal a brute-force search") {
    test::TempDir dir("neighbour-window");
    const int cs = 8;
    const auto t = write_match_db(dir / "db", dir / "knn", cs, 11);
    ChunkDb db((dir / "db").string());
    std::mt19937 rng(3);
    int aligned = 0, long_runs = 0;
    for (std::int64_t row = 0; row < t.n; row++)
        for (std::int64_t id = 0; id < t.n; id += 1 + static_cast<std::int64_t>(rng() % 3)) {
            const std::int32_t* q = t.rows.data() + row * cs;
            const NeighbourMatch got = neighbour_match(db, q, id, 0), want = brute_match(t, cs, q, id);
            CAPTURE(row);
            CAPTURE(id);
            REQUIRE(got.run == want.run);
            REQUIRE(got.offset == want.offset);
            std::vector<std::int32_t> w(2 * cs);
            neighbour_window(db, id, got.offset, 0, w.data());
            // the window holds the document's tokens from chunk id's start + offset, pads outside it
            const std::int64_t doc = t.doc_ids[id];
            for (int i = 0; i < 2 * cs; i++) {
                const std::int64_t p = id * cs + got.offset + i;
                const bool inside = p >= t.doc_offsets[doc] * cs && p < t.doc_offsets[doc + 1] * cs;
                REQUIRE(w[i] == (inside ? t.rows[p] : 0));
            }
            if (got.run >= kMinAlignRun && got.offset != 0) {
                aligned++;
                // the shared run sits at the query's own positions somewhere in [0, cs)
                int in_place = 0, run = 0;
                for (int i = 0; i < cs; i++) run = (q[i] != 0 && w[i] == q[i]) ? run + 1 : 0, in_place = std::max(in_place, run);
                CHECK(in_place >= got.run);
            }
            long_runs += got.run >= cs;
        }
    CHECK(aligned > 20);    // the small alphabet gives shifted runs ...
    CHECK(long_runs > 0);   // ... and the copied stretch whole chunks
}

TEST_CASE("neighbour window: a run the neighbour's text holds twice aligns at its earlier copy") {
    // (the random documents above never tie two copies of one run, so a mutant preferring the later copy survived:
    // session 61) document 0 holds 40 41 42 43 in row 0 and again in row 1; the query (document 1) holds it once
    test::TempDir dir("neighbour-window-tie");
    const int cs = 8;
    test::TinyDb t;
    t.rows = {2, 50, 40, 41, 42, 43, 51, 52, 53, 54, 55, 40, 41, 42, 43, 56, 57, 58, 3, 0, 0, 0, 0, 0,
              2, 60, 61, 40, 41, 42, 43, 62, 63, 3, 0, 0, 0, 0, 0, 0};
    t.doc_ids = {0, 0, 0, 1, 1};
    t.doc_offsets = {0, 3, 5};
    t.seq_starts = {0, 3};
    t.n = 5;
    t.knn.assign(static_cast<std::size_t>(t.n * t.kk), -1);
    test::save_tiny_db(dir / "db", dir / "knn", t, cs, 2 * cs);
    ChunkDb db((dir / "db").string());
    const std::int32_t* q = t.rows.data() + 3 * cs;   // 2 60 61 40 41 42 43 62
    const NeighbourMatch got = neighbour_match(db, q, 1, 0), want = brute_match(t, cs, q, 1);
    CHECK(got.run == 4);
    CHECK(got.offset == -8 + 2 - 3);   // row 0's copy (text position 2) under the query's (position 3); row 1's: +9
    CHECK(got.run == want.run);
    CHECK(got.offset == want.offset);
}

TEST_CASE("neighbour window: RETRO's unit takes the continuation exactly where RETRO-pytorch's RETRODataset does") {
    // The oracle is RP's rule on RP's layout (RETRO.md A.6): row j has cs + 1 ids (its own, then the next row's first
    // id within the document, else pad); the continuation is row min(j + 1, N - 1), zeroed where those cs + 1 ids
    // hold EOS. Documents of every length mod cs, so some end in a row holding the EOS alone (which RetroKit took as
    // a continuation until session 61: an RP user's comparison found it).
    test::TempDir dir("neighbour-window-rp");
    const int cs = 4;
    test::TinyDb t;
    for (int d = 0; d < 12; d++) {
        std::vector<std::int32_t> ids = {2};
        for (int i = 0; i < 5 + d; i++) ids.push_back(10 + (d * 7 + i) % 50);
        ids.push_back(3);
        const std::int64_t nrows = (static_cast<std::int64_t>(ids.size()) + cs - 1) / cs;
        ids.resize(static_cast<std::size_t>(nrows * cs), 0);
        t.rows.insert(t.rows.end(), ids.begin(), ids.end());
        for (std::int64_t r = 0; r < nrows; r++) t.doc_ids.push_back(d);
        t.seq_starts.push_back(t.n);
        t.n += nrows;
        t.doc_offsets.push_back(t.n);
    }
    t.knn.assign(static_cast<std::size_t>(t.n * t.kk), -1);
    test::save_tiny_db(dir / "db", dir / "knn", t, cs, 2 * cs);
    ChunkDb db((dir / "db").string());
    const auto row = [&](std::int64_t j, int i) { return t.rows[static_cast<std::size_t>(j * cs + i)]; };
    int eos_alone = 0;
    for (std::int64_t j = 0; j < t.n; j++) {
        bool eos = false;   // RP: EOS among row j's cs ids and its extra id
        for (int i = 0; i < cs; i++) eos = eos || row(j, i) == 3;
        const bool next_same_doc = j + 1 < t.n && t.doc_ids[j + 1] == t.doc_ids[j];
        eos = eos || (next_same_doc && row(j + 1, 0) == 3);
        eos_alone += next_same_doc && row(j + 1, 0) == 3;
        const std::int64_t next = std::min(j + 1, t.n - 1);
        std::vector<std::int32_t> want(2 * cs), got(2 * cs);
        for (int i = 0; i < cs; i++) {
            want[i] = row(j, i);
            want[cs + i] = eos ? 0 : row(next, i);
        }
        db.neighbour_tokens(j, got.data());
        CAPTURE(j);
        CHECK(got == want);
        // the read training, eval and retro-generate make: the same unit, with the min-match filter on too (a query
        // sharing the chunk's own tokens passes it)
        std::vector<std::int32_t> query(t.rows.begin() + j * cs, t.rows.begin() + (j + 1) * cs);
        for (const int min_match : {0, 1}) {
            std::fill(got.begin(), got.end(), -1);
            CHECK(neighbour_read(db, NeighbourAlignment::chunk, min_match, query.data(), j, 0, got.data()));
            CHECK(got == want);
        }
    }
    CHECK(eos_alone == 3);   // documents 2, 6 and 10 end in a row of the EOS alone
}

TEST_CASE("neighbour window: a planted copy's continuation lands at the continuation positions") {
    test::TempDir dir("neighbour-window-copy");
    const int cs = 8;
    const auto t = write_match_db(dir / "db", dir / "knn", cs, 5);
    ChunkDb db((dir / "db").string());
    // document 3 holds doc 1's tokens 3 .. 3+2cs at its position 5: a query = doc 1's tokens 3 .. 3+cs
    const std::int64_t d1 = t.doc_offsets[1] * cs, d3 = t.doc_offsets[3] * cs;
    std::vector<std::int32_t> query(t.rows.begin() + d1 + 3, t.rows.begin() + d1 + 3 + cs);
    const std::int64_t id = (d3 + 5) / cs;   // the chunk of document 3 where the copy starts
    std::vector<std::int32_t> w(2 * cs), plain(2 * cs);
    REQUIRE(neighbour_read(db, NeighbourAlignment::match, 0, query.data(), id, 0, w.data()));
    for (int i = 0; i < 2 * cs; i++) CHECK(w[i] == t.rows[d1 + 3 + i]);   // the query, then what followed it
    db.neighbour_tokens(id, plain.data());
    REQUIRE(neighbour_read(db, NeighbourAlignment::chunk, 0, query.data(), id, 0, w.data()));
    CHECK(w == plain);                                                     // RETRO's unit, unchanged
    // the filter: a neighbour sharing less than min_match tokens is not read
    std::vector<std::int32_t> other(static_cast<std::size_t>(cs), 60);    // an id no document holds
    CHECK_FALSE(neighbour_read(db, NeighbourAlignment::chunk, 2, other.data(), id, 0, w.data()));
    CHECK(std::all_of(w.begin(), w.end(), [](std::int32_t x) { return x == 0; }));
    CHECK(neighbour_read(db, NeighbourAlignment::chunk, cs, query.data(), id, 0, w.data()));
    CHECK(w == plain);
}

TEST_CASE("neighbour window: config fields, and batches read the aligned windows") {
    auto c = RetroConfig::load(test::config_path());
    CHECK(c.neighbour_alignment == "chunk");
    CHECK_FALSE(c.to_json().contains("neighbour_alignment"));
    CHECK_FALSE(c.to_json().contains("neighbour_min_match"));
    auto j = c.to_json();
    j["neighbour_alignment"] = "match";
    j["neighbour_min_match"] = 3;
    const auto m = RetroConfig::from_json(j, "x");
    CHECK(m.neighbour_alignment == "match");
    CHECK(m.neighbour_min_match == 3);
    CHECK(RetroConfig::from_json(m.to_json(), "x").neighbour_alignment == "match");
    j["neighbour_alignment"] = "offset";
    CHECK_THROWS_AS(RetroConfig::from_json(j, "x"), UserError);
    j["neighbour_alignment"] = "match";
    j["neighbour_min_match"] = c.chunk_size + 1;
    CHECK_THROWS_AS(RetroConfig::from_json(j, "x").validate("x"), UserError);

    test::TempDir dir("neighbour-window-batch");
    const int cs = static_cast<int>(c.chunk_size);
    const auto t = write_match_db(dir / "db", dir / "knn", cs, 9);
    ChunkDb db((dir / "db").string());
    for (const auto& [align, min_match] : {std::pair<std::string, int>{"chunk", 0}, {"match", 0}, {"match", 2}}) {
        CAPTURE(align);
        CAPTURE(min_match);
        RetroConfig cfg = c;
        cfg.neighbour_alignment = align;
        cfg.neighbour_min_match = min_match;
        cfg.num_neighbours = 2;
        RetroData data((dir / "db").string(), (dir / "knn").string(), cfg, 0.0);
        std::vector<std::int64_t> seqs(data.train_seqs().begin(), data.train_seqs().begin() + 6);
        RetroBatch batch;
        data.make_batch(seqs, true, batch);
        const std::int64_t l = batch.n / cs, r = 2 * cs;
        for (std::int64_t b = 0; b < batch.B; b++) {
            const std::int64_t c0 = t.seq_starts[seqs[b]], end = t.doc_offsets[t.doc_ids[c0] + 1];
            for (std::int64_t u = 0; u < l; u++)
                for (std::int64_t k = 0; k < 2; k++) {
                    const std::int64_t row = c0 + u, id = row < end ? t.knn[row * t.kk + k] : -1;
                    std::vector<std::int32_t> want(static_cast<std::size_t>(r), 0);
                    if (id >= 0)
                        neighbour_read(db, neighbour_alignment_from_string(align), min_match,
                                       t.rows.data() + row * cs, id, 0, want.data());
                    const std::int32_t* got = batch.retrieved.data() + ((b * l + u) * 2 + k) * r;
                    REQUIRE(std::equal(want.begin(), want.end(), got));
                }
        }
    }
}
