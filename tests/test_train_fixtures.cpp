#include "test_train_fixtures.h"

#include <fstream>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/npy.h"
#include "test_util.h"

namespace fs = std::filesystem;

namespace retro::test {

TinyDb write_tiny_db(const fs::path& db, const fs::path& knn, int cs, int seq_len, int docs, unsigned seed) {
    std::mt19937 rng(seed);
    TinyDb t;
    for (int d = 0; d < docs; d++) {
        std::vector<std::int32_t> ids = {2};
        const int len = 3 + static_cast<int>(rng() % 40);
        std::int32_t prev = 4 + static_cast<std::int32_t>(rng() % 60);
        for (int i = 0; i < len; i++) {   // learnable: mostly a fixed successor
            prev = rng() % 4 == 0 ? 4 + static_cast<std::int32_t>(rng() % 60) : 4 + (prev * 7 + 3) % 60;
            ids.push_back(prev);
        }
        ids.push_back(3);
        const std::int64_t first = t.n;
        const std::int64_t nrows = (static_cast<std::int64_t>(ids.size()) + cs - 1) / cs;
        ids.resize(static_cast<std::size_t>(nrows * cs), 0);
        t.rows.insert(t.rows.end(), ids.begin(), ids.end());
        for (std::int64_t r = 0; r < nrows; r++) t.doc_ids.push_back(d);
        for (std::int64_t r = 0; r < nrows; r += seq_len / cs) t.seq_starts.push_back(first + r);
        t.n += nrows;
        t.doc_offsets.push_back(t.n);
    }
    for (std::int64_t c = 0; c < t.n; c++)
        for (std::int64_t j = 0; j < t.kk; j++) {
            std::int64_t id = static_cast<std::int64_t>(rng() % t.n);
            if (t.doc_ids[id] == t.doc_ids[c] || rng() % 7 == 0) id = -1;
            t.knn.push_back(id);
        }
    save_tiny_db(db, knn, t, cs, seq_len);
    return t;
}

void save_tiny_db(const fs::path& db, const fs::path& knn, const TinyDb& t, int cs, int seq_len, const std::string& tokenizer) {
    fs::create_directories(db);
    fs::create_directories(knn);
    npy_save((db / "chunks.npy").string(), {t.n, cs}, t.rows.data());
    npy_save((db / "doc_ids.npy").string(), {t.n}, t.doc_ids.data());
    npy_save((db / "doc_offsets.npy").string(), {(std::int64_t)t.doc_offsets.size()}, t.doc_offsets.data());
    npy_save((db / "seq_starts.npy").string(), {(std::int64_t)t.seq_starts.size()}, t.seq_starts.data());
    nlohmann::json m = {{"tool", "retro-chunk"},
                        {"parameters", {{"chunk_size", cs}, {"seq_len", seq_len}, {"rows_per_seq", seq_len / cs}}},
                        {"outputs", nlohmann::json::array()}};
    if (!tokenizer.empty()) m["inputs"] = {{{"role", "tokenizer"}, {"path", tokenizer}}};
    write_file_atomic((db / "manifest.json").string(), m.dump(2));
    npy_save((knn / "neighbours.npy").string(), {t.n, t.kk}, t.knn.data());
}

std::string config_path() { return (source_dir() / "examples" / "configs" / "tiny.json").string(); }

std::vector<std::string> losses(const fs::path& run) {
    std::ifstream in(run / "metrics.jsonl");
    std::vector<std::string> out;
    std::string line;
    while (std::getline(in, line)) {
        auto j = nlohmann::json::parse(line);
        out.push_back(j.at("loss").dump() + (j.contains("val_loss") ? " val " + j.at("val_loss").dump() : ""));
    }
    return out;
}

std::string bytes(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}


}  // namespace retro::test
