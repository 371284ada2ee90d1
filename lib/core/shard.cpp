// Implementation of shard.h.
#include "core/shard.h"

#include <cstdio>

#include "core/error.h"

namespace retro {

Shard shard_parse(const std::string& text) {
    Shard s;
    char slash = 0;
    int consumed = 0;
    if (std::sscanf(text.c_str(), "%d%c%d%n", &s.index, &slash, &s.count, &consumed) != 3 || slash != '/' ||
        consumed != static_cast<int>(text.size()) || s.count < 1 || s.index < 0 || s.index >= s.count)
        user_error_in("--shard", "'" + text + "' is not i/n with 0 <= i < n", "e.g. --shard 0/4");
    return s;
}

}  // namespace retro
