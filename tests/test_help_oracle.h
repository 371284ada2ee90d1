// The tools' own --help as an oracle (tests/test_shell_completion.cpp, tests/test_docs_commands.cpp): the seven
// tools' names, and each (sub)command's long options and subcommands as CLI11 lists them.
#pragma once
#include <set>
#include <string>

namespace retro::test {

inline const char* const kToolNames[] = {"retro-tokenizer", "retro-chunk",    "retro-index", "retro-knn",
                                         "retro-train",     "retro-generate", "retro-bench"};

struct Help {
    std::set<std::string> options;       // every --long name of the "Options:" lines
    std::set<std::string> subcommands;   // the "Subcommands:" section's names
};

// CLI11's --help of `tool sub` (sub empty: the tool itself), parsed: an option line is indented by two spaces ("  --a,--b
// TEXT ..."); a wrapped description is indented further. REQUIREs the help to succeed.
Help help_of(const std::string& tool, const std::string& sub);

}  // namespace retro::test
