// One line of a chunk database's sources.jsonl: where document `doc` came from (file, 1-based jsonl
// line or 0 for a whole file, byte offset of that line) and the input block it was read in (which
// is what lets `retro-chunk merge` interleave shards back into corpus order).
#pragma once
#include <cstdint>
#include <string>

namespace retro {

struct DocSource {
    std::int64_t doc = 0;
    std::int64_t block = 0;
    std::string source;
    std::int64_t line = 0;
    std::int64_t byte_offset = 0;
};

// {"doc":D,"block":B,"source":"PATH","line":L,"byte_offset":O} and a '\n', always in this key order.
std::string chunk_source_line(const DocSource& s);
// Parses a line written by chunk_source_line; `where` (file:line) names it in errors.
DocSource chunk_source_parse(const std::string& line, const std::string& where);

}  // namespace retro
