// CLIP's image preprocessing, as transformers' CLIPImageProcessorPil (and CLIPImageProcessor
// before transformers 5) computes it from preprocessor_config.json:
//   RGB8 --resize (shortest side -> size.shortest_edge, the other int(s · long / short); PIL's
//   resampling, bicubic by default) --> centre crop crop_size (top = (h - ch) / 2, zero padding
//   when smaller) --> x / 255 (rescale_factor) --> (x - image_mean) / image_std --> [3, H, W] floats.
// pil_resize is PIL's Image.resize (libImaging/Resample.c) reproduced operation for operation:
// separable, horizontal pass then vertical, the filter stretched by the scale when shrinking
// (its antialiasing), coefficients normalised and rounded to 22-bit fixed point, each pass rounded
// and clipped to 8 bits; the result equals PIL's byte for byte.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "embed/image_decode.h"

namespace retro {

enum class PilFilter { NEAREST = 0, LANCZOS = 1, BILINEAR = 2, BICUBIC = 3, BOX = 4, HAMMING = 5 };

struct ClipImageConfig {
    bool do_resize = true, do_center_crop = true, do_rescale = true, do_normalize = true;
    int shortest_edge = 224;
    int crop_height = 224, crop_width = 224;
    PilFilter resample = PilFilter::BICUBIC;
    double rescale_factor = 1.0 / 255.0;
    std::array<float, 3> mean{0.48145466f, 0.4578275f, 0.40821073f}, std{0.26862954f, 0.26130258f, 0.27577711f};
};

// Reads preprocessor_config.json (absent keys keep CLIP's defaults above); UserError naming the file
// for a size or resample it cannot follow.
ClipImageConfig clip_image_config_read(const std::string& path);

// PIL's Image.resize(img, (width, height), resample) for 8-bit RGB (NEAREST is not implemented).
RgbImage pil_resize(const RgbImage& img, int width, int height, PilFilter filter);
// The window [x0, x1) x [y0, y1) of pil_resize(img, width, height, filter), the same bits, computed alone (its
// memory the window's and the input rows it reads).
RgbImage pil_resize_window(const RgbImage& img, int width, int height, PilFilter filter, int x0, int x1, int y0, int y1);

// A resized image's long edge at most (an aspect ratio beyond ~75,000:1 at CLIP's 224): past it, refused.
inline constexpr double kMaxResizedEdge = 1 << 24;

// Resize and centre crop (the 8-bit pixels the model sees, before rescale and normalisation): only the crop's part
// of the resized image is computed (a 200,000 x 1 image resized whole took 640 MB). UserError naming `source`
// where the resized long edge would pass kMaxResizedEdge.
RgbImage clip_resize_crop(const RgbImage& img, const ClipImageConfig& cfg, const std::string& source = "the image");
// clip_resize_crop, then rescale and normalise: out [3, crop_height, crop_width] (channels first).
void clip_pixel_values(const RgbImage& img, const ClipImageConfig& cfg, float* out, const std::string& source = "the image");

}  // namespace retro
