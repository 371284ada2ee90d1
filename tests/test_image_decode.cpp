// Regressions found while fuzzing the image decoders (tests/fuzz/fuzz_image.cpp, docs/testing.md "Fuzzing"): bad
// bytes are one UserError naming the file, a header's claimed size costs no memory the file cannot back, and the
// fuzz seeds' PNG kinds decode.
#include <doctest/doctest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <zlib.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>   // before jpeglib.h, which uses FILE
#include <iterator>
#include <filesystem>
#include <functional>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <jpeglib.h>

#include "core/error.h"
#include "embed/image_decode.h"
#include "test_util.h"

using namespace retro;
namespace fs = std::filesystem;

namespace {

// Resident memory of this process now (bytes).
std::int64_t rss_now() {
    std::ifstream statm("/proc/self/statm");
    std::int64_t pages = 0, resident = 0;
    statm >> pages >> resident;
    return resident * ::sysconf(_SC_PAGESIZE);
}

// Decodes `path` in a child process and returns how far the child's peak resident memory rose above this process's
// resident memory at the fork (wait4's own rusage: neither this process's earlier peak nor other children count).
// (It can be negative: the child's resident set starts below its parent's.) Empty when the decode did not end in a
// UserError.
std::optional<std::int64_t> decode_peak_growth(const fs::path& path) {
    const std::int64_t at_fork = rss_now();
    const pid_t pid = ::fork();
    if (pid == 0) {
        int code = 1;
        try {
            image_decode(path.string());
        } catch (const UserError&) {
            code = 0;
        } catch (...) {
        }
        ::_exit(code);
    }
    int status = 0;
    rusage u{};
    if (pid < 0 || ::wait4(pid, &status, 0, &u) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return std::nullopt;
    return static_cast<std::int64_t>(u.ru_maxrss) * 1024 - at_fork;
}

// A PNG file from its IHDR fields and one IDAT chunk's data (chunk CRCs computed).
std::string png_file(std::uint32_t w, std::uint32_t h, int bit_depth, int color_type, const std::string& idat,
                     int interlace = 0) {
    const auto be32 = [](std::uint32_t v) {
        return std::string{static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8), static_cast<char>(v)};
    };
    const auto chunk = [&](const std::string& type, const std::string& data) {
        const std::string body = type + data;
        return be32(static_cast<std::uint32_t>(data.size())) + body +
               be32(static_cast<std::uint32_t>(::crc32(0, reinterpret_cast<const Bytef*>(body.data()), static_cast<uInt>(body.size()))));
    };
    const std::string ihdr = be32(w) + be32(h) + std::string{static_cast<char>(bit_depth), static_cast<char>(color_type), 0, 0,
                                                  static_cast<char>(interlace)};
    return std::string("\x89PNG\r\n\x1a\n", 8) + chunk("IHDR", ihdr) + chunk("IDAT", idat) + chunk("IEND", "");
}

// A flat w x h JPEG written by libjpeg-turbo (RGB 120/130/140 or, with one component, grey 128), `configure` setting
// the compressor after jpeg_set_defaults; the file's bytes.
std::string flat_jpeg_with(const fs::path& path, int w, int h, int components, const std::function<void(jpeg_compress_struct&)>& configure) {
    jpeg_compress_struct c;
    jpeg_error_mgr err;
    c.err = jpeg_std_error(&err);
    jpeg_create_compress(&c);
    FILE* f = std::fopen(path.c_str(), "wb");
    REQUIRE(f != nullptr);
    jpeg_stdio_dest(&c, f);
    c.image_width = static_cast<JDIMENSION>(w);
    c.image_height = static_cast<JDIMENSION>(h);
    c.input_components = components;
    c.in_color_space = components == 1 ? JCS_GRAYSCALE : JCS_RGB;
    jpeg_set_defaults(&c);
    configure(c);
    jpeg_start_compress(&c, TRUE);
    std::vector<JSAMPLE> row(static_cast<std::size_t>(w) * components, 128);
    if (components == 3)
        for (int x = 0; x < w; ++x) row[3 * x] = 120, row[3 * x + 1] = 130, row[3 * x + 2] = 140;
    while (c.next_scanline < c.image_height) {
        JSAMPROW p = row.data();
        jpeg_write_scanlines(&c, &p, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    std::fclose(f);
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// RGB, quality 90, 4:2:0, progressive and/or arithmetic-coded.
std::string flat_jpeg(const fs::path& path, int w, int h, bool progressive, bool arithmetic) {
    return flat_jpeg_with(path, w, h, 3, [&](jpeg_compress_struct& c) {
        jpeg_set_quality(&c, 90, TRUE);
        if (progressive) jpeg_simple_progression(&c);
        c.arith_code = arithmetic ? TRUE : FALSE;
    });
}

// Grey, one progressive scan of DC coefficients, Huffman tables optimised: a bit a block, the least a Huffman-coded
// file can spend (the refusal's bound with only the headers to spare).
std::string dc_only_grey_jpeg(const fs::path& path, int w, int h) {
    jpeg_scan_info dc{};
    dc.comps_in_scan = 1;
    dc.component_index[0] = 0;   // Ss = Se = Ah = Al = 0: the DC coefficients, whole
    return flat_jpeg_with(path, w, h, 1, [&](jpeg_compress_struct& c) {
        c.optimize_coding = TRUE;
        c.scan_info = &dc;
        c.num_scans = 1;
    });
}

// `jpg` with its frame header (the first SOFn marker) claiming w x h.
std::string with_frame_size(std::string jpg, int w, int h) {
    for (std::size_t i = 2; i + 9 < jpg.size(); ++i) {
        const auto m = static_cast<unsigned char>(jpg[i + 1]);
        if (static_cast<unsigned char>(jpg[i]) == 0xFF && m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC) {
            jpg[i + 5] = static_cast<char>(h >> 8), jpg[i + 6] = static_cast<char>(h);
            jpg[i + 7] = static_cast<char>(w >> 8), jpg[i + 8] = static_cast<char>(w);
            return jpg;
        }
    }
    FAIL("no frame header");
    return jpg;
}

}  // namespace

TEST_CASE("image: a JPEG's header claiming more 8 x 8 blocks than its data can code is refused before the decode") {
    // A progressive JPEG's decoder allocates the whole image's coefficients before reading a scan: a 2048 x 2048
    // progressive file (~25 KB) with its header saying 16384 x 16384 reserved 805 MB of address space (its pages
    // zeroed as scans reach them: 1.3 MB resident) and failed only at the end of its data, "premature end".
    test::TempDir dir("jpeg-blocks");
    const fs::path progressive = dir / "progressive.jpg";
    const std::string prog = flat_jpeg(progressive, 2048, 2048, true, false);
    const RgbImage whole = image_decode(progressive.string());   // the file itself decodes
    CHECK(whole.width == 2048);
    CHECK(whole.rgb.size() == std::size_t(2048) * 2048 * 3);
    const fs::path claimed = dir / "progressive_16384.jpg";
    std::ofstream(claimed, std::ios::binary) << with_frame_size(prog, 16384, 16384);
    const std::string says = " x 16384 pixels in " + std::to_string(prog.size()) + " bytes, fewer than its 1048576 blocks";
    CHECK_THROWS_WITH(image_decode(claimed.string()), doctest::Contains(says.c_str()));
    const std::optional<std::int64_t> growth = decode_peak_growth(claimed);
    REQUIRE(growth.has_value());
    CHECK(*growth < (std::int64_t(64) << 20));
    // arithmetic coding: progressive holds its blocks' bits and decodes; the sequential file codes 2048 x 2048 flat
    // pixels in ~100 bytes (Pillow decodes them): refused by the same rule — a few hundred such bytes decode to
    // 16384 x 16384, 805 MB resident, before the embedder shrinks the picture to 224 x 224
    const fs::path arith_prog = dir / "arith_progressive.jpg";
    flat_jpeg(arith_prog, 2048, 2048, true, true);
    CHECK(image_decode(arith_prog.string()).rgb.size() == std::size_t(2048) * 2048 * 3);
    const fs::path arith = dir / "arith.jpg";
    const std::string seq = flat_jpeg(arith, 2048, 2048, false, true);
    CHECK(seq.size() < 2048);
    try {
        image_decode(arith.string());
        FAIL("decoded the arithmetic-coded file");
    } catch (const UserError& e) {
        const std::string msg = e.what();
        CHECK(msg.find(arith.string() + ": is a JPEG of 2048 x 2048 pixels in ") == 0);
        CHECK(msg.find("arithmetic-coded: refused as a decompression bomb") != std::string::npos);
        CHECK(msg.find('\n') == std::string::npos);
    }
    // a small sequential arithmetic-coded photo-like file is not refused
    const fs::path small = dir / "arith_small.jpg";
    flat_jpeg(small, 64, 48, false, true);
    CHECK(image_decode(small.string()).width == 64);
    // at the bound: 65,536 blocks of a bit each in 8,192 bytes and the headers (a rule of 2 bits a block fails here)
    const fs::path tight = dir / "dc_only.jpg";
    const std::string dc = dc_only_grey_jpeg(tight, 2048, 2048);
    CAPTURE(dc.size());
    CHECK(dc.size() >= 8192);
    CHECK(dc.size() < 8192 + 1024);
    const RgbImage grey = image_decode(tight.string());
    CHECK(grey.width == 2048);
    CHECK(grey.rgb[0] == grey.rgb.back());
}

TEST_CASE("image: a 16384 x 16384 header on a few bytes is refused before its 805 MB of pixels are allocated") {
    // A 1 x 1 grey baseline JPEG (its own tables) with SOF0 set to 16384 x 16384 and the scan cut to nothing (140
    // bytes); the decoder used to allocate all 805 MB of RGB before the first row showed the data missing.
    const std::string jpg(
        "\xff\xd8\xff\xdb\x00\x43\x00\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01"
        "\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01"
        "\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\xff"
        "\xc0\x00\x0b\x08\x40\x00\x40\x00\x01\x01\x11\x00\xff\xc4\x00\x14\x00\x01\x00\x00\x00\x00\x00\x00"
        "\x00\x00\x00\x00\x00\x00\x00\x00\x00\x0b\xff\xc4\x00\x14\x10\x01\x00\x00\x00\x00\x00\x00\x00\x00"
        "\x00\x00\x00\x00\x00\x00\x00\x00\xff\xda\x00\x08\x01\x01\x00\x00\x3f\x00\xff\xd9",
        140);
    // A PNG of the same size: IHDR 16384 x 16384 RGB 8-bit, one IDAT of 100 zero bytes, IEND (69 bytes).
    const std::string png(
        "\x89\x50\x4e\x47\x0d\x0a\x1a\x0a\x00\x00\x00\x0d\x49\x48\x44\x52\x00\x00\x40\x00\x00\x00\x40\x00"
        "\x08\x02\x00\x00\x00\x26\xaa\x87\xd3\x00\x00\x00\x0c\x49\x44\x41\x54\x78\x9c\x63\x60\xa0\x3d\x00"
        "\x00\x00\x64\x00\x01\x86\x64\x3c\x35\x00\x00\x00\x00\x49\x45\x4e\x44\xae\x42\x60\x82",
        69);
    const fs::path dir = fs::temp_directory_path() / ("retro-image-bomb-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    struct Case {
        std::string file, bytes, says;
    };
    const Case cases[] = {
        {"header_only.jpg", jpg, "16384 x 16384 pixels in 140 bytes, fewer than its 4194304 blocks of 8 x 8 need"},
        {"header_only.png", png, "16384 x 16384 pixels, more than its 69 bytes can hold"},
    };
    for (const auto& c : cases) {
        CAPTURE(c.file);
        const fs::path p = dir / c.file;
        std::ofstream(p, std::ios::binary) << c.bytes;
        try {
            image_decode(p.string());
            FAIL("decoded " << c.file);
        } catch (const UserError& e) {
            const std::string msg = e.what();
            CHECK(msg.find(p.string()) == 0);
            CHECK(msg.find(c.says) != std::string::npos);
            CHECK(msg.find('\n') == std::string::npos);
        }
        const std::optional<std::int64_t> growth = decode_peak_growth(p);
        REQUIRE(growth.has_value());
        CHECK(*growth < (std::int64_t(64) << 20));
    }
    // above the size bound but corrupt from its first block (40,000 bytes of a reserved deflate block type after the
    // zlib header), 1-bit grey 16384 x 16384: the rows grow as they are read (the whole 805 MB was allocated first)
    const fs::path garbage = dir / "garbage_1bit.png";
    std::ofstream(garbage, std::ios::binary) << png_file(16384, 16384, 1, 0, std::string("\x78\x9c", 2) + std::string(40000, '\xff'));
    const std::optional<std::int64_t> growth = decode_peak_growth(garbage);
    REQUIRE(growth.has_value());
    CHECK(*growth < (std::int64_t(64) << 20));
    // the same corruption in an interlaced PNG (read whole, its rows' pointers the caller's: a vector local to the
    // reading function leaked when libpng's error jumped over it; make sanitize's LeakSanitizer sees a regression)
    const fs::path interlaced = dir / "garbage_interlaced.png";
    std::ofstream(interlaced, std::ios::binary) << png_file(64, 64, 8, 2, std::string("\x78\x9c", 2) + std::string(200, '\xff'), 1);
    CHECK_THROWS_AS(image_decode(interlaced.string()), UserError);
    fs::remove_all(dir);
}

TEST_CASE("image: a palette PNG with a tRNS chunk decodes to its palette colours, the transparency dropped") {
    // 3 x 2, 4-bit palette (black, red, green), tRNS making black half transparent (105 bytes). Expanding the palette
    // added an alpha channel that was not stripped, and the file was refused as "a PNG pixel layout this decoder does
    // not handle"; PIL's convert("RGB") gives the palette colours.
    const std::string png(
        "\x89\x50\x4e\x47\x0d\x0a\x1a\x0a\x00\x00\x00\x0d\x49\x48\x44\x52\x00\x00\x00\x03\x00\x00\x00\x02"
        "\x04\x03\x00\x00\x00\x6f\x5a\x7b\x29\x00\x00\x00\x09\x50\x4c\x54\x45\x00\x00\x00\xff\x00\x00\x00"
        "\xff\x00\xf4\x83\xbf\x7e\x00\x00\x00\x01\x74\x52\x4e\x53\x80\xad\x5e\x5b\x46\x00\x00\x00\x0e\x49"
        "\x44\x41\x54\x78\xda\x63\x60\x54\x60\x10\x62\x00\x00\x00\xaf\x00\x34\xb5\x27\xd7\xab\x00\x00\x00"
        "\x00\x49\x45\x4e\x44\xae\x42\x60\x82",
        105);
    const fs::path p = fs::temp_directory_path() / ("retro-image-trns-" + std::to_string(::getpid()) + ".png");
    std::ofstream(p, std::ios::binary) << png;
    const RgbImage img = image_decode(p.string());
    fs::remove(p);
    CHECK(img.width == 3);
    CHECK(img.height == 2);
    const std::vector<std::uint8_t> want = {0, 0, 0, 255, 0, 0, 0, 255, 0, 255, 0, 0, 0, 255, 0, 0, 0, 0};
    CHECK(img.rgb == want);
}

TEST_CASE("image: a 16-bit greyscale PNG and an Adobe CMYK JPEG decode to Pillow 13's convert(\"RGB\") pixels") {
    // tests/fuzz/seeds/image: grey16_1x3.png holds 0x1234, 0xffff, 0x0001 (PIL's mode I;16: each value clipped to
    // 255, not scaled: the high byte gave 18, 255, 0); cmyk_4x4.jpg is inverted CMYK (Pillow's cmyk2rgb rounds
    // nk - c·nk/255 with its MULDIV255: the truncated (255 - c)(255 - k)/255 was 1 below it in 14 of 48 values).
    const fs::path seeds = test::source_dir() / "tests" / "fuzz" / "seeds" / "image";
    const RgbImage grey = image_decode((seeds / "grey16_1x3.png").string());
    CHECK(grey.width == 1);
    CHECK(grey.height == 3);
    CHECK(grey.rgb == std::vector<std::uint8_t>{255, 255, 255, 255, 255, 255, 1, 1, 1});
    const RgbImage cmyk = image_decode((seeds / "cmyk_4x4.jpg").string());
    CHECK(cmyk.width == 4);
    CHECK(cmyk.height == 4);
    const std::vector<std::uint8_t> pil = {0,  20, 32, 0,  0,  0,  23, 44, 71, 27, 30, 0,  5,  22, 40, 6,
                                           7,  9,  31, 68, 82, 36, 40, 2,  12, 23, 51, 16, 19, 23, 43, 91,
                                           99, 50, 48, 6,  18, 43, 60, 23, 29, 32, 53, 69, 111, 60, 12, 9};
    CHECK(cmyk.rgb == pil);
}

TEST_CASE("image: a folder given as an image is named as a folder") {
    // (`retro-index query IDX --image DIR`: an ifstream opens a folder and reads no bytes, and it was refused as
    // "not a JPEG or PNG file")
    test::TempDir tmp("image-folder");
    const std::string says = tmp.path.string() + ": is a folder, not an image file (fix: give one JPEG or PNG file)";
    CHECK_THROWS_WITH(image_decode(tmp.path.string()), doctest::Contains(says.c_str()));
}
