// What a tool run hands the library: the tool's name and its full command line (for manifest.json),
// --quiet/--verbose and the thread count. Filled by the CLI layer (cli/tool_main.h); plain data, no CLI11.
// provides: ToolContext
#pragma once
#include <string>

namespace retro {

struct ToolContext {
    std::string tool;           // e.g. "retro-tokenizer"
    std::string command_line;   // the full command line, each word shell_quote()d, for manifests
    bool quiet = false;
    bool verbose = false;
    int threads = 0;            // 0 = all cores
};

}  // namespace retro
