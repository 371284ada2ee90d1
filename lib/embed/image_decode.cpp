// Implementation of image_decode.h: libjpeg (libjpeg62-turbo) and libpng, errors turned into
// UserError through setjmp/longjmp as both libraries require.
#include "embed/image_decode.h"

#include <algorithm>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>

#include <jpeglib.h>
#include <png.h>

#include "core/error.h"
#include "core/lfs_pointer.h"
#include "embed/image_lib_errors.h"

namespace retro {

namespace {

using namespace image_errors;

constexpr std::int64_t kMaxPixels = std::int64_t(1) << 28;   // 268 M pixels: refuse decompression bombs
constexpr std::size_t kMaxExpansion = 1024;                    // JPEG: RGB bytes per file byte reserved up front

// Grows `pixels` to `n` bytes as rows are decoded, doubling its capacity but never past `total` (the image's
// size): a file whose data ends early fails after costing about what it held, not what its header claimed.
void grow_rows(std::vector<std::uint8_t>& pixels, std::size_t n, std::size_t total) {
    if (n > pixels.capacity()) pixels.reserve(std::min(total, std::max(n, 2 * pixels.capacity())));
    pixels.resize(n);
}

struct FileCloser {
    void operator()(FILE* f) const { if (f) std::fclose(f); }
};

enum class Format { JPEG, PNG, OTHER };

// The format by the first bytes; for a PNG also the IHDR size, so that 0 x N is named as such
// (libpng's own message would be "Image width is zero in IHDR").
Format sniff(const std::string& path, std::size_t& size, std::int64_t* png_w = nullptr, std::int64_t* png_h = nullptr) {
    if (std::error_code ec; std::filesystem::is_directory(path, ec))   // (an ifstream opens a folder and reads nothing)
        user_error_in(path, "is a folder, not an image file", "give one JPEG or PNG file");
    std::ifstream in(path, std::ios::binary | std::ios::ate);
    if (!in) user_error_in(path, "cannot be opened", "check the path and its permissions");
    size = static_cast<std::size_t>(in.tellg());
    in.seekg(0);
    unsigned char head[24] = {0};
    in.read(reinterpret_cast<char*>(head), 24);
    const std::streamsize got = in.gcount();
    if (got >= 3 && head[0] == 0xFF && head[1] == 0xD8 && head[2] == 0xFF) return Format::JPEG;
    static const unsigned char png_sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
    if (got >= 8 && std::memcmp(head, png_sig, 8) == 0) {
        if (got == 24 && png_w && png_h && std::memcmp(head + 12, "IHDR", 4) == 0) {
            auto be32 = [&](int at) {
                return (std::int64_t(head[at]) << 24) | (std::int64_t(head[at + 1]) << 16) | (std::int64_t(head[at + 2]) << 8) | head[at + 3];
            };
            *png_w = be32(16);
            *png_h = be32(20);
        }
        return Format::PNG;
    }
    return Format::OTHER;
}

void check_size(const std::string& path, std::int64_t w, std::int64_t h) {
    if (w <= 0 || h <= 0) user_error_in(path, cat("is an image of ", w, " x ", h, " pixels (nothing to embed)"), "remove it");
    if (w * h > kMaxPixels) user_error_in(path, cat("is ", w, " x ", h, " pixels, more than the ", kMaxPixels, " this decoder accepts"),
                                      "downscale it (e.g. ImageMagick's `convert IN -resize 8192x8192 OUT`) or remove it");
}

// ---- JPEG ----

// A corrupt-data warning (premature end of file, bad Huffman code) is an error here: PIL would
// raise on a truncated file too ("image file is truncated").
void jpeg_warn(j_common_ptr cinfo, int level) {
    if (level < 0) jpeg_fail(cinfo);
}

// One RGB channel from CMYK as Pillow's cmyk2rgb (Convert.c): nk - c·nk/255 rounded as its MULDIV255, nk = 255 - K.
std::uint8_t cmyk_channel(int c, int nk) {
    const int t = c * nk + 128;
    return static_cast<std::uint8_t>(std::clamp(nk - (((t >> 8) + t) >> 8), 0, 255));
}

// A JPEG's scans code every 8 x 8 block of a component they cover, Huffman-coded with at least one bit a block
// (the DC difference's code; a sequential scan adds the AC's end-of-block), and some scan covers some component.
// So a file of N bytes holds at most 8 N blocks of its component with the fewest: a header claiming more is refused
// before jpeg_start_decompress, which for a progressive file reserves the whole image's coefficients, 128 bytes a
// block (805 MB of address space for a 16384 x 16384 4:2:0 header on a few KB), and only then reads the scans and
// finds the data short. Arithmetic coding can go below a bit a block (a flat 4096 x 4096 image in 211 bytes, which
// Pillow decodes to all 50 MB of pixels): refused by the same rule, a decompression-bomb policy (docs/embedders.md).
// Returns the refusal's text, empty when the data can hold the blocks.
std::string blocks_beyond_data(const jpeg_decompress_struct& cinfo, std::size_t file_size) {
    std::uint64_t fewest = 0;
    for (int c = 0; c < cinfo.num_components; ++c) {
        const jpeg_component_info& comp = cinfo.comp_info[c];
        const std::uint64_t blocks = std::uint64_t(comp.width_in_blocks) * comp.height_in_blocks;
        if (c == 0 || blocks < fewest) fewest = blocks;
    }
    if (fewest / 8 <= file_size) return {};
    return cat("is a JPEG of ", cinfo.image_width, " x ", cinfo.image_height, " pixels in ", file_size,
               " bytes, fewer than its ", fewest, " blocks of 8 x 8 need (",
               cinfo.arith_code ? "arithmetic-coded: refused as a decompression bomb" : "a bit each", ")");
}

RgbImage decode_jpeg(const std::string& path, std::size_t file_size) {
    std::unique_ptr<FILE, FileCloser> f(std::fopen(path.c_str(), "rb"));
    if (!f) user_error_in(path, "cannot be opened");
    jpeg_decompress_struct cinfo;
    JpegError err;
    cinfo.err = jpeg_std_error(&err.mgr);
    err.mgr.error_exit = jpeg_fail;
    err.mgr.emit_message = jpeg_warn;
    RgbImage img;
    std::vector<std::uint8_t> row;
    if (setjmp(err.jump)) {
        jpeg_destroy_decompress(&cinfo);
        user_error_in(path, std::string("is not a readable JPEG (") + err.message + ")", "re-encode or remove it");
    }
    jpeg_create_decompress(&cinfo);
    jpeg_stdio_src(&cinfo, f.get());
    jpeg_read_header(&cinfo, TRUE);
    if (const std::string problem = blocks_beyond_data(cinfo, file_size); !problem.empty()) {
        jpeg_destroy_decompress(&cinfo);
        user_error_in(path, problem, "re-encode or remove it");
    }
    const bool cmyk = cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK;
    cinfo.out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
    jpeg_start_decompress(&cinfo);
    const int w = static_cast<int>(cinfo.output_width), h = static_cast<int>(cinfo.output_height);
    if (static_cast<std::int64_t>(w) * h <= 0 || static_cast<std::int64_t>(w) * h > kMaxPixels) {
        jpeg_destroy_decompress(&cinfo);
        check_size(path, w, h);
    }
    img.width = w;
    img.height = h;
    // The header's size is only a claim: a few hundred bytes can say 16384 x 16384 (805 MB of pixels). The pixels
    // are reserved up front when the file is big enough to plausibly hold them (at most 1024 output bytes per
    // input byte; photos are near 10); else they grow with the rows decoded, so a truncated file fails before it
    // costs the memory its header claims.
    const std::size_t rgb_bytes = static_cast<std::size_t>(w) * h * 3;
    if (rgb_bytes / kMaxExpansion <= file_size) img.rgb.reserve(rgb_bytes);
    row.resize(static_cast<std::size_t>(w) * cinfo.output_components);
    while (cinfo.output_scanline < cinfo.output_height) {
        JSAMPROW p = row.data();
        const int y = static_cast<int>(cinfo.output_scanline);
        jpeg_read_scanlines(&cinfo, &p, 1);
        grow_rows(img.rgb, static_cast<std::size_t>(y + 1) * w * 3, rgb_bytes);
        std::uint8_t* out = img.rgb.data() + static_cast<std::size_t>(y) * w * 3;
        if (cmyk) {   // Adobe CMYK JPEGs store inverted values (PIL reads them as CMYK;I: C = 255 - stored)
            for (int x = 0; x < w; ++x) {
                const int nk = row[x * 4 + 3];   // 255 - K
                for (int ch = 0; ch < 3; ++ch) out[x * 3 + ch] = cmyk_channel(255 - row[x * 4 + ch], nk);
            }
        } else {
            std::memcpy(out, row.data(), row.size());
        }
    }
    jpeg_finish_decompress(&cinfo);
    jpeg_destroy_decompress(&cinfo);
    return img;
}

// ---- PNG ----

// Reads the image's rows (row_bytes each, after png_read_update_info) into `pixels`: row by row, growing the buffer,
// for a PNG without interlace (a file cut short fails having cost what it held); all at once for an interlaced one
// (its passes revisit every row; `rows` gets the row pointers), bounded by decode_png's size check. libpng's errors
// longjmp out of here to the caller's setjmp, skipping this frame: it must hold no object with a destructor (a local
// vector of row pointers leaked on every corrupt interlaced file: fuzz_image), so both buffers are the caller's.
void read_png_rows(png_structp png, png_infop info, std::size_t row_bytes, png_uint_32 h,
                   std::vector<std::uint8_t>& pixels, std::vector<png_bytep>& rows) {
    const std::size_t total = row_bytes * h;
    if (png_get_interlace_type(png, info) == PNG_INTERLACE_NONE) {
        for (png_uint_32 y = 0; y < h; ++y) {
            grow_rows(pixels, (y + 1) * row_bytes, total);
            png_read_row(png, pixels.data() + y * row_bytes, nullptr);
        }
        return;
    }
    pixels.resize(total);
    rows.resize(h);
    for (png_uint_32 y = 0; y < h; ++y) rows[y] = pixels.data() + y * row_bytes;
    png_read_image(png, rows.data());
}

// A 16-bit greyscale PNG as PIL's Image.open(path).convert("RGB"): each big-endian sample clipped to 255, as grey.
// Called after png_read_info with the checks on the size done; destroys the read struct.
RgbImage decode_png_grey16(png_structp png, png_infop info, PngState& state, const std::string& path, png_uint_32 w,
                           png_uint_32 h) {
    std::vector<std::uint8_t> samples;
    std::vector<png_bytep> rows;
    if (setjmp(state.jump)) {
        png_destroy_read_struct(&png, &info, nullptr);
        user_error_in(path, "is not a readable PNG (" + state.message + ")", "re-encode or remove it");
    }
    png_set_interlace_handling(png);
    png_read_update_info(png, info);
    read_png_rows(png, info, static_cast<std::size_t>(w) * 2, h, samples, rows);
    png_read_end(png, nullptr);
    png_destroy_read_struct(&png, &info, nullptr);
    RgbImage img;
    img.width = static_cast<int>(w);
    img.height = static_cast<int>(h);
    img.rgb.resize(static_cast<std::size_t>(w) * h * 3);
    for (std::size_t i = 0; i < static_cast<std::size_t>(w) * h; ++i) {
        const int v = samples[2 * i] << 8 | samples[2 * i + 1];
        const std::uint8_t g = static_cast<std::uint8_t>(std::min(v, 255));
        img.rgb[3 * i] = img.rgb[3 * i + 1] = img.rgb[3 * i + 2] = g;
    }
    return img;
}

RgbImage decode_png(const std::string& path, std::size_t file_size) {
    std::unique_ptr<FILE, FileCloser> f(std::fopen(path.c_str(), "rb"));
    if (!f) user_error_in(path, "cannot be opened");
    PngState state;
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &state, png_fail, png_warn);
    if (!png) user_error_in(path, "libpng could not start");
    png_infop info = png_create_info_struct(png);
    RgbImage img;
    std::vector<png_bytep> rows;
    if (setjmp(state.jump)) {
        png_destroy_read_struct(&png, &info, nullptr);
        user_error_in(path, "is not a readable PNG (" + state.message + ")", "re-encode or remove it");
    }
    png_init_io(png, f.get());
    png_set_user_limits(png, 0x7fffffff, 0x7fffffff);
    png_read_info(png, info);
    const png_uint_32 w = png_get_image_width(png, info), h = png_get_image_height(png, info);
    if (static_cast<std::int64_t>(w) * h <= 0 || static_cast<std::int64_t>(w) * h > kMaxPixels) {
        png_destroy_read_struct(&png, &info, nullptr);
        check_size(path, w, h);
    }
    // Deflate packs at most 1032 bytes into one, so the IDAT data of w x h pixels (filter bytes not even counted)
    // needs at least w * h * bits per pixel / 8 / 1032 bytes: a file smaller than that is cut short or corrupt,
    // refused here before anything is allocated (a header on a few bytes claimed up to 805 MB). A file above the
    // bound but cut short: read_png_rows grows the pixels with the rows (not for an interlaced one).
    const std::int64_t pixel_bytes = (static_cast<std::int64_t>(w) * h * png_get_channels(png, info) * png_get_bit_depth(png, info) + 7) / 8;
    if (pixel_bytes / 1032 > static_cast<std::int64_t>(file_size)) {
        png_destroy_read_struct(&png, &info, nullptr);
        user_error_in(path, cat("is not a readable PNG (its header says ", w, " x ", h, " pixels, more than its ", file_size,
                                " bytes can hold: the file is cut short or corrupt)"), "re-encode or remove it");
    }
    const int color = png_get_color_type(png, info);
    // 16-bit greyscale is PIL's mode I;16, whose convert("RGB") clips each value to 255 (it does not scale: 0x1234
    // is white); every other 16-bit PNG PIL reads at 8 bits, the high byte, as png_set_strip_16
    if (color == PNG_COLOR_TYPE_GRAY && png_get_bit_depth(png, info) == 16)
        return decode_png_grey16(png, info, state, path, w, h);
    if (png_get_bit_depth(png, info) == 16) png_set_strip_16(png);
    if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
    if (color == PNG_COLOR_TYPE_GRAY && png_get_bit_depth(png, info) < 8) png_set_expand_gray_1_2_4_to_8(png);
    if (color == PNG_COLOR_TYPE_GRAY || color == PNG_COLOR_TYPE_GRAY_ALPHA) png_set_gray_to_rgb(png);
    // alpha dropped, also the alpha that expanding a palette with a tRNS chunk adds (PIL's P -> RGB ignores it)
    if ((color & PNG_COLOR_MASK_ALPHA) || png_get_valid(png, info, PNG_INFO_tRNS)) png_set_strip_alpha(png);
    png_set_interlace_handling(png);
    png_read_update_info(png, info);
    if (png_get_rowbytes(png, info) != static_cast<png_size_t>(w) * 3) {
        png_destroy_read_struct(&png, &info, nullptr);
        user_error_in(path, "has a PNG pixel layout this decoder does not handle", "re-encode it as 8-bit RGB");
    }
    img.width = static_cast<int>(w);
    img.height = static_cast<int>(h);
    read_png_rows(png, info, static_cast<std::size_t>(w) * 3, h, img.rgb, rows);
    png_read_end(png, nullptr);
    png_destroy_read_struct(&png, &info, nullptr);
    return img;
}

}  // namespace

bool image_file_sniff(const std::string& path) {
    std::size_t size = 0;
    try {
        return sniff(path, size) != Format::OTHER;
    } catch (const UserError&) {
        return false;
    }
}

RgbImage image_decode(const std::string& path) {
    std::size_t size = 0;
    std::int64_t w = -1, h = -1;
    switch (sniff(path, size, &w, &h)) {
        case Format::JPEG: return decode_jpeg(path, size);
        case Format::PNG:
            if (w == 0 || h == 0) check_size(path, w, h);
            return decode_png(path, size);
        default: break;
    }
    if (size == 0) user_error_in(path, "is empty (0 bytes), not an image", "remove it");
    refuse_lfs_pointer_file(path);
    user_error_in(path, "is neither a JPEG nor a PNG file (by its first bytes)", "convert it to JPEG or PNG, or remove it");
}

}  // namespace retro
