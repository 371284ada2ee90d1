// Implementation of terminal_text.h.
#include "core/terminal_text.h"

#include <nlohmann/json.hpp>

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
    for (std::size_t i = 0; i < text.size(); ++i) {
        const auto c = static_cast<unsigned char>(text[i]);
        const bool kept = !one_line && (c == '\t' || c == '\n');
        if ((c < 0x20 && !kept) || c == 0x7f) {
            escaped(c);
        } else if (c == 0xc2 && i + 1 < text.size() && (static_cast<unsigned char>(text[i + 1]) & 0xe0) == 0x80) {
            // U+0080..U+009F, the C1 controls in UTF-8 (0xc2 0x80..0x9f): U+009B is CSI to a terminal that
            // reads C1 (xterm, the Linux console), as ESC [ is; never printable, so shown as its two bytes.
            escaped(c);
            escaped(static_cast<unsigned char>(text[++i]));
        } else {
            out += text[i];
        }
    }
    return out;
}

std::string json_line(const nlohmann::json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

std::string json_line(const nlohmann::ordered_json& j) {
    return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace retro
