// Implementation of run_folder.h.
#include "train/run_folder.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/fingerprint.h"
#include "core/log.h"
#include "core/manifest.h"
#include "core/output_folder.h"
#include "model/config.h"

namespace fs = std::filesystem;

namespace retro {

std::string checkpoint_dir(const std::string& out, std::int64_t step) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "step_%08lld", static_cast<long long>(step));
    return (fs::path(out) / "checkpoints" / buf).string();
}

std::string latest_checkpoint(const std::string& out) {
    const fs::path dir = fs::path(out) / "checkpoints";
    std::string best;
    if (!fs::exists(dir)) return best;
    for (const auto& e : fs::directory_iterator(dir))
        if (e.is_directory() && fs::exists(e.path() / "DONE") && e.path().filename().string() > fs::path(best).filename().string())
            best = e.path().string();
    return best;
}

std::string folder_outputs_stamp(const std::string& dir) {
    if (dir.empty() || !fs::exists(fs::path(dir) / "manifest.json")) return "";
    static const char* const kRead[] = {"chunks.npy", "doc_ids.npy", "doc_offsets.npy", "seq_starts.npy", "neighbours.npy"};
    nlohmann::json files = nlohmann::json::array();
    const nlohmann::json manifest = manifest_read(dir);   // (named: a loop over a temporary's member would dangle)
    for (const nlohmann::json& o : manifest.at("outputs")) {
        const std::string path = o.is_object() ? o.value("path", std::string()) : std::string();
        if (std::find(std::begin(kRead), std::end(kRead), path) != std::end(kRead))
            files.push_back({path, o.value("fingerprint", std::string())});
    }
    const std::string text = files.dump();
    return fingerprint_bytes(text.data(), text.size());
}

bool holds_run(const std::string& out, bool any_manifest) {
    const fs::path o(out);
    std::error_code ec;   // (an empty metrics.jsonl: written with config.json before the first step, which never ended)
    const bool metrics = fs::exists(o / "metrics.jsonl") && fs::file_size(o / "metrics.jsonl", ec) > 0;
    return fs::exists(o / "checkpoints") || metrics || fs::exists(o / "model.safetensors") ||
           (any_manifest && fs::exists(o / "manifest.json"));
}

void refuse_unclaimed_model_files(const std::string& out, const std::string& config_path) {
    std::error_code ec;
    if (!fs::is_directory(out, ec) || !folder_owner(out).tool.empty()) return;
    const fs::path o(out);
    const std::string fix = "choose another --out, or move the file away yourself: --force would replace it";
    if (fs::exists(o / "model.safetensors", ec))
        user_error_in(out, "holds a model.safetensors no retro-train run claims (no manifest.json, metrics.jsonl or "
                           "checkpoints/ beside it)", fix);
    if (!fs::exists(o / "config.json", ec)) return;
    const nlohmann::json wanted = RetroConfig::load(config_path).to_json();   // (a bad --config named as such)
    bool same = false;   // (one that does not read as a config is not the run's own)
    try {
        same = RetroConfig::load((o / "config.json").string()).to_json() == wanted;
    } catch (const UserError&) {
    }
    if (!same) user_error_in(out, "holds a config.json that is not --config's, and no run of retro-train beside it", fix);
}

void prune_checkpoints(const std::string& out, std::int64_t keep) {
    const fs::path dir = fs::path(out) / "checkpoints";
    if (!fs::exists(dir)) return;
    std::vector<fs::path> done;
    for (const auto& e : fs::directory_iterator(dir)) {
        if (!e.is_directory() || e.path().filename().string().rfind("step_", 0) != 0) continue;
        if (fs::exists(e.path() / "DONE")) {
            done.push_back(e.path());
        } else {
            // called after a save completed: a step folder without DONE is one a kill cut short (while it was written,
            // or while pruning removed it), which nothing reads and which stayed for the run's life (3x the model)
            fs::remove_all(e.path());
        }
    }
    if (keep <= 0) return;
    std::sort(done.begin(), done.end());   // step_%08lld: by name is by step
    for (std::size_t i = 0; i + static_cast<std::size_t>(keep) < done.size(); i++) {
        fs::remove(done[i] / "DONE");   // first: a kill mid-removal leaves an incomplete checkpoint, never a damaged "complete" one
        fs::remove_all(done[i]);
    }
}

std::int64_t metrics_keep_through(const std::string& path, std::int64_t step, std::int64_t known_missing) {
    std::ifstream in(path);
    std::string line, kept;
    std::vector<char> seen(static_cast<std::size_t>(step) + 1, 0);
    std::int64_t unreadable = 0;
    bool last_unreadable = false;
    while (std::getline(in, line)) {
        if (line.empty()) continue;
        last_unreadable = false;
        try {
            const std::int64_t s = nlohmann::json::parse(line).value("step", std::int64_t(0));
            if (s >= 1 && s <= step && !seen[static_cast<std::size_t>(s)]) {
                seen[static_cast<std::size_t>(s)] = 1;
                kept += line + "\n";
            }
        } catch (...) {
            unreadable++;
            last_unreadable = true;
        }
    }
    if (last_unreadable) unreadable--;   // the line a kill cut: expected
    const auto missing = static_cast<std::int64_t>(std::count(seen.begin() + 1, seen.end(), 0));
    if (missing > known_missing || unreadable > 0)
        log_warn(cat(path, ": ", missing, " of the ", step, " steps the checkpoint covers have no line",
                     known_missing > 0 ? cat(" (", known_missing, " of them since an earlier resume)") : std::string(),
                     unreadable > 0 ? cat(" (", unreadable, unreadable == 1 ? " unreadable line" : " unreadable lines", " dropped)") : std::string(),
                     "; the loss curve has a gap there (the weights are the checkpoint's, complete)"));
    write_file_atomic(path, kept);
    return missing;
}

}  // namespace retro
