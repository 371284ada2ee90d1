// Implementation of terminal_text.h.
#include "core/terminal_text.h"

#include <nlohmann/json.hpp>

#include "core/utf8_sequence.h"

namespace retro {

std::string terminal_text(const std::string& text, bool one_line) {
    static const char hex[] = "0123456789abcdef";
    std::string out;
    out.reserve(text.size());
    const auto escaped = [&](unsigned char c) {
        out += "\\x";
        out += hex[c >> 4];
        out += hex[c & 15];
    };
    for (std::size_t i = 0; i < text.size();) {
        const auto c = static_cast<unsigned char>(text[i]);
        const std::size_t n = utf8_sequence_length(text, i);
        const bool kept = !one_line && (c == '\t' || c == '\n');
        if (n == 1 && ((c < 0x20 && !kept) || c == 0x7f)) {
            escaped(c);
        } else if (n == 0) {
            // not UTF-8 (a Latin-1 file name, a chunk cut inside a character): a lone 0x9b is CSI to a terminal that
            // is not in UTF-8 mode, and JSON readers of the line choke on it
            escaped(c);
        } else if (n == 2 && c == 0xc2 && static_cast<unsigned char>(text[i + 1]) < 0xa0) {
            // U+0080..U+009F, the C1 controls in UTF-8 (0xc2 0x80..0x9f): U+009B is CSI to a terminal that
            // reads C1 (xterm, the Linux console), as ESC [ is; never printable, so shown as its two bytes.
            escaped(c);
            escaped(static_cast<unsigned char>(text[i + 1]));
        } else {
            out.append(text, i, n);
        }
        i += n == 0 ? 1 : n;
    }
    return out;
}

std::string terminal_text_cut(const std::string& text, std::size_t max) {
    const std::string s = terminal_text(text, true);
    if (s.size() <= max) return s;
    std::size_t cut = max;
    while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xc0) == 0x80) --cut;   // a continuation byte
    for (std::size_t back = 1; back <= 3 && back <= cut; ++back)
        if (s[cut - back] == '\\' && s[cut - back + 1] == 'x') {   // inside "\xNN"
            cut -= back;
            break;
        }
    return s.substr(0, cut) + "...";
}

std::string json_line(const nlohmann::json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

std::string json_line(const nlohmann::ordered_json& j) {
    return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace retro
