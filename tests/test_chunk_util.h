// Helpers for the retro-chunk tests: one small tokenizer per test process (vocab 400, byte
// fallback, trained on pseudo-word text), corpus writers, and byte comparison of two databases.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "test_util.h"

namespace retro::test {

// Path of tok.model, trained on first use.
const std::string& chunk_test_tokenizer();
// A .jsonl corpus of about `bytes` bytes of text in documents of about `mean_doc` bytes.
std::filesystem::path chunk_test_jsonl(const TempDir& dir, const std::string& name, std::int64_t bytes,
                                       std::int64_t mean_doc, std::uint64_t seed = 1);
// A small database made by retro-chunk in dir/db (chunks of 16, sequences of 64) from dir/c.jsonl (~3,000 bytes of
// `seed`'s text, chunk_test_tokenizer); REQUIREs that the tool succeeded. Returns dir/db.
std::filesystem::path chunk_test_db(const TempDir& dir, std::uint64_t seed);
// The five output files of a database, in manifest order.
const std::vector<std::string>& chunk_output_names();
// CHECKs that every output file of `a` equals the one of `b` byte for byte.
void chunk_check_same_bytes(const std::filesystem::path& a, const std::filesystem::path& b);
// CHECKs that `dir` holds nothing that looks complete (no manifest.json, no final output name).
void chunk_check_nothing_complete(const std::filesystem::path& dir);
// Number of lines of s.
int line_count(const std::string& s);

}  // namespace retro::test
