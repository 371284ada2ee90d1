// The frame every tools/*.cpp main runs in: CLI11 parsing, --quiet/--verbose/--version/--threads,
// and the mapping of exceptions to exit codes (UserError -> 2, anything else -> 1) with one line
// on stderr. A tool's setup() declares flags and returns the action to run after parsing.
#pragma once
#include <CLI/CLI.hpp>

#include <functional>
#include <string>

namespace retro {

struct ToolContext {
    std::string tool;           // e.g. "retro-tokenizer"
    std::string command_line;   // the full command line, shell-quoted, for manifests
    bool quiet = false;
    bool verbose = false;
    int threads = 0;            // 0 = all cores
};

using ToolAction = std::function<void()>;
using ToolSetup = std::function<ToolAction(CLI::App& app, ToolContext& ctx)>;

int tool_main(const std::string& tool, const std::string& description, int argc, char** argv,
              const ToolSetup& setup);

std::string shell_quote(const std::string& s);

}  // namespace retro
