// Errors with exit codes: UserError (bad input or usage, exit 2) and InternalError (a bug, exit 1).
// A user error is one line: "<file>: <problem>[ (fix: <hint>)]". RETRO_CHECK guards internal
// invariants; user paths throw user_error()/user_error_in() instead (STYLE.md item 10).
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace retro {

inline constexpr int EXIT_USER = 2;
inline constexpr int EXIT_INTERNAL = 1;

// Concatenates anything streamable into one string (g++ 12 has no <format>).
template <typename... Args>
std::string cat(Args&&... args) {
    std::ostringstream os;
    (os << ... << std::forward<Args>(args));
    return os.str();
}

struct UserError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

struct InternalError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// Throws a user error about `where` (a path, or a flag such as "--top-p").
[[noreturn]] inline void user_error_in(const std::string& where, const std::string& problem,
                                       const std::string& fix = "") {
    std::string msg = where.empty() ? problem : where + ": " + problem;
    if (!fix.empty()) msg += " (fix: " + fix + ")";
    throw UserError(msg);
}

template <typename... Args>
[[noreturn]] void user_error(Args&&... args) {
    throw UserError(cat(std::forward<Args>(args)...));
}

}  // namespace retro

#define RETRO_CHECK(cond, ...)                                                              \
    do {                                                                                    \
        if (!(cond))                                                                        \
            throw ::retro::InternalError(::retro::cat(__FILE__, ":", __LINE__, ": check '", \
                                                      #cond, "' failed: ", __VA_ARGS__));   \
    } while (0)
