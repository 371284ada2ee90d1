// Implementation of utf8.h (Unicode 15 table 3-7 well-formed sequences; overlongs and
// surrogates are invalid).
#include "text/utf8.h"

#include <cstdio>

#include "core/error.h"
#include "core/utf8_sequence.h"

namespace retro {

std::int64_t utf8_sanitize(std::string& s) {
    std::size_t i = 0;
    while (i < s.size() && static_cast<unsigned char>(s[i]) < 0x80) ++i;
    if (i == s.size()) return 0;   // fast path: ASCII
    std::string out = s.substr(0, i);
    std::int64_t replaced = 0;
    while (i < s.size()) {
        std::size_t len = utf8_sequence_length(s, i);
        if (len) {
            out.append(s, i, len);
            i += len;
        } else {
            out += "\xEF\xBF\xBD";
            ++replaced;
            ++i;
            while (i < s.size() && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) ++i;
        }
    }
    s.swap(out);
    return replaced;
}

bool utf8_valid(const std::string& s) {
    for (std::size_t i = 0; i < s.size();) {
        if (static_cast<unsigned char>(s[i]) < 0x80) {
            ++i;
            continue;
        }
        const std::size_t len = utf8_sequence_length(s, i);
        if (!len) return false;
        i += len;
    }
    return true;
}

std::string utf8_escape_invalid(const std::string& s) {
    std::string out;
    for (std::size_t i = 0; i < s.size();) {
        const std::size_t len = utf8_sequence_length(s, i);
        if (len) {
            out.append(s, i, len);
            i += len;
            continue;
        }
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned char>(s[i]));
        out += buf;
        ++i;
    }
    return out;
}

void utf8_require_path(const std::string& path, const std::string& what) {
    if (utf8_valid(path)) return;
    user_error_in(utf8_escape_invalid(path), "is " + what + " whose path is not valid UTF-8, and RetroKit records paths in "
                                                      "JSON (manifests, sources.jsonl), which holds UTF-8 only",
                  "rename it, e.g. `convmv -f latin1 -t utf8 --notest`");
}

}  // namespace retro
