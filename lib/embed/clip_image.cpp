// Implementation of clip_image.h. pil_resize follows Pillow's src/libImaging/Resample.c
// (precompute_coeffs, normalize_coeffs_8bpc, ImagingResampleHorizontal_8bpc / Vertical_8bpc).
#include "embed/clip_image.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/manifest.h"

namespace retro {

namespace {

constexpr int PRECISION_BITS = 32 - 8 - 2;

double sinc(double x) {
    if (x == 0.0) return 1.0;
    x *= M_PI;
    return std::sin(x) / x;
}

double filter_value(PilFilter f, double x) {
    switch (f) {
        case PilFilter::BOX: return (x > -0.5 && x <= 0.5) ? 1.0 : 0.0;
        case PilFilter::BILINEAR:
            if (x < 0.0) x = -x;
            return x < 1.0 ? 1.0 - x : 0.0;
        case PilFilter::HAMMING:
            if (x < 0.0) x = -x;
            if (x == 0.0) return 1.0;
            if (x >= 1.0) return 0.0;
            x *= M_PI;
            return std::sin(x) / x * (0.54 + 0.46 * std::cos(x));
        case PilFilter::BICUBIC: {
            constexpr double a = -0.5;
            if (x < 0.0) x = -x;
            if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
            if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
            return 0.0;
        }
        case PilFilter::LANCZOS: return (-3.0 <= x && x < 3.0) ? sinc(x) * sinc(x / 3) : 0.0;
        default: break;
    }
    return 0.0;
}

double filter_support(PilFilter f) {
    switch (f) {
        case PilFilter::BOX: return 0.5;
        case PilFilter::BILINEAR: case PilFilter::HAMMING: return 1.0;
        case PilFilter::BICUBIC: return 2.0;
        case PilFilter::LANCZOS: return 3.0;
        default: return 0.0;
    }
}

// Per output pixel: the first input pixel, how many, and their fixed-point weights (ksize apart).
struct Coeffs {
    int ksize = 0;
    std::vector<int> first, count, k;
};

// Pillow's coefficients for the output pixels [begin, end) of a resize from in_size to out_size (indexed from begin).
Coeffs precompute_coeffs(int in_size, int out_size, PilFilter filter, int begin, int end) {
    const double in0 = 0.0, in1 = in_size;
    const double scale = (in1 - in0) / out_size;
    const double filterscale = std::max(scale, 1.0);
    const double support = filter_support(filter) * filterscale;
    Coeffs c;
    c.ksize = static_cast<int>(std::ceil(support)) * 2 + 1;
    c.first.resize(static_cast<std::size_t>(end - begin));
    c.count.resize(static_cast<std::size_t>(end - begin));
    c.k.assign(static_cast<std::size_t>(end - begin) * c.ksize, 0);
    std::vector<double> w(c.ksize);
    for (int xx = begin; xx < end; ++xx) {
        const double center = in0 + (xx + 0.5) * scale;
        const double ss = 1.0 / filterscale;
        int xmin = static_cast<int>(center - support + 0.5);   // C's truncation, as Pillow
        if (xmin < 0) xmin = 0;
        int xmax = static_cast<int>(center + support + 0.5);
        if (xmax > in_size) xmax = in_size;
        xmax -= xmin;
        double ww = 0.0;
        for (int x = 0; x < xmax; ++x) {
            w[x] = filter_value(filter, (x + xmin - center + 0.5) * ss);
            ww += w[x];
        }
        const std::size_t at = static_cast<std::size_t>(xx - begin);
        for (int x = 0; x < xmax; ++x) {
            const double v = ww != 0.0 ? w[x] / ww : w[x];
            c.k[at * c.ksize + x] =
                v < 0 ? static_cast<int>(-0.5 + v * (1 << PRECISION_BITS)) : static_cast<int>(0.5 + v * (1 << PRECISION_BITS));
        }
        c.first[at] = xmin;
        c.count[at] = xmax;
    }
    return c;
}

std::uint8_t clip8(int v) {
    v >>= PRECISION_BITS;   // arithmetic shift, as Pillow's lookup index
    return static_cast<std::uint8_t>(v < 0 ? 0 : v > 255 ? 255 : v);
}

}  // namespace

// Each output pixel is its own sum over its input support (Pillow's two passes, horizontal first, each rounded to
// 8 bits), so a window of the output is computed alone with the same bits: the horizontal pass over the input rows
// the window's rows read, for the window's columns, then the vertical pass for its rows.
RgbImage pil_resize_window(const RgbImage& img, int width, int height, PilFilter filter, int x0, int x1, int y0, int y1) {
    RETRO_CHECK(width > 0 && height > 0, "resize to ", width, " x ", height);
    RETRO_CHECK(filter != PilFilter::NEAREST, "nearest resampling is not implemented");
    RETRO_CHECK(0 <= x0 && x0 < x1 && x1 <= width && 0 <= y0 && y0 < y1 && y1 <= height, "resize window [", x0, ", ", x1,
                ") x [", y0, ", ", y1, ") of ", width, " x ", height);
    const bool horizontal = width != img.width, vertical = height != img.height;
    // the input rows [r0, r1) the window's rows read
    Coeffs cv;
    int r0 = y0, r1 = y1;
    if (vertical) {
        cv = precompute_coeffs(img.height, height, filter, y0, y1);
        r0 = img.height;
        r1 = 0;
        for (int i = 0; i < y1 - y0; ++i) {
            r0 = std::min(r0, cv.first[i]);
            r1 = std::max(r1, cv.first[i] + cv.count[i]);
        }
        if (r1 <= r0) r0 = r1 = 0;
    }
    // horizontal pass (or the columns as they are): rows [r0, r1), columns [x0, x1)
    const int ww = x1 - x0;
    RgbImage h;
    h.width = ww;
    h.height = r1 - r0;
    h.rgb.resize(static_cast<std::size_t>(ww) * h.height * 3);
    const Coeffs ch = horizontal ? precompute_coeffs(img.width, width, filter, x0, x1) : Coeffs{};
    for (int y = r0; y < r1; ++y) {
        const std::uint8_t* row = img.rgb.data() + static_cast<std::size_t>(y) * img.width * 3;
        std::uint8_t* o = h.rgb.data() + static_cast<std::size_t>(y - r0) * ww * 3;
        if (!horizontal) {
            std::copy(row + static_cast<std::size_t>(x0) * 3, row + static_cast<std::size_t>(x1) * 3, o);
            continue;
        }
        for (int xx = 0; xx < ww; ++xx) {
            const int* k = ch.k.data() + static_cast<std::size_t>(xx) * ch.ksize;
            for (int c = 0; c < 3; ++c) {
                int ss = 1 << (PRECISION_BITS - 1);
                for (int x = 0; x < ch.count[xx]; ++x) ss += row[(x + ch.first[xx]) * 3 + c] * k[x];
                o[xx * 3 + c] = clip8(ss);
            }
        }
    }
    if (!vertical) return h;
    RgbImage out;
    out.width = ww;
    out.height = y1 - y0;
    const std::size_t stride = static_cast<std::size_t>(ww) * 3;
    out.rgb.resize(stride * out.height);
    for (int yy = 0; yy < out.height; ++yy) {
        const int* k = cv.k.data() + static_cast<std::size_t>(yy) * cv.ksize;
        std::uint8_t* o = out.rgb.data() + stride * yy;
        for (std::size_t i = 0; i < stride; ++i) {
            int ss = 1 << (PRECISION_BITS - 1);
            for (int y = 0; y < cv.count[yy]; ++y) ss += h.rgb[stride * (y + cv.first[yy] - r0) + i] * k[y];
            o[i] = clip8(ss);
        }
    }
    return out;
}

RgbImage pil_resize(const RgbImage& img, int width, int height, PilFilter filter) {
    if (width == img.width && height == img.height) return img;
    return pil_resize_window(img, width, height, filter, 0, width, 0, height);
}

RgbImage clip_resize_crop(const RgbImage& img, const ClipImageConfig& cfg, const std::string& source) {
    int w = img.width, h = img.height;
    if (cfg.do_resize) {
        // transformers' get_resize_output_image_size(default_to_square=False): int(size · long / short)
        const double s = cfg.shortest_edge;
        const double long_edge = img.width <= img.height ? s * img.height / img.width : s * img.width / img.height;
        if (long_edge > kMaxResizedEdge)
            user_error_in(source, cat("is ", img.width, " x ", img.height, " pixels: resized to a shortest edge of ", cfg.shortest_edge,
                                      " its long edge would be ", static_cast<std::int64_t>(long_edge), " pixels (an aspect ratio CLIP "
                                      "cannot use)"),
                          "crop the image to a usual aspect ratio");
        if (img.width <= img.height) {
            w = cfg.shortest_edge;
            h = static_cast<int>(long_edge);
        } else {
            w = static_cast<int>(long_edge);
            h = cfg.shortest_edge;
        }
    }
    if (!cfg.do_center_crop) return cfg.do_resize ? pil_resize(img, w, h, cfg.resample) : img;
    const int ch = cfg.crop_height, cw = cfg.crop_width;
    // Zero padding first when the image is smaller than the crop (left/top get the smaller half).
    const int pad_l = cw > w ? (cw - w) / 2 : 0, pad_t = ch > h ? (ch - h) / 2 : 0;
    const int pw = std::max(cw, w), ph = std::max(ch, h);
    const int top = (ph - ch) / 2, left = (pw - cw) / 2;
    // the crop's part of the resized image, [x0, x1) x [y0, y1): only it is resized (pil_resize_window)
    const int x0 = std::max(0, left - pad_l), x1 = std::min(w, left - pad_l + cw);
    const int y0 = std::max(0, top - pad_t), y1 = std::min(h, top - pad_t + ch);
    const bool resized = cfg.do_resize && (w != img.width || h != img.height);
    const RgbImage r = resized ? pil_resize_window(img, w, h, cfg.resample, x0, x1, y0, y1) : RgbImage{};
    const RgbImage& from = resized ? r : img;
    const int fx = resized ? x0 : 0, fy = resized ? y0 : 0;   // where `from` starts in the resized image
    RgbImage out;
    out.width = cw;
    out.height = ch;
    out.rgb.assign(static_cast<std::size_t>(cw) * ch * 3, 0);
    for (int y = 0; y < ch; ++y) {
        const int sy = y + top - pad_t;
        if (sy < 0 || sy >= h) continue;
        for (int x = 0; x < cw; ++x) {
            const int sx = x + left - pad_l;
            if (sx < 0 || sx >= w) continue;
            for (int c = 0; c < 3; ++c)
                out.rgb[(static_cast<std::size_t>(y) * cw + x) * 3 + c] =
                    from.rgb[(static_cast<std::size_t>(sy - fy) * from.width + (sx - fx)) * 3 + c];
        }
    }
    return out;
}

void clip_pixel_values(const RgbImage& img, const ClipImageConfig& cfg, float* out, const std::string& source) {
    const RgbImage r = clip_resize_crop(img, cfg, source);
    const std::size_t plane = static_cast<std::size_t>(r.width) * r.height;
    for (std::size_t i = 0; i < plane; ++i)
        for (int c = 0; c < 3; ++c) {
            float v = r.rgb[i * 3 + c];
            if (cfg.do_rescale) v = static_cast<float>(static_cast<double>(v) * cfg.rescale_factor);
            if (cfg.do_normalize) v = (v - cfg.mean[c]) / cfg.std[c];
            out[c * plane + i] = v;
        }
}

ClipImageConfig clip_image_config_read(const std::string& path) {
    ClipImageConfig c;
    if (!std::filesystem::exists(path)) return c;   // CLIP's defaults (the openai checkpoints' values)
    nlohmann::json j = json_read_file(path);
    if (!j.is_object()) user_error_in(path, "is not a JSON object", "restore the checkpoint's preprocessor_config.json");
    auto flag = [&](const char* key, bool& v) {
        if (j.contains(key) && j[key].is_boolean()) v = j[key].get<bool>();
    };
    flag("do_resize", c.do_resize);
    flag("do_center_crop", c.do_center_crop);
    flag("do_rescale", c.do_rescale);
    flag("do_normalize", c.do_normalize);
    if (j.contains("do_convert_rgb") && j["do_convert_rgb"].is_boolean() && !j["do_convert_rgb"].get<bool>())
        user_error_in(path, "sets do_convert_rgb false; images are always read as RGB here", "remove the key");
    if (j.contains("size")) {
        const auto& s = j["size"];
        if (s.is_number_integer()) c.shortest_edge = s.get<int>();
        else if (s.is_object() && s.contains("shortest_edge") && s["shortest_edge"].is_number_integer())
            c.shortest_edge = s["shortest_edge"].get<int>();
        else user_error_in(path, "has a \"size\" other than {\"shortest_edge\": N}", "only CLIP's shortest-edge resize is supported");
    }
    if (j.contains("crop_size")) {
        const auto& s = j["crop_size"];
        if (s.is_number_integer()) c.crop_height = c.crop_width = s.get<int>();
        else if (s.is_object() && s.contains("height") && s.contains("width")) {
            c.crop_height = s["height"].get<int>();
            c.crop_width = s["width"].get<int>();
        } else user_error_in(path, "has a \"crop_size\" other than {\"height\": H, \"width\": W}", "restore the checkpoint's own preprocessor_config.json");
    }
    if (c.shortest_edge < 1 || c.crop_height < 1 || c.crop_width < 1)
        user_error_in(path, "has a size or crop_size below 1 pixel", "restore the checkpoint's own preprocessor_config.json");
    if (j.contains("resample")) {
        const int r = j["resample"].is_number_integer() ? j["resample"].get<int>() : -1;
        if (r < 1 || r > 5) user_error_in(path, cat("has resample ", j["resample"].dump(), "; supported: PIL's 1..5 (lanczos, bilinear, bicubic, box, hamming)"), "restore the checkpoint's own preprocessor_config.json");
        c.resample = static_cast<PilFilter>(r);
    }
    if (j.contains("rescale_factor") && j["rescale_factor"].is_number()) c.rescale_factor = j["rescale_factor"].get<double>();
    for (auto [key, arr] : {std::pair{"image_mean", &c.mean}, std::pair{"image_std", &c.std}}) {
        if (!j.contains(key)) continue;
        if (!j[key].is_array() || j[key].size() != 3) user_error_in(path, std::string("\"") + key + "\" is not 3 numbers", "restore the checkpoint's own preprocessor_config.json");
        for (int i = 0; i < 3; ++i) (*arr)[i] = j[key][i].get<float>();
    }
    for (float s : c.std)
        if (!(s > 0)) user_error_in(path, "has an image_std that is not positive", "restore the checkpoint's own preprocessor_config.json");
    return c;
}

}  // namespace retro
