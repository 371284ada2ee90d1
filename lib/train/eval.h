// `retro-train eval` and `retro-train plot`: loss and perplexity of a trained run on a database, with and
// without retrieval (the same weights, CCA skipped without neighbours), and a PNG of a run's curves via gnuplot.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace retro {

struct EvalOptions {
    std::string run;               // run folder (config.json + model.safetensors, or --weights)
    std::string weights;           // optional: another .safetensors (e.g. a checkpoint's model.safetensors)
    std::string db, neighbours;    // neighbours optional: without it only the no-retrieval row
    std::string split = "val";     // val | train | all (documents split as retro-train does)
    double val_fraction = 0.05;
    std::int64_t batch_size = 8;
    std::int64_t max_batches = 0;  // 0 = every sequence of the split
};

struct EvalResult {
    bool retrieval = false;
    double loss = 0, perplexity = 0;
    std::int64_t sequences = 0, labels = 0;
};

std::vector<EvalResult> train_eval(const EvalOptions& opts);

// Writes `out_png` (default RUN/curves.png) from RUN/metrics.jsonl with gnuplot; UserError when gnuplot
// is not installed (with the package to install) or the run has no metrics.
void train_plot(const std::string& run, const std::string& out_png);

}  // namespace retro
