// UTF-8 validation: invalid byte sequences are replaced by U+FFFD and counted.
#pragma once
#include <cstdint>
#include <string>

namespace retro {

// Replaces each maximal invalid subsequence with U+FFFD in place; returns how many were replaced.
std::int64_t utf8_sanitize(std::string& s);

// Whether `s` is valid UTF-8.
bool utf8_valid(const std::string& s);
// `s` with each byte of an invalid sequence written as \xNN: a path or argument a message can show.
std::string utf8_escape_invalid(const std::string& s);

// UserError naming `path` (escaped) unless it is valid UTF-8: the tools record paths in JSON (manifests, journals,
// sources.jsonl), which holds UTF-8 only — a Latin-1 file name was found only when the manifest was written, after the
// work, and left a folder no rerun could finish. `what`: "a corpus file", "an image", ...
void utf8_require_path(const std::string& path, const std::string& what);

}  // namespace retro
