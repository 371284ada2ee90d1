// Text made safe to print on a terminal, and JSON made safe to print at all.
// provides: terminal_text, terminal_text_cut, json_line
//
// A corpus, a file name or a decoded chunk may hold control characters (a terminal log's escape sequences, a file
// named with a newline): printed raw they act on the terminal or split a one-line message. terminal_text shows them
// as \xNN. json_line is the one-line dump the tools print, with bytes that are not UTF-8 replaced (U+FFFD) instead
// of failing the dump with an internal error.
#pragma once
#include <nlohmann/json_fwd.hpp>
#include <string>

namespace retro {

// `text` with control characters (C0, DEL, and the C1 controls U+0080..U+009F as their two UTF-8 bytes) and every
// byte that is not part of well-formed UTF-8 shown as \xNN; tab and newline kept unless `one_line`. A literal
// backslash is left as is (decoded text holds them).
std::string terminal_text(const std::string& text, bool one_line = false);

// terminal_text(text, true) cut to at most `max` bytes and "..." where longer: at a character, never inside a UTF-8
// sequence or a \xNN escape (which would print the very bytes terminal_text escapes).
std::string terminal_text_cut(const std::string& text, std::size_t max);

// `j` dumped on one line (no trailing newline), invalid UTF-8 replaced.
std::string json_line(const nlohmann::json& j);
std::string json_line(const nlohmann::ordered_json& j);

}  // namespace retro
