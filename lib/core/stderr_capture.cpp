// Implementation of stderr_capture.h: dup / dup2 of fd 2 around the call, the text read back from a tmpfile().
#include "core/stderr_capture.h"

#include "core/interrupt_note.h"
#include "core/log.h"

#include <unistd.h>

#include <cstdio>
#include <sstream>

namespace retro {

std::string capture_stderr(const std::function<void()>& fn) {
    std::fflush(stderr);
    std::FILE* file = std::tmpfile();
    const int real = file ? ::dup(2) : -1;
    if (real < 0 || ::dup2(::fileno(file), 2) < 0) {
        if (real >= 0) ::close(real);
        if (file) std::fclose(file);
        fn();
        return "";
    }
    interrupt_note_fd(real);
    // fd 2 back before the note's fd, and `real` closed only after: a signal in between writes to the real stderr
    auto restore = [&] {
        std::fflush(stderr);
        ::dup2(real, 2);
        interrupt_note_fd(2);
        ::close(real);
    };
    try {
        fn();
    } catch (...) {
        restore();
        std::fclose(file);
        throw;
    }
    restore();
    std::string text;
    std::rewind(file);
    char buf[4096];
    for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, file)) > 0;) text.append(buf, n);
    std::fclose(file);
    return text;
}

void pass_on_library_lines(const std::string& library, const std::string& text) {
    std::istringstream lines(text);
    auto trimmed = [](const std::string& s) {
        const auto first = s.find_first_not_of(" \t\r");
        return first == std::string::npos ? std::string() : s.substr(first, s.find_last_not_of(" \t\r") - first + 1);
    };
    for (std::string line; std::getline(lines, line);) {
        line = trimmed(line);
        if (line.rfind("WARNING", 0) == 0) line = trimmed(line.substr(line.size() > 7 && line[7] == ':' ? 8 : 7));
        if (!line.empty()) log_warn(library + ": " + line);
    }
}

}  // namespace retro
