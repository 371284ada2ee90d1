// PNG plots with gnuplot: `retro-train plot` (a run's training and validation loss from metrics.jsonl)
// and `retro-train eval --plot` (bits per byte against the overlap filter alpha, one line per mode, as
// RETRO's Figure 6). UserError when gnuplot is not installed (naming the package) or there is nothing
// to plot; the PNG appears only when complete (written to PNG.tmp, then renamed).
#pragma once
#include <string>

namespace retro {

struct EvalReport;

// Writes `out_png` (default RUN/curves.png) from RUN/metrics.jsonl.
void train_plot(const std::string& run, const std::string& out_png);
// What a plot needs before the work that feeds it: gnuplot on PATH, and `out_png` a file that can be written and is
// no input's (output_file_guard; `option` names it in the message). UserError otherwise.
void plot_check(const std::string& out_png, const std::string& option);

// Writes `out_png`: bpb (or loss where the database has no tokenizer) against alpha.
void eval_plot(const EvalReport& report, const std::string& out_png);

}  // namespace retro
