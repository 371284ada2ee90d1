// libFuzzer target: the JPEG and PNG decoders (libjpeg-turbo and libpng behind setjmp/longjmp) must turn any
// bytes into RGB pixels or a UserError, never a crash, a hang or a huge allocation (`make fuzz`). The decoder
// reads a file and picks the format by its first bytes, so each input is written to one temporary file per
// process. Seeds: tests/reference/golden/clip_tiny/images and tests/fuzz/seeds/image.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/error.h"
#include "embed/image_decode.h"

namespace {
const std::string& input_path() {
    static const std::string path = "/tmp/retrokit-fuzz-" + std::to_string(getpid()) + ".img";
    return path;
}
void remove_input() { std::remove(input_path().c_str()); }
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static const bool cleanup = (input_path(), std::atexit(remove_input) == 0);   // the path outlives the handler
    (void)cleanup;
    const std::string& path = input_path();
    FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) return 0;
    std::fwrite(data, 1, size, f);
    std::fclose(f);
    const bool sniffed = retro::image_file_sniff(path);
    try {
        const retro::RgbImage img = retro::image_decode(path);
        // a decoded image: what image_file_sniff accepts, at least one pixel, every pixel there
        if (!sniffed || img.width <= 0 || img.height <= 0 ||
            img.rgb.size() != static_cast<std::size_t>(img.width) * img.height * 3) {
            std::fprintf(stderr, "fuzz_image: %d x %d image, %zu bytes, sniffed %d\n", img.width, img.height,
                         img.rgb.size(), sniffed);
            std::abort();
        }
        volatile std::uint8_t sink = img.rgb.front() ^ img.rgb.back();
        (void)sink;
    } catch (const retro::UserError&) {
    }
    return 0;
}
