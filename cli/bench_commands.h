// retro-bench's subcommands: each one's flags into its options struct (lib/bench/<name>_bench.h) and a callback
// that runs the benchmark with the tool's command line. tool_main has applied --quiet/--verbose/--threads before
// any of these callbacks runs.
// provides: bench_add_subcommands
#pragma once
#include <CLI/CLI.hpp>

#include "core/tool_context.h"

namespace retro::bench {

// Registers retention, chunk, embed, knn, train and generate on the retro-bench app.
void bench_add_subcommands(CLI::App& app, ToolContext& ctx);

}  // namespace retro::bench
