// The files RetroKit ships beside its tools, found from wherever a tool runs: the model configs (`--config demo`),
// the peer scripts retro-bench runs side by side (`--peer rp_generate`), and the tiny BERT the op registry times.
// Installed (`make install`) they are in PREFIX/share/retrokit/<kind>/, found from the tool's bin/ by the install's
// relative layout; a tool run from its build folder finds them in the source tree the library was built from.
// provides: ShippedData, shipped_data_folders, shipped_file
#pragma once
#include <filesystem>
#include <string>
#include <vector>

namespace retro {

enum class ShippedData {
    kConfigs,    // share/retrokit/configs, or examples/configs/
    kPeers,      // share/retrokit/peers, or tests/peers/
    kBertTiny,   // share/retrokit/bert_tiny, or tests/reference/golden/bert_tiny/
};

// The folders of `kind` that exist: the installed one first, then the source tree's.
std::vector<std::filesystem::path> shipped_data_folders(ShippedData kind);

// For a bare name (no '/'): the first regular file NAME or NAME + `extension` in those folders; "" where none is.
std::string shipped_file(ShippedData kind, const std::string& name, const std::string& extension);

}  // namespace retro
