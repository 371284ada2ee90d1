// Pseudo-word text for tests and `retro-bench chunk`: a fixed lexicon of syllable words drawn with
// Zipf-like frequencies, in sentences and lines, fully determined by a seed. Not language, but
// it tokenises like text (frequent short words, rare long ones).
#pragma once
#include <cstdint>
#include <string>

namespace retro {

// About `bytes` bytes of text (ends at a word boundary, so it may be a little shorter or longer).
std::string synthetic_text(std::uint64_t seed, std::size_t bytes);

// Writes a .jsonl corpus of about `total_bytes` bytes of text: documents of 1..2*mean_doc_bytes
// bytes, one JSON object {"text": ...} per line. Returns the number of documents.
std::int64_t synthetic_jsonl_write(const std::string& path, std::uint64_t seed, std::int64_t total_bytes,
                                   std::int64_t mean_doc_bytes);

}  // namespace retro
