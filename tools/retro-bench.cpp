// retro-bench: benchmarks with a table on stdout and JSON stamped with device, commit, dtype and shapes.
// One subcommand per benchmark: its flags in cli/bench_commands.cpp, its work in lib/bench/<name>_bench.cpp.
#include "bench_commands.h"
#include "tool_main.h"

int main(int argc, char** argv) {
    return retro::tool_main("retro-bench", "RetroKit benchmarks (table on stdout, JSON with --json)", argc, argv,
                            [](CLI::App& app, retro::ToolContext& ctx) -> retro::ToolAction {
                                app.add_option("--threads", ctx.threads, "CPU threads (0 = all cores)");
                                app.require_subcommand(1);
                                retro::bench::bench_add_subcommands(app, ctx);   // each runs from its callback
                                return {};
                            });
}
