// Implementation of weights_file.h.
#include "core/weights_file.h"

#include <fstream>

namespace retro {

bool WeightsFile::looks_like_torch(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    unsigned char b[9] = {};
    in.read(reinterpret_cast<char*>(b), 9);
    const std::streamsize n = in.gcount();
    if (starts_as_zip(b, static_cast<std::size_t>(n))) return true;
    // the legacy stream opens with PROTO 2..5; a .safetensors file whose header length starts with those two bytes
    // still has its JSON's '{' at byte 8
    return n >= 2 && b[0] == 0x80 && b[1] >= 2 && b[1] <= 5 && !(n == 9 && b[8] == '{');
}

WeightsFile::WeightsFile(const std::string& path) : path_(path), is_torch_(looks_like_torch(path)) {
    if (is_torch_) torch_ = TorchCheckpointFile(path);
    else safetensors_ = SafetensorsFile(path);
}

std::string WeightsFile::prefix_holding(const std::string& name) const {
    if (tensors().empty() || has(name)) return "";
    const std::string& first = tensors().begin()->first;
    // the wrappers' prefix, peeled off the first name: "module." (DataParallel, DDP) and "_orig_mod."
    // (torch.compile) in any nesting
    std::size_t at = 0;
    for (;;) {
        if (first.compare(at, 7, "module.") == 0) at += 7;
        else if (first.compare(at, 10, "_orig_mod.") == 0) at += 10;
        else break;
    }
    const std::string wrappers = first.substr(0, at);
    // the longest dotted prefix every name shares (a LightningModule's attribute holding the model: "retro.")
    std::size_t common = first.rfind('.') == std::string::npos ? 0 : first.rfind('.') + 1;
    for (const auto& [other, view] : tensors()) {
        std::size_t n = 0;
        while (n < common && n < other.size() && other[n] == first[n]) ++n;
        if (n < common) common = n == 0 ? 0 : first.rfind('.', n - 1) + 1;   // back to the last dot both share
        if (common == 0) break;
    }
    for (const std::string& prefix : {wrappers, first.substr(0, common)}) {
        if (prefix.empty() || !has(prefix + name)) continue;
        bool all = true;
        for (const auto& [other, view] : tensors()) all = all && other.compare(0, prefix.size(), prefix) == 0;
        if (all) return prefix;
    }
    return "";
}

std::string weights_file_where(const WeightsFile& f) {
    if (!f.is_torch()) return "";
    const std::string n = std::to_string(f.tensors().size());
    return f.nested_key().empty() ? " (among its " + n + " tensors)"
                                  : " (among the " + n + " tensors of the state_dict under '" + f.nested_key() + "')";
}

const std::map<std::string, std::string>& WeightsFile::metadata() const {
    static const std::map<std::string, std::string> none;
    return is_torch_ ? none : safetensors_.metadata();
}

}  // namespace retro
