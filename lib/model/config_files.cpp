// Implementation of config_files.h.
#include "model/config_files.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

namespace retro {

namespace fs = std::filesystem;

namespace {

// Where shipped configs may be, in order: the installed tree's (PREFIX/bin/../share/retrokit/configs), then the
// source tree the library was built from (CMakeLists.txt defines RETRO_CONFIGS_DIR for this file).
std::vector<fs::path> config_folders() {
    std::vector<fs::path> folders;
    std::error_code ec;
    const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
#ifndef RETRO_CONFIGS_FROM_BIN
#define RETRO_CONFIGS_FROM_BIN "../share/retrokit/configs"
#endif
    if (!ec) folders.push_back((exe.parent_path() / RETRO_CONFIGS_FROM_BIN).lexically_normal());
#ifdef RETRO_CONFIGS_DIR
    folders.emplace_back(RETRO_CONFIGS_DIR);
#endif
    std::vector<fs::path> found;
    for (const fs::path& f : folders)
        if (fs::is_directory(f, ec)) found.push_back(f);
    return found;
}

}  // namespace

std::string resolve_model_config(const std::string& given) {
    std::error_code ec;
    // a file there is taken as given; a folder of that name (a run called `demo`) does not hide the shipped config
    if (given.empty() || given.find('/') != std::string::npos) return given;
    if (fs::exists(fs::symlink_status(given, ec)) && !fs::is_directory(given, ec)) return given;
    for (const fs::path& folder : config_folders())
        for (const std::string& name : {given, given + ".json"})
            if (const fs::path p = folder / name; name != "." && name != ".." && fs::is_regular_file(p, ec))
                return p.string();
    return given;
}

std::vector<std::string> shipped_model_configs() {
    std::vector<std::string> names;
    const std::vector<fs::path> folders = config_folders();
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
           config_folders().front().string() + ")";
}

}  // namespace retro
