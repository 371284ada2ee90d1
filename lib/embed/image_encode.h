// Writing 8-bit RGB pixels (image_decode.h's RgbImage) as a PNG (lossless, libpng defaults) or a
// baseline JPEG (libjpeg-turbo, the given quality, 4:2:0 chroma), written to a temporary name and
// renamed into place. Used for synthetic benchmark images (retro-bench embed --embedder clip); a
// file that cannot be written is a UserError naming it.
#pragma once
#include <string>

#include "embed/image_decode.h"

namespace retro {

void image_write_png(const std::string& path, const RgbImage& img);
void image_write_jpeg(const std::string& path, const RgbImage& img, int quality = 90);

}  // namespace retro
