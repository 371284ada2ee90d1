// Implementation of chunk_sources.h.
#include "data/chunk_sources.h"

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace retro {

std::string chunk_source_line(const DocSource& s) {
    nlohmann::ordered_json j;
    j["doc"] = s.doc;
    j["block"] = s.block;
    j["source"] = s.source;
    j["line"] = s.line;
    j["byte_offset"] = s.byte_offset;
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

DocSource chunk_source_parse(const std::string& line, const std::string& where) {
    try {
        auto j = nlohmann::json::parse(line);
        DocSource s;
        s.doc = j.at("doc").get<std::int64_t>();
        s.block = j.at("block").get<std::int64_t>();
        s.source = j.at("source").get<std::string>();
        s.line = j.at("line").get<std::int64_t>();
        s.byte_offset = j.at("byte_offset").get<std::int64_t>();
        return s;
    } catch (const nlohmann::json::exception& e) {
        user_error_in(where, std::string("malformed sources.jsonl line: ") + e.what(), "re-run retro-chunk");
    }
}

}  // namespace retro
