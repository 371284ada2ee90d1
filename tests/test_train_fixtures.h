// Fixtures shared by the training tests (test_train.cpp, test_train_retrofit.cpp): a tiny chunk database with
// neighbours, the tiny model config, and readers of a run folder's metrics and files.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace retro::test {

// A database in retro-chunk's layout: docs of bos ids eos, rows of cs ids (last row padded with 0),
// a sequence every rows_per_seq rows of a document. Neighbours: k+1 per chunk from other documents, some -1.
struct TinyDb {
    std::vector<std::int32_t> rows;
    std::vector<std::int64_t> doc_ids, doc_offsets{0}, seq_starts, knn;
    std::int64_t n = 0, kk = 3;
};

// Writes t as a database folder (retro-chunk's files and manifest, naming `tokenizer` when not empty) and
// t.knn as knn/neighbours.npy.
void save_tiny_db(const std::filesystem::path& db, const std::filesystem::path& knn, const TinyDb& t, int cs, int seq_len,
                  const std::string& tokenizer = "");
TinyDb write_tiny_db(const std::filesystem::path& db, const std::filesystem::path& knn, int cs, int seq_len, int docs,
                     unsigned seed);
std::string config_path();                                             // examples/configs/tiny.json
std::vector<std::string> losses(const std::filesystem::path& run);    // per metrics line: loss [val val_loss]
std::string bytes(const std::filesystem::path& p);                     // a file's bytes

}  // namespace retro::test
