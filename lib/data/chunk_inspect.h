// `retro-chunk inspect db/`: a chunk back to text with its document, source and position (--chunk),
// a document's chunks (--doc), or statistics (--stats, the default): counts, tokens per chunk and
// per document, padding, most frequent tokens. Text or JSON (--json) on the given stream.
#pragma once
#include <cstdint>
#include <ostream>
#include <string>

namespace retro {

struct InspectOptions {
    std::string db;
    std::int64_t chunk = -1, doc = -1;
    bool stats = false, json = false;
    std::string tokenizer;   // overrides the one recorded in the manifest
};

void chunk_inspect(const InspectOptions& opts, std::ostream& out);

}  // namespace retro
