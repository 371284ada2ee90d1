// Implementation of retrieval_defaults.h.
#include "generate/retrieval_defaults.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/log.h"
#include "core/manifest.h"
#include "index/index_folder.h"

namespace fs = std::filesystem;

namespace retro {

namespace {

// The path a folder's manifest records for `role`, where the manifest and that path are both there and the folder
// there is still the one recorded (its folder_fingerprint, where the record has one); "" otherwise, with `why` said
// for a folder made again since.
std::string recorded_input(const std::string& folder, const std::string& role, std::string& why) {
    std::error_code ec;
    if (folder.empty() || !fs::is_regular_file(fs::path(folder) / "manifest.json", ec)) return "";
    const nlohmann::json manifest = manifest_read(folder);
    const std::string path = manifest_input(manifest, role);
    if (path.empty() || !fs::exists(path, ec)) return "";
    const std::string recorded = manifest_input(manifest, role, "fingerprint");
    if (!recorded.empty() && fs::is_regular_file(fs::path(path) / "manifest.json", ec) &&
        folder_fingerprint(manifest_read(path)) != recorded) {
        why = "the " + role + " folder " + path + " was made again after " + folder + " read it";
        return "";
    }
    return path;
}

}  // namespace

void retrieval_inputs_default(GenerateOptions& g) {
    if (g.no_retrieval) return;
    if (g.index.empty()) {
        const std::string neighbours = recorded_input(g.run, "neighbours", g.index_default_why);
        g.index = recorded_input(neighbours, "index", g.index_default_why);
        if (!g.index.empty()) log_debug("--index " + g.index + " (the index " + g.run + "'s neighbours were searched in)");
    }
    if (g.db.empty() && !g.index.empty()) {
        g.db = index_folder_recorded_db(g.index);
        log_debug("--db " + g.db + " (the database " + g.index + " records)");
    }
}

}  // namespace retro
