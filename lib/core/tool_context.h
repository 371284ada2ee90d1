// What a tool run hands the library: the tool's name and its full command line (for manifest.json),
// --quiet/--verbose, the thread count and --no-verify. Filled by the CLI layer (cli/tool_main.h); plain data, no CLI11.
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
    bool verify_inputs = true;  // re-hash the input files read whole against their manifests (off: --no-verify)
};

}  // namespace retro
