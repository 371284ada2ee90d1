// retro-bench: benchmarks with a table on stdout and JSON stamped with device, commit, dtype and shapes.
// One subcommand per benchmark, each implemented in lib/bench/<name>_bench.cpp.
#include <memory>

#include "bench/chunk_bench.h"
#include "bench/embed_bench.h"
#include "bench/generate_bench.h"
#include "bench/knn_bench.h"
#include "bench/retention_bench.h"
#include "bench/train_bench.h"
#include "core/tool.h"

namespace {

// retro-bench retention: flags into RetentionBenchOptions.
CLI::App* add_retention(CLI::App& app, retro::bench::RetentionBenchOptions& o) {
    auto* sub = app.add_subcommand("retention", "Retention modes (naive, parallel, recurrent, chunkwise): fwd, fwd+bwd, "
                                                "memory, decode step, chunkwise/parallel crossover, GFLOP/s vs sgemm");
    sub->add_option("--device", o.device, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
    sub->add_option("--modes", o.modes, "Modes to run (comma-separated)")->delimiter(',');
    sub->add_option("--T", o.T, "Sequence lengths (comma-separated; default cpu 256..4096, cuda 1024..16384)")->delimiter(',');
    sub->add_option("--B", o.B, "Batch (0 = default: cpu 4, cuda 8)");
    sub->add_option("--H", o.H, "Heads (0 = default: cpu 8, cuda 32)");
    sub->add_option("--K", o.K, "Key/query head dim (0 = 128)");
    sub->add_option("--V", o.V, "Value head dim (0 = 128)");
    sub->add_option("--dtype", o.dtypes, "cpu: fp32,fp64; cuda: fp32,bf16 (default fp32 on cpu, bf16 on cuda)")->delimiter(',');
    sub->add_option("--chunk-size", o.chunk_size, "Chunk size of the chunkwise mode")->check(CLI::PositiveNumber);
    sub->add_option("--repeats", o.repeats, "Timed repeats per row (median reported, after one warm-up)")->check(CLI::PositiveNumber);
    sub->add_option("--naive-max-T", o.naive_max_T, "Skip naive (O(T^2) memory) above this T");
    sub->add_option("--json", o.json, "Write the results as JSON to this file");
    sub->add_option("--plot", o.plot, "Write a PNG of forward ms vs T (needs gnuplot)");
    return sub;
}

}  // namespace

int main(int argc, char** argv) {
    return retro::tool_main("retro-bench", "RetroKit benchmarks (table on stdout, JSON with --json)", argc, argv,
                            [](CLI::App& app, retro::ToolContext& ctx) -> retro::ToolAction {
                                app.add_option("--threads", ctx.threads, "CPU threads (0 = all cores)");
                                app.require_subcommand(1);
                                auto ret = std::make_shared<retro::bench::RetentionBenchOptions>();
                                CLI::App* ret_cmd = add_retention(app, *ret);
                                retro::bench::bench_chunk_add_subcommand(app, ctx);   // run by their callbacks
                                retro::bench::bench_embed_add_subcommand(app, ctx);
                                retro::bench::bench_knn_add_subcommand(app, ctx);
                                retro::bench::bench_train_add_subcommand(app, ctx);
                                retro::bench::bench_generate_add_subcommand(app, ctx);
                                return [&ctx, ret, ret_cmd] {
                                    if (ret_cmd->parsed()) retro::bench::run_retention_bench(*ret, ctx.command_line);
                                };
                            });
}
