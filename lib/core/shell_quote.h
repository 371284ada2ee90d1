// One string as one shell word, for command lines that are recorded (manifest.json) or run (peer scripts).
// provides: shell_quote
#pragma once
#include <string>

namespace retro {

// s unchanged when it is plain (letters, digits, -_./=:,+@%), else in single quotes ('\'' for a quote).
std::string shell_quote(const std::string& s);

}  // namespace retro
