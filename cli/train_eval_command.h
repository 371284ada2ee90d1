// retro-train's `eval` subcommand: its flags into EvalOptions (lib/train/eval.h) and the run that composes
// train/ and index/ — with `--index`, the neighbours searched now (index/knn_build.h's ScratchKnn, once the
// run is verified) — which lib/ cannot do, as train/ does not include index/ (docs/architecture.md).
// provides: TrainEvalCommand, train_eval_subcommand_add, train_eval_command_run
#pragma once
#include <CLI/CLI.hpp>

#include <string>

#include "core/tool_context.h"
#include "train/eval.h"

namespace retro {

struct TrainEvalCommand {
    EvalOptions options;
    std::string index;              // --index: search the neighbours now instead of --knn
    std::string json_out, plot_png;
    bool json_stdout = false, no_shuffled = false;
};

// Registers `eval` on retro-train's app; its flags fill `cmd`, which must outlive the parse and the run.
CLI::App* train_eval_subcommand_add(CLI::App& app, ToolContext& ctx, TrainEvalCommand& cmd);

// Runs the evaluation and writes its report. `top_level_knn`: the parent's --knn / --neighbours, used where
// eval's own --knn is empty (`eval --neighbours DIR` falls through to the parent, which knows that spelling).
void train_eval_command_run(ToolContext& ctx, const TrainEvalCommand& cmd, const std::string& top_level_knn);

}  // namespace retro
