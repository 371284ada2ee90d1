// Decoding one JPEG or PNG file into 8-bit RGB pixels, as PIL's Image.open(path).convert("RGB")
// gives them (what CLIP's image processor starts from): libjpeg-turbo with its defaults (islow
// DCT, fancy upsampling; grey and CMYK/YCCK converted to RGB), libpng with palettes expanded,
// grey replicated, alpha dropped (not composited) and 16-bit samples cut to their high byte (16-bit
// grey: clipped to 255, as PIL's mode I;16; CMYK with Pillow's rounding: docs/embedders.md). The
// format is recognised by the file's first bytes, not its name. A truncated or corrupt file, a
// file that is neither, or an image of 0 pixels is a UserError naming the file.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace retro {

struct RgbImage {
    int width = 0, height = 0;
    std::vector<std::uint8_t> rgb;   // [height, width, 3], row-major
};

RgbImage image_decode(const std::string& path);
// True when the file starts like a JPEG or PNG (what retro-index --images collects from a folder).
bool image_file_sniff(const std::string& path);

}  // namespace retro
