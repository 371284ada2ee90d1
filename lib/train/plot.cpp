#include "train/plot.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/gnuplot.h"
#include "core/log.h"
#include "core/output_folder.h"
#include "core/std_streams.h"
#include "train/eval.h"

namespace fs = std::filesystem;

namespace retro {

namespace {

// A gnuplot single-quoted string (a quote inside is doubled).
std::string quote(const std::string& s) {
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("''") : std::string(1, c);
    return q + "'";
}

void require_gnuplot() {
    if (!gnuplot_available()) user_error_in("gnuplot", "not found on PATH", "apt-get install gnuplot-nox (Debian/Ubuntu)");
}

// Draws `body` (everything after the terminal and output lines, its data inline) and writes the PNG atomically.
void render(const std::string& body, const std::string& out_png) {
    write_file_atomic(out_png, gnuplot_png_bytes(body, 900, 500));
    log_info("wrote " + out_png);
}

}  // namespace

void plot_check(const std::string& out_png, const std::string& option) {
    output_file_guard(out_png, option);
    require_gnuplot();
}

void train_plot(const std::string& run, const std::string& out_png_in) {
    const fs::path metrics = fs::path(run) / "metrics.jsonl";
    if (!fs::exists(metrics)) user_error_in(metrics.string(), "not found", "plot a folder written by retro-train");
    const std::string out_png = out_png_in.empty() ? (fs::path(run) / "curves.png").string() : out_png_in;
    plot_check(out_png, "--out");
    std::ifstream in(metrics);
    std::ostringstream tr, va;   // the curves' rows, inline in the script
    std::string line;
    std::int64_t rows = 0, vrows = 0, line_no = 0, odd = 0, first_odd = 0;
    while (std::getline(in, line)) {
        line_no++;
        if (line.empty()) continue;
        nlohmann::json j;
        try {
            j = nlohmann::json::parse(line);
        } catch (...) {
            continue;   // a line cut by a kill
        }
        if (!j.is_object() || !j.contains("step") || !j.contains("loss")) continue;
        // a step and a loss that are numbers (a diverged step's loss is null; a hand edit may hold anything): the
        // others are left out and counted, not an internal error
        if (!j["step"].is_number_integer() || !j["loss"].is_number()) {
            if (odd++ == 0) first_odd = line_no;
            continue;
        }
        tr << j["step"].get<std::int64_t>() << " " << j["loss"].get<double>() << "\n";
        rows++;
        if (j.contains("val_loss") && j["val_loss"].is_number()) {
            va << j["step"].get<std::int64_t>() << " " << j["val_loss"].get<double>() << "\n";
            vrows++;
        }
    }
    if (odd > 0)
        log_warn(cat(metrics.string(), ": ", odd, odd == 1 ? " line" : " lines", " without a numeric step and loss left out (line ",
                     first_odd, odd > 1 ? " first" : "", ")"));
    if (rows == 0) user_error_in(metrics.string(), "holds no step lines");
    std::ostringstream body;
    body << gnuplot_datablock("train", tr.str()) << (vrows ? gnuplot_datablock("val", va.str()) : std::string())
         << "set xlabel 'step'\nset ylabel 'loss (nats/token)'\nset grid\nset key top right\n"
         << "set title " << quote("retro-train: " + fs::path(run).filename().string()) << "\n"
         << "plot $train using 1:2 with lines title 'train'";
    if (vrows) body << ", $val using 1:2 with linespoints title 'validation'";
    body << "\n";
    render(body.str(), out_png);
}

void eval_plot(const EvalReport& report, const std::string& out_png) {
    if (report.filters.empty() || report.modes.empty()) user_error_in(out_png, "nothing to plot");
    plot_check(out_png, "--plot");
    const bool bpb = report.has_bytes;
    std::ostringstream d;   // a row per filter: alpha, then each mode's figure
    for (const auto& f : report.filters) {
        d << f.alpha;
        for (const auto& m : f.modes) d << " " << (bpb ? m.bpb : m.loss);
        d << "\n";
    }
    std::ostringstream body;
    body << gnuplot_datablock("eval", d.str()) << "set xlabel 'chunks with overlap r <= alpha (alpha)'\nset ylabel "
         << quote(bpb ? "bits per byte" : "loss (nats/token)") << "\nset grid\nset key top left\nset logscale x 2\n"
         << "set title " << quote("retro-train eval: " + fs::path(report.run).filename().string() + " (" +
                                  report.split + " split)")
         << "\nplot ";
    for (std::size_t m = 0; m < report.modes.size(); m++)
        body << (m ? ", " : "") << "$eval using 1:" << m + 2 << " with linespoints title "
             << quote(report.modes[m]);
    body << "\n";
    render(body.str(), out_png);
}

void eval_outputs_check(const std::string& json_out, const std::string& token_losses, const std::string& plot_png) {
    if (json_out.empty() && token_losses.empty() && plot_png.empty()) std_output_required("the report");
    output_file_guard(json_out, "--json-out");
    output_file_guard(token_losses, "--token-losses");
    if (!plot_png.empty()) plot_check(plot_png, "--plot");
}

void eval_report_write(const EvalReport& report, bool json_stdout, const std::string& json_out,
                       const std::string& plot_png) {
    std::fputs(json_stdout ? (report.to_json().dump(2) + "\n").c_str() : report.to_text().c_str(), stdout);
    std::fflush(stdout);
    if (!json_out.empty()) write_file_atomic(json_out, report.to_json().dump(2) + "\n");
    if (!plot_png.empty()) eval_plot(report, plot_png);
}

}  // namespace retro
