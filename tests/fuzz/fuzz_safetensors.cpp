// libFuzzer target: the .safetensors reader must turn any bytes into tensors or a UserError,
// never a crash, a hang or a huge allocation (`make fuzz`). The reader maps a file, so each
// input is written to a temporary file first.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "core/error.h"
#include "core/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static const std::string path = "/tmp/retrokit-fuzz-" + std::to_string(getpid()) + ".safetensors";
    FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) return 0;
    std::fwrite(data, 1, size, f);
    std::fclose(f);
    try {
        retro::SafetensorsFile st(path);
        volatile std::uint8_t sink = 0;
        for (const auto& [name, t] : st.tensors())
            if (t.bytes) sink = sink ^ static_cast<const std::uint8_t*>(t.data)[t.bytes - 1];
    } catch (const retro::UserError&) {
    }
    return 0;
}
