// Implementation of stdin_text.h.
#include "text/stdin_text.h"

#include <unistd.h>

#include <cstdio>
#include <iostream>

#include "core/error.h"
#include "core/log.h"
#include "core/std_streams.h"
#include "text/utf8.h"

namespace retro {

std::string stdin_text_read(const std::string& what, const std::string& fix, std::size_t max_bytes) {
    if (std_stream_was_closed(STDIN_FILENO))   // (`<&-`: it read the /dev/null put there, "is empty")
        user_error_in("standard input", "is closed: there is no " + what + " to read", fix);
    if (isatty(STDIN_FILENO)) log_info("reading the " + what + " from standard input (end it with Ctrl-D)");
    // at most max_bytes (a text the command takes is far shorter), so that a stream without end (/dev/zero, a runaway
    // pipe) is refused, not read into memory
    std::string text;
    char buf[1 << 16];
    while (text.size() <= max_bytes && std::cin.read(buf, sizeof buf).gcount() > 0)
        text.append(buf, static_cast<std::size_t>(std::cin.gcount()));
    if (std::cin.bad() || std::ferror(stdin))   // a read that failed (a folder: EISDIR) is not an empty text
        user_error_in("standard input", "cannot be read (a folder, or a read error)", fix);
    if (text.size() > max_bytes)
        user_error_in("standard input", cat("holds more than ", max_bytes >> 20, " MiB: not a ", what), fix);
    if (!utf8_valid(text))   // (as one given as an argument is refused: never decoded into replacement marks)
        user_error_in("standard input", "is not UTF-8 text", "convert the " + what + " to UTF-8 (iconv -t UTF-8)");
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
    return text;
}

}  // namespace retro
