// Implementation of shell_quote.h.
#include "core/shell_quote.h"

#include <cctype>

namespace retro {

std::string shell_quote(const std::string& s) {
    bool plain = !s.empty();
    for (char c : s)
        if (!(isalnum(static_cast<unsigned char>(c)) || std::string("-_./=:,+@%").find(c) != std::string::npos))
            plain = false;
    if (plain) return s;
    std::string out = "'";
    for (char c : s) out += (c == '\'') ? std::string("'\\''") : std::string(1, c);
    return out + "'";
}

}  // namespace retro
