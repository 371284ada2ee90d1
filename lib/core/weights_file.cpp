// Implementation of weights_file.h.
#include "core/weights_file.h"

#include <fstream>

namespace retro {

bool WeightsFile::looks_like_torch(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    unsigned char b[9] = {};
    in.read(reinterpret_cast<char*>(b), 9);
    const std::streamsize n = in.gcount();
    if (n >= 4 && b[0] == 'P' && b[1] == 'K' && ((b[2] == 3 && b[3] == 4) || (b[2] == 5 && b[3] == 6))) return true;
    // the legacy stream opens with PROTO 2..5; a .safetensors file whose header length starts with those two bytes
    // still has its JSON's '{' at byte 8
    return n >= 2 && b[0] == 0x80 && b[1] >= 2 && b[1] <= 5 && !(n == 9 && b[8] == '{');
}

WeightsFile::WeightsFile(const std::string& path) : path_(path), is_torch_(looks_like_torch(path)) {
    if (is_torch_) torch_ = TorchCheckpointFile(path);
    else safetensors_ = SafetensorsFile(path);
}

std::string WeightsFile::wrapper_prefix() const {
    std::string prefix;
    for (;;) {
        bool extended = false;
        for (const char* wrapper : {"module.", "_orig_mod."}) {
            const std::string p = prefix + wrapper;
            bool all = !tensors().empty();
            for (const auto& [name, view] : tensors()) all = all && name.compare(0, p.size(), p) == 0;
            if (all) {
                prefix = p;
                extended = true;
            }
        }
        if (!extended) return prefix;
    }
}

const std::map<std::string, std::string>& WeightsFile::metadata() const {
    static const std::map<std::string, std::string> none;
    return is_torch_ ? none : safetensors_.metadata();
}

}  // namespace retro
