// The one UTF-8 decoder step the library shares: how long the well-formed sequence at a byte is (Unicode 15 table
// 3-7: no overlong form, no surrogate, at most U+10FFFF). text/utf8.h's validation and replacement and
// core/terminal_text.h's escaping both walk text with it.
// provides: utf8_sequence_length
#pragma once
#include <cstddef>
#include <string>

namespace retro {

// The length (1-4) of the well-formed UTF-8 sequence starting at s[i], or 0 where none starts there (a stray
// continuation byte, a sequence cut short, a Latin-1 byte). i < s.size().
std::size_t utf8_sequence_length(const std::string& s, std::size_t i);

}  // namespace retro
