// retro-train eval's flags and run (train_eval_command.h).
#include "train_eval_command.h"

#include <filesystem>
#include <optional>

#include "core/error.h"
#include "core/manifest.h"
#include "index/knn_build.h"
#include "model/config.h"
#include "tool_main.h"

namespace retro {

CLI::App* train_eval_subcommand_add(CLI::App& app, ToolContext& ctx, TrainEvalCommand& cmd) {
    EvalOptions& e = cmd.options;
    auto* ev = app.add_subcommand(
        "eval", "RETRO's evaluation of a run: loss, perplexity and bits per byte with retrieval, without, with "
                "shuffled neighbours (and a baseline run), over all chunks and filtered by overlap r <= alpha");
    // The run folder as the first word (as retro-generate takes it) or as --run: two options on one string, so that
    // --help lists each once; exactly one of them is needed (checked once parsing is done).
    auto* run_word = ev->add_option("run", e.run, "Run folder (config.json, model.safetensors), required: the first word or --run");
    auto* run_flag = ev->add_option("--run", e.run, "The run folder, where it is not the first word");
    ev->parse_complete_callback([&e, run_word, run_flag] {
        if (run_word->count() > 0 && run_flag->count() > 0)
            throw CLI::ValidationError("the run folder is given twice (as the first word and as --run): give it once");
        if (e.run.empty()) throw CLI::RequiredError("the run folder (the first word, or --run)");
    });
    ev->add_option("--weights,--checkpoint", e.weights,
                   "Weights to use instead of RUN/model.safetensors (a .safetensors file, a checkpoint folder, or a "
                   "RETRO-pytorch state_dict saved with torch.save)");
    ev->add_option("--db", e.db, "Chunk database folder (default: the one the run records)");
    ev->add_option("--knn", e.neighbours, "Neighbours folder (omit: no-retrieval only, no overlap filter)");
    ev->add_option("--index", cmd.index,
                   "Search the neighbours now in this index folder (dense or bm25; own document excluded, "
                   "as retro-knn) instead of --knn");
    ev->add_option("--baseline", e.baseline, "Another run (e.g. the --no-retrieval twin), evaluated without retrieval");
    ev->add_option("--split", e.split, "val, train or all")->check(CLI::IsMember({"val", "train", "all"}))->capture_default_str();
    ev->add_option("--val-fraction", e.val_fraction,
                   "Share of documents held out (default: the run's, from its manifest; 0.05 without one)")
        ->default_str("");   // (not the NaN that stands for "the run's")
    ev->add_option("--batch-size,--batch", e.batch_size, "Sequences per batch")->capture_default_str();
    ev->add_option("--max-batches", e.max_batches, "At most this many batches (0 = all)")->capture_default_str();
    ev->add_option("--sample", e.sample,
                   "Which sequences --max-batches keeps: spread (evenly over the split, which runs in "
                   "document order) or first")
        ->check(CLI::IsMember({"spread", "first"}))->capture_default_str();
    ev->add_option("--alphas", e.alphas, "Overlap filters: chunks with r <= alpha (1 = all chunks is always shown)")
        ->delimiter(',')->capture_default_str();
    ev->add_option("--overlap-with", e.overlap_with,
                   "r against each chunk's own neighbours (own, the paper's) or against what CCA reads when "
                   "predicting it, the previous chunk's neighbours and continuations (read)")
        ->check(CLI::IsMember({"own", "read"}))->capture_default_str();
    ev->add_flag("--no-shuffled", cmd.no_shuffled, "Skip the shuffled-neighbours control");
    ev->add_option("--shuffle-seed", e.shuffle_seed, "Seed of the shuffled neighbours")
        ->transform(non_negative_integer())->capture_default_str();
    ev->add_flag("--json", cmd.json_stdout, "Print the report as JSON instead of the table");
    ev->add_option("--json-out", cmd.json_out, "Also write the JSON report to this file");
    ev->add_option("--token-losses", e.token_losses,
                   "Also write every label's loss as .npy (f32 nats, [modes, sequences, seq_len], NaN at pads; "
                   "the JSON report names each row's first chunk)");
    ev->add_option("--plot", cmd.plot_png, "Write bits per byte against alpha as a PNG (gnuplot)");
    ev->add_option("--threads", ctx.threads, "Threads (0 = all cores)");
    add_no_verify_flag(*ev, e.verify);
    return ev;
}

void train_eval_command_run(ToolContext& ctx, const TrainEvalCommand& cmd, const std::string& top_level_knn) {
    EvalOptions e = cmd.options;   // a copy: its search_neighbours refers to `searched` below, which ends with this call
    if (e.neighbours.empty()) e.neighbours = top_level_knn;
    // --db left out: the database the run records (as retro-generate takes it; --knn stays as given: left out, it means
    // an evaluation without retrieval)
    if (e.db.empty()) {
        if (!std::filesystem::is_directory(e.run)) user_error_in(e.run, "is not a folder", "give a folder retro-train wrote");
        e.db = manifest_recorded_folder(e.run, "db", "database", "the run " + e.run + " was trained on", "--db");
    }
    e.shuffled = !cmd.no_shuffled;
    ctx.verify_inputs = e.verify;   // the search --index runs
    std::optional<ScratchKnn> searched;   // --index: neighbours searched now, removed at the end of this call
    if (!cmd.index.empty()) {
        if (!e.neighbours.empty()) user_error_in("--index", "give --knn or --index, not both");
        e.search_neighbours = [&](const RetroConfig& config) {   // once the run is verified
            searched.emplace(ctx, cmd.index, e.db, config.num_neighbours);
            return searched->dir();
        };
    }
    eval_outputs_check(cmd.json_out, e.token_losses, cmd.plot_png);
    auto report = train_eval(e);
    if (searched) report.knn = "search of " + cmd.index;
    eval_report_write(report, cmd.json_stdout, cmd.json_out, cmd.plot_png);
}

}  // namespace retro
