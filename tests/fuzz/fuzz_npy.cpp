// libFuzzer target: the .npy header parser must turn any bytes into a header or a UserError,
// never a crash, a hang or a huge allocation (`make fuzz`).
#include <cstdint>
#include <cstring>

#include "core/error.h"
#include "core/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    try {
        retro::NpyHeader h = retro::npy_parse(data, size, "fuzz.npy");
        // Touch the whole data range the header claims: it must lie inside the input.
        std::size_t bytes = static_cast<std::size_t>(h.numel()) * retro::dtype_size(h.dtype);
        volatile std::uint8_t sink = 0;
        for (std::size_t i = 0; i < bytes; i += 4096) sink = sink ^ data[h.data_offset + i];
        if (bytes) sink = sink ^ data[h.data_offset + bytes - 1];
    } catch (const retro::UserError&) {
    }
    return 0;
}
