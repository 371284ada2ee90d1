#include "train/eval.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/memory_budget.h"
#include "model/params.h"
#include "model/retro.h"
#include "train/data.h"
#include "train/train_memory.h"

namespace fs = std::filesystem;

namespace retro {

std::vector<EvalResult> train_eval(const EvalOptions& o) {
    if (o.split != "val" && o.split != "train" && o.split != "all")
        user_error_in("--split", "must be val, train or all, got \"" + o.split + "\"");
    if (o.batch_size <= 0) user_error_in("--batch-size", "must be positive");
    const auto config = RetroConfig::load((fs::path(o.run) / "config.json").string());
    const std::string weights = o.weights.empty() ? (fs::path(o.run) / "model.safetensors").string() : o.weights;
    RetroModel<float> model(config);
    params_load(weights, model.params(), model.layout(), config);
    RetroData data(o.db, o.neighbours, config, o.split == "all" ? 0.0 : o.val_fraction);
    const auto& seqs = o.split == "train" || o.split == "all" ? data.train_seqs() : data.val_seqs();
    if (seqs.empty()) user_error_in(o.db, "has no sequences in the " + o.split + " split", "try --split all");
    memory_require("--batch-size", train_memory_bytes(config, o.batch_size, data.seq_len(), !o.neighbours.empty()),
                   "evaluating batches of " + std::to_string(o.batch_size) + " sequences", "a smaller --batch-size");
    std::vector<EvalResult> out;
    for (bool retrieval : {true, false}) {
        if (retrieval && o.neighbours.empty()) continue;
        EvalResult r;
        r.retrieval = retrieval;
        double total = 0;
        RetroBatch batch;
        for (std::size_t i = 0, b = 0; i < seqs.size(); i += o.batch_size, b++) {
            if (o.max_batches > 0 && static_cast<std::int64_t>(b) >= o.max_batches) break;
            std::vector<std::int64_t> ids(seqs.begin() + i, seqs.begin() + std::min(seqs.size(), i + o.batch_size));
            data.make_batch(ids, retrieval, batch);
            const double loss = model.forward(batch);
            total += loss * static_cast<double>(model.label_count());
            r.labels += model.label_count();
            r.sequences += static_cast<std::int64_t>(ids.size());
        }
        r.loss = r.labels ? total / static_cast<double>(r.labels) : std::nan("");
        r.perplexity = std::exp(r.loss);
        out.push_back(r);
    }
    return out;
}

namespace {
std::string quote(const std::string& s) {
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
}
}  // namespace

void train_plot(const std::string& run, const std::string& out_png_in) {
    const fs::path metrics = fs::path(run) / "metrics.jsonl";
    if (!fs::exists(metrics)) user_error_in(metrics.string(), "not found", "plot a folder written by retro-train");
    if (std::system("command -v gnuplot >/dev/null 2>&1") != 0)
        user_error_in("gnuplot", "not found on PATH", "apt-get install gnuplot-nox (Debian/Ubuntu)");
    const std::string out_png = out_png_in.empty() ? (fs::path(run) / "curves.png").string() : out_png_in;
    const std::string train_dat = out_png + ".train.dat", val_dat = out_png + ".val.dat", script = out_png + ".gp";
    std::ifstream in(metrics);
    std::ofstream tr(train_dat), va(val_dat);
    std::string line;
    std::int64_t rows = 0, vrows = 0;
    while (std::getline(in, line)) {
        if (line.empty()) continue;
        nlohmann::json j;
        try {
            j = nlohmann::json::parse(line);
        } catch (...) {
            continue;   // a line cut by a kill
        }
        if (!j.contains("step") || !j.contains("loss")) continue;
        tr << j["step"].get<std::int64_t>() << " " << j["loss"].get<double>() << "\n";
        rows++;
        if (j.contains("val_loss")) {
            va << j["step"].get<std::int64_t>() << " " << j["val_loss"].get<double>() << "\n";
            vrows++;
        }
    }
    tr.close();
    va.close();
    if (rows == 0) user_error_in(metrics.string(), "holds no step lines");
    {
        std::ofstream gp(script);
        gp << "set terminal png size 900,500\nset output " << quote(out_png + ".tmp") << "\n"
           << "set xlabel 'step'\nset ylabel 'loss (nats/token)'\nset grid\nset key top right\n"
           << "set title " << quote("retro-train: " + fs::path(run).filename().string()) << "\n"
           << "plot " << quote(train_dat) << " using 1:2 with lines title 'train'";
        if (vrows) gp << ", " << quote(val_dat) << " using 1:2 with linespoints title 'validation'";
        gp << "\n";
    }
    const int rc = std::system(("gnuplot " + quote(script) + " 2>/dev/null").c_str());
    fs::remove(train_dat);
    fs::remove(val_dat);
    fs::remove(script);
    if (rc != 0 || !fs::exists(out_png + ".tmp")) {
        fs::remove(out_png + ".tmp");
        throw InternalError("gnuplot failed to write " + out_png);
    }
    fs::rename(out_png + ".tmp", out_png);
}

}  // namespace retro
