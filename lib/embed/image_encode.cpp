// Implementation of image_encode.h: libpng and libjpeg writers, errors turned into UserError through
// setjmp/longjmp as both libraries require (as in image_decode.cpp).
#include "embed/image_encode.h"

#include <csetjmp>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <vector>

#include <jpeglib.h>
#include <png.h>

#include "core/error.h"
#include "embed/image_lib_errors.h"

namespace retro {

namespace {

namespace fs = std::filesystem;
using namespace image_errors;

struct FileCloser {
    void operator()(FILE* f) const { if (f) std::fclose(f); }
};

void check_image(const std::string& path, const RgbImage& img) {
    if (img.width <= 0 || img.height <= 0 ||
        img.rgb.size() != static_cast<std::size_t>(img.width) * static_cast<std::size_t>(img.height) * 3)
        user_error_in(path, cat("cannot be written: the image is ", img.width, " x ", img.height, " with ", img.rgb.size(), " bytes"));
}

std::unique_ptr<FILE, FileCloser> open_tmp(const std::string& tmp, const std::string& path) {
    std::unique_ptr<FILE, FileCloser> f(std::fopen(tmp.c_str(), "wb"));
    if (!f) user_error_in(path, "cannot be written", "check the folder exists and is writable");
    return f;
}

void finish(std::unique_ptr<FILE, FileCloser> f, const std::string& tmp, const std::string& path) {
    const bool ok = std::fflush(f.get()) == 0 && !std::ferror(f.get());
    f.reset();
    std::error_code ec;
    if (ok) fs::rename(tmp, path, ec);
    if (!ok || ec) {
        fs::remove(tmp, ec);
        user_error_in(path, "could not be written (disk full?)");
    }
}



}  // namespace

void image_write_png(const std::string& path, const RgbImage& img) {
    check_image(path, img);
    const std::string tmp = path + ".tmp";
    auto f = open_tmp(tmp, path);
    PngState state;
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &state, png_fail, png_warn);
    if (!png) user_error_in(path, "libpng could not start");
    png_infop info = png_create_info_struct(png);
    std::vector<png_bytep> rows(static_cast<std::size_t>(img.height));
    if (setjmp(state.jump)) {
        png_destroy_write_struct(&png, &info);
        f.reset();
        std::error_code ec;
        fs::remove(tmp, ec);
        user_error_in(path, "could not be written as PNG (" + state.message + ")");
    }
    png_init_io(png, f.get());
    png_set_IHDR(png, info, static_cast<png_uint_32>(img.width), static_cast<png_uint_32>(img.height), 8, PNG_COLOR_TYPE_RGB,
                 PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    for (int y = 0; y < img.height; ++y)
        rows[static_cast<std::size_t>(y)] = const_cast<png_bytep>(img.rgb.data() + static_cast<std::size_t>(y) * img.width * 3);
    png_write_image(png, rows.data());
    png_write_end(png, nullptr);
    png_destroy_write_struct(&png, &info);
    finish(std::move(f), tmp, path);
}

void image_write_jpeg(const std::string& path, const RgbImage& img, int quality) {
    check_image(path, img);
    if (quality < 1 || quality > 100) user_error_in(path, cat("JPEG quality ", quality, " is not in 1..100"));
    const std::string tmp = path + ".tmp";
    auto f = open_tmp(tmp, path);
    jpeg_compress_struct cinfo;
    JpegError err;
    cinfo.err = jpeg_std_error(&err.mgr);
    err.mgr.error_exit = jpeg_fail;
    if (setjmp(err.jump)) {
        jpeg_destroy_compress(&cinfo);
        f.reset();
        std::error_code ec;
        fs::remove(tmp, ec);
        user_error_in(path, std::string("could not be written as JPEG (") + err.message + ")");
    }
    jpeg_create_compress(&cinfo);
    jpeg_stdio_dest(&cinfo, f.get());
    cinfo.image_width = static_cast<JDIMENSION>(img.width);
    cinfo.image_height = static_cast<JDIMENSION>(img.height);
    cinfo.input_components = 3;
    cinfo.in_color_space = JCS_RGB;
    jpeg_set_defaults(&cinfo);   // 4:2:0 chroma, Huffman tables of the standard
    jpeg_set_quality(&cinfo, quality, TRUE);
    jpeg_start_compress(&cinfo, TRUE);
    while (cinfo.next_scanline < cinfo.image_height) {
        JSAMPROW row = const_cast<JSAMPROW>(img.rgb.data() + static_cast<std::size_t>(cinfo.next_scanline) * img.width * 3);
        jpeg_write_scanlines(&cinfo, &row, 1);
    }
    jpeg_finish_compress(&cinfo);
    jpeg_destroy_compress(&cinfo);
    finish(std::move(f), tmp, path);
}

}  // namespace retro
