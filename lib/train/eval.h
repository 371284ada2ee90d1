// `retro-train eval`: the RETRO paper's evaluation (§2.6, §4.4; docs/retrieval.md) of a trained run on a
// database split. For every evaluated chunk its overlap r with what was retrieved for it
// (train/chunk_overlap.h: longest common token run with its neighbours and their continuations, over
// the chunk's length); loss, perplexity and bits per byte over all chunks and over the chunks with
// r <= alpha, for the same weights in several modes:
//   retrieval            the neighbours of --knn, as training reads them (validation documents masked)
//   no retrieval         CCA skipped (the same weights)
//   shuffled neighbours  every chunk reads the neighbours of another chunk (a derangement): the
//                        control, which must not help
//   baseline             another run (e.g. the --no-retrieval twin), without retrieval
// A label counts for the chunk of the token it predicts; r comes from that chunk's own neighbours,
// as in the paper, whatever a mode reads (overlap_with "own"), or, with overlap_with "read", from what CCA
// reads when it predicts that chunk: the previous chunk's neighbours and their continuations (RETRO.md B.6;
// r = 0 for a sequence's first chunk, which reads nothing). The second shows where a model could copy.
#pragma once
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace retro {

struct RetroConfig;

struct EvalOptions {
    std::string run;               // run folder (config.json + model.safetensors, or --weights)
    std::string weights;           // optional: another .safetensors (e.g. a checkpoint's model.safetensors)
    std::string db, neighbours;    // neighbours optional: without it only the no-retrieval mode, no filter
    std::string baseline;          // optional: another run folder, evaluated without retrieval
    std::string split = "val";     // val | train | all (documents split as retro-train does)
    // NaN: the run's own (its manifest's parameters.val_fraction; 0.05 when the run has no manifest yet)
    double val_fraction = std::numeric_limits<double>::quiet_NaN();
    std::int64_t batch_size = 8;
    std::int64_t max_batches = 0;  // 0 = every sequence of the split
    // which sequences --max-batches keeps: "spread" (evenly spaced over the split, the default: the split runs
    // in document order, so its first batches are a few documents' topics) or "first" (the first ones, as
    // retro-train eval did before 2026-11-27; docs/retrieval.md section 16)
    std::string sample = "spread";
    std::vector<double> alphas = {0.125, 0.25, 0.5, 1.0};
    bool shuffled = true;          // the shuffled-neighbours control (with neighbours)
    std::uint64_t shuffle_seed = 1;
    std::string overlap_with = "own";   // own (the paper's r) | read (the neighbours CCA reads for the chunk)
    // optional .npy: every label's loss (nats, f32) per mode, shape [modes, sequences, seq_len]; NaN at pads.
    // Row s is the s-th evaluated sequence (EvalReport::sequence_first_chunks names its first chunk).
    std::string token_losses;
    bool verify = true;            // re-hash the run's weights, the database and neighbours.npy against their manifests
    // optional, in place of `neighbours`: called once, after the options are checked and the models loaded (and
    // verified), with the run's config; returns the neighbours folder (retro-train eval --index searches here, so a
    // changed run is refused before a search that can take minutes)
    std::function<std::string(const RetroConfig&)> search_neighbours;
};

struct EvalFigures {   // NaN where the filter holds no label
    double loss = 0, perplexity = 0, bpb = 0;
};

struct EvalFilter {
    double alpha = 1;                  // chunks with r <= alpha (1: every chunk)
    std::int64_t chunks = 0, labels = 0, bytes = 0;
    std::vector<EvalFigures> modes;    // in EvalReport::modes order
};

struct EvalReport {
    std::string run, db, knn, baseline, split;
    double val_fraction = 0;           // the share held out (the run's unless --val-fraction said otherwise)
    std::int64_t sequences = 0, seq_len = 0;
    std::int64_t split_sequences = 0;  // sequences in the split; `sequences` of them evaluated
    std::string sample = "all";        // all | spread | first (EvalOptions::sample, "all" when none was cut)
    bool has_bytes = false;            // the database's tokenizer was found: bpb is filled
    bool has_overlap = false;          // neighbours given: filters by r
    double mean_overlap = 0;           // over evaluated chunks
    std::string overlap_with = "own";  // EvalOptions::overlap_with
    std::vector<std::string> modes;
    std::vector<EvalFilter> filters;   // ascending alpha, the last one 1
    std::string token_losses;          // EvalOptions::token_losses (empty: not written)
    std::vector<std::int64_t> sequence_first_chunks;   // with token_losses: the first chunk of each row
    const EvalFilter& all() const { return filters.back(); }
    // loss(a) - loss(b) over every chunk: the gain of b over a (NaN when either mode is absent)
    double loss_minus(const std::string& a, const std::string& b) const;
    nlohmann::json to_json() const;
    std::string to_text() const;
};

EvalReport train_eval(const EvalOptions& opts);

// The files `retro-train eval` writes besides its report (each may be empty: not written), checked before the
// evaluation (hours on a large split): each a file of its own in a folder that takes it (output_file_guard), gnuplot
// there for `plot_png`. UserError naming the option otherwise.
void eval_outputs_check(const std::string& json_out, const std::string& token_losses, const std::string& plot_png);
// The report on stdout (JSON or the table) first, so that a file that fails to write after all still leaves it on
// the screen; then the JSON file and the plot.
void eval_report_write(const EvalReport& report, bool json_stdout, const std::string& json_out,
                       const std::string& plot_png);

// `count` of the split's sequences, as EvalOptions::sample says ("spread" or "first"); all of them when count is
// 0 or not less than the split
std::vector<std::int64_t> sample_sequences(const std::vector<std::int64_t>& split, std::int64_t count,
                                           const std::string& how);

}  // namespace retro
