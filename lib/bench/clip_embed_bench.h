// retro-bench embed --embedder clip: images/s of the clip embedder's image path, timed as
// ClipEmbedder::embed_images runs it for retro-index --images: decode (libjpeg / libpng) + CLIP
// preprocessing (PIL-exact resize, centre crop, normalise) + vision tower + projection + L2, on the
// files of --images DIR or, by default, --image-count synthetic images (deterministic from --seed,
// odd sizes 321..639 x 241..479, three of four JPEG quality 90, one of four PNG) written to a temp
// folder (or kept in --images-out). With --peer (tests/peers/clip_embed.py) transformers'
// CLIPModel.get_image_features with CLIPImageProcessorPil on the same files, threads and batch,
// side by side (--rounds: side_by_side.h). CPU only.
#pragma once
#include <string>
#include <vector>

#include "bench/embed_bench.h"
#include "embed/image_decode.h"

namespace retro::bench {

// Synthetic image i of a seed: a colour gradient, a few filled rectangles and discs, mild noise
// (about the entropy of a photo, so that JPEG decoding costs what it would); width and height odd.
RgbImage synthetic_image(std::uint64_t seed, std::int64_t i);
// Writes `count` of them into dir (made if absent) as img_00000.jpg / .png; returns the paths in order.
std::vector<std::string> write_synthetic_images(const std::string& dir, std::int64_t count, std::uint64_t seed);

void run_clip_embed_bench(const EmbedBenchOptions& opt, const std::string& command_line);

}  // namespace retro::bench
