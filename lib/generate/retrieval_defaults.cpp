// Implementation of retrieval_defaults.h.
#include "generate/retrieval_defaults.h"

#include <filesystem>

#include "core/log.h"
#include "core/manifest.h"
#include "index/index_folder.h"

namespace fs = std::filesystem;

namespace retro {

namespace {

// The path a folder's manifest records for `role`, where the manifest and that path are both there ("" otherwise).
std::string recorded_input(const std::string& folder, const std::string& role) {
    std::error_code ec;
    if (folder.empty() || !fs::is_regular_file(fs::path(folder) / "manifest.json", ec)) return "";
    const std::string path = manifest_input(manifest_read(folder), role);
    return !path.empty() && fs::exists(path, ec) ? path : "";
}

}  // namespace

void retrieval_inputs_default(GenerateOptions& g) {
    if (g.no_retrieval) return;
    if (g.index.empty()) {
        const std::string neighbours = recorded_input(g.run, "neighbours");
        g.index = recorded_input(neighbours, "index");
        if (!g.index.empty()) log_debug("--index " + g.index + " (the index " + g.run + "'s neighbours were searched in)");
    }
    if (g.db.empty() && !g.index.empty()) {
        g.db = index_folder_recorded_db(g.index);
        log_debug("--db " + g.db + " (the database " + g.index + " records)");
    }
}

}  // namespace retro
