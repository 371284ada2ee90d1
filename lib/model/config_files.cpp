// Implementation of config_files.h.
#include "model/config_files.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "core/shipped_data.h"

namespace retro {

namespace fs = std::filesystem;

std::string resolve_model_config(const std::string& given) {
    std::error_code ec;
    // a file there is taken as given; a folder of that name (a run called `demo`) does not hide the shipped config
    if (given.empty() || given.find('/') != std::string::npos) return given;
    if (fs::exists(fs::symlink_status(given, ec)) && !fs::is_directory(given, ec)) return given;
    const std::string shipped = shipped_file(ShippedData::kConfigs, given, ".json");
    return shipped.empty() ? given : shipped;
}

std::vector<std::string> shipped_model_configs() {
    std::vector<std::string> names;
    const std::vector<fs::path> folders = shipped_data_folders(ShippedData::kConfigs);
    if (folders.empty()) return names;
    std::error_code ec;
    for (fs::directory_iterator it(folders.front(), ec), end; !ec && it != end; it.increment(ec))
        if (it->path().extension() == ".json" && it->is_regular_file(ec)) names.push_back(it->path().stem().string());
    std::sort(names.begin(), names.end());
    return names;
}

std::string shipped_configs_hint() {
    const std::vector<std::string> names = shipped_model_configs();
    if (names.empty()) return "give a model config .json file (examples/configs/ in the source tree)";
    std::string list;
    for (const std::string& n : names) list += (list.empty() ? "" : ", ") + n;
    return "give a model config .json file, or a shipped config by name: " + list + " (" +
           shipped_data_folders(ShippedData::kConfigs).front().string() + ")";
}

}  // namespace retro
