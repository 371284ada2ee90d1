// Implementation of shipped_data.h. CMakeLists.txt defines RETRO_SOURCE_DIR and RETRO_DATADIR_FROM_BIN (the install's
// share/retrokit relative to its bin/) for this file.
#include "core/shipped_data.h"

#include <system_error>

namespace retro {

namespace fs = std::filesystem;

#ifndef RETRO_DATADIR_FROM_BIN
#define RETRO_DATADIR_FROM_BIN "../share/retrokit"
#endif

std::vector<fs::path> shipped_data_folders(ShippedData kind) {
    const char* installed = kind == ShippedData::kConfigs ? "configs" : kind == ShippedData::kPeers ? "peers" : "bert_tiny";
    [[maybe_unused]] const char* source = kind == ShippedData::kConfigs ? "examples/configs"
                                          : kind == ShippedData::kPeers ? "tests/peers"
                                                                        : "tests/reference/golden/bert_tiny";
    std::vector<fs::path> folders;
    std::error_code ec;
    const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    if (!ec) folders.push_back((exe.parent_path() / RETRO_DATADIR_FROM_BIN / installed).lexically_normal());
#ifdef RETRO_SOURCE_DIR
    folders.push_back(fs::path(RETRO_SOURCE_DIR) / source);
#endif
    std::vector<fs::path> found;
    for (const fs::path& f : folders)
        if (fs::is_directory(f, ec)) found.push_back(f);
    return found;
}

std::string shipped_file(ShippedData kind, const std::string& name, const std::string& extension) {
    if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..") return "";
    std::error_code ec;
    for (const fs::path& folder : shipped_data_folders(kind))
        for (const std::string& file : {name, name + extension})
            if (const fs::path p = folder / file; fs::is_regular_file(p, ec)) return p.string();
    return "";
}

}  // namespace retro
