// UTF-8 validation: invalid byte sequences are replaced by U+FFFD and counted.
#pragma once
#include <cstdint>
#include <string>

namespace retro {

// Replaces each maximal invalid subsequence with U+FFFD in place; returns how many were replaced.
std::int64_t utf8_sanitize(std::string& s);

}  // namespace retro
