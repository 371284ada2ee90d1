// core: .npy and .safetensors against files written by numpy and the safetensors package
// (tests/reference/make_core_fixtures.py), and against corrupt or lying headers.
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>

#include "core/npy.h"
#include "core/safetensors.h"
#include "test_util.h"

using namespace retro;
namespace fs = std::filesystem;

namespace {
std::string fixture(const std::string& name) { return (test::source_dir() / "tests/reference/fixtures" / name).string(); }

// The values make_core_fixtures.py writes (its values()).
double expected_value(std::int64_t i, std::int64_t n, DType t) {
    switch (t) {
        case DType::F16: case DType::F32: case DType::F64: return i * 0.25 - 3.5;
        case DType::U8: case DType::U16: return static_cast<double>((i * 7) % 251);
        default: return static_cast<double>(i * 7 - n);
    }
}

double element(const void* p, DType t, std::int64_t i) {
    switch (t) {
        case DType::U8: return static_cast<const std::uint8_t*>(p)[i];
        case DType::U16: return static_cast<const std::uint16_t*>(p)[i];
        case DType::I32: return static_cast<const std::int32_t*>(p)[i];
        case DType::I64: return static_cast<double>(static_cast<const std::int64_t*>(p)[i]);
        case DType::F16: return f16_to_f32(static_cast<const std::uint16_t*>(p)[i]);
        case DType::F32: return static_cast<const float*>(p)[i];
        case DType::F64: return static_cast<const double*>(p)[i];
        default: FAIL("unexpected dtype"); return 0;
    }
}

std::string user_error_message(const std::function<void()>& fn) {
    try {
        fn();
    } catch (const UserError& e) {
        return e.what();
    }
    return "";
}

void write_bytes(const std::string& path, const std::string& bytes) { test::write_text(path, bytes); }
}  // namespace

TEST_CASE("core: npy files written by numpy read back with shape - dtype and values") {
    const std::pair<const char*, DType> cases[] = {{"u8", DType::U8},   {"u16", DType::U16}, {"i32", DType::I32},
                                                   {"i64", DType::I64}, {"f16", DType::F16}, {"f32", DType::F32},
                                                   {"f64", DType::F64}};
    for (auto [name, dtype] : cases) {
        CAPTURE(name);
        NpyArray a(fixture(std::string(name) + "_3x5.npy"));
        CHECK(a.dtype() == dtype);
        CHECK(a.shape() == std::vector<std::int64_t>{3, 5});
        for (std::int64_t i = 0; i < 15; ++i) CHECK(element(a.raw(), dtype, i) == expected_value(i, 15, dtype));
    }
    NpyArray v2(fixture("f32_v2_7.npy"));
    CHECK(v2.header().major == 2);
    CHECK(v2.shape() == std::vector<std::int64_t>{7});
    for (int i = 0; i < 7; ++i) CHECK(v2.data<float>()[i] == static_cast<float>(i * 0.25 - 3.5));
    NpyArray scalar(fixture("i64_scalar.npy"));
    CHECK(scalar.shape().empty());
    CHECK(scalar.data<std::int64_t>()[0] == 42);
    NpyArray empty(fixture("f32_0x4.npy"));
    CHECK(empty.shape() == std::vector<std::int64_t>{0, 4});
    CHECK(empty.numel() == 0);
}

TEST_CASE("core: npy files we write equal numpy's bytes") {
    test::TempDir tmp("npy");
    std::int32_t a[6];
    for (int i = 0; i < 6; ++i) a[i] = i * 7 - 6;
    npy_save((tmp / "a.npy").string(), {2, 3}, a);
    CHECK(test::read_text(tmp / "a.npy") == test::read_text(fixture("we_write_i32_2x3.npy")));
    double b[5];
    for (int i = 0; i < 5; ++i) b[i] = i * 0.25 - 3.5;
    npy_save((tmp / "b.npy").string(), {5}, b);
    CHECK(test::read_text(tmp / "b.npy") == test::read_text(fixture("we_write_f64_5.npy")));
}

TEST_CASE("core: the streaming npy writer patches its header and reads back") {
    test::TempDir tmp("npyw");
    std::string path = (tmp / "rows.npy").string();
    {
        NpyWriter w(path, DType::U16, {4});
        std::uint16_t row[4];
        for (int r = 0; r < 1000; ++r) {
            for (int j = 0; j < 4; ++j) row[j] = static_cast<std::uint16_t>(r * 4 + j);
            w.append(row, 1);
        }
        CHECK(!fs::exists(path));   // nothing complete-looking before commit
        w.commit();
    }
    NpyArray a(path);
    CHECK(a.shape() == std::vector<std::int64_t>{1000, 4});
    for (int i = 0; i < 4000; ++i) CHECK(a.data<std::uint16_t>()[i] == static_cast<std::uint16_t>(i));
    CHECK(!fs::exists(path + ".tmp"));
}

TEST_CASE("core: npy refuses Fortran order - big-endian and unknown dtypes with a clear line") {
    CHECK(user_error_message([] { NpyArray(fixture("bad_fortran.npy")); }).find("Fortran") != std::string::npos);
    CHECK(user_error_message([] { NpyArray(fixture("bad_bigendian.npy")); }).find("big-endian") != std::string::npos);
    std::string m = user_error_message([] { NpyArray(fixture("bad_complex.npy")); });
    CHECK(m.find("bad_complex.npy") != std::string::npos);
    CHECK(m.find("unsupported dtype") != std::string::npos);
}

TEST_CASE("core: corrupt - truncated and lying npy headers are user errors naming the file") {
    test::TempDir tmp("npybad");
    std::string good = test::read_text(fixture("f32_3x5.npy"));
    std::vector<std::pair<std::string, std::string>> cases;
    cases.push_back({"empty", ""});
    cases.push_back({"magic", "\x93NUMPX" + good.substr(6)});
    cases.push_back({"truncated_data", good.substr(0, good.size() - 4)});
    cases.push_back({"truncated_header", good.substr(0, 40)});
    std::string lying = good;
    lying.replace(lying.find("(3, 5)"), 6, "(9, 5)");
    cases.push_back({"shape_larger_than_file", lying});
    std::string huge = good;
    huge.replace(huge.find("(3, 5)"), 6, "(99999999999999999, 99999999999999999)");
    cases.push_back({"huge_shape", huge});
    std::string hlen = good;
    hlen[8] = '\xff', hlen[9] = '\xff';
    cases.push_back({"header_length", hlen});
    std::string badjson = good;
    badjson.replace(badjson.find("'shape'"), 7, "'shapo'");
    cases.push_back({"bad_key", badjson});
    std::string version = good;
    version[6] = 9;
    cases.push_back({"version", version});
    for (auto& [name, bytes] : cases) {
        CAPTURE(name);
        std::string path = (tmp / (name + ".npy")).string();
        write_bytes(path, bytes);
        std::string m = user_error_message([&] { NpyArray a(path); });
        CHECK(m.find(path) == 0);
        CHECK(m.find('\n') == std::string::npos);
    }
}

TEST_CASE("core: safetensors written by the safetensors package read back exactly") {
    SafetensorsFile f(fixture("tensors.safetensors"));
    CHECK(f.metadata().at("made_by") == "make_core_fixtures.py");
    const auto& w = f.get("w.f32", DType::F32, {3, 4});
    for (int i = 0; i < 12; ++i) CHECK(static_cast<const float*>(w.data)[i] == static_cast<float>(i * 0.25 - 3.5));
    const auto& b = f.get("b.f64", DType::F64, {4});
    for (int i = 0; i < 4; ++i) CHECK(static_cast<const double*>(b.data)[i] == i * 0.25 - 3.5);
    const auto& ids = f.get("ids.i64", DType::I64, {2, 3});
    for (int i = 0; i < 6; ++i) CHECK(static_cast<const std::int64_t*>(ids.data)[i] == i * 7 - 6);
    const auto& h = f.get("h.f16", DType::F16, {5});
    for (int i = 0; i < 5; ++i) CHECK(f16_to_f32(static_cast<const std::uint16_t*>(h.data)[i]) == static_cast<float>(i * 0.25 - 3.5));
    const auto& u = f.get("u.u8", DType::U8, {8});
    for (int i = 0; i < 8; ++i) CHECK(static_cast<const std::uint8_t*>(u.data)[i] == (i * 7) % 251);
    CHECK(f.get("empty.f32").numel() == 0);
    CHECK(user_error_message([&] { f.get("nope"); }).find("no tensor named 'nope'") != std::string::npos);
    CHECK(user_error_message([&] { f.get("w.f32", DType::F32, {4, 3}); }).find("expected (4, 3)") != std::string::npos);
}

TEST_CASE("core: safetensors round trip through our writer - bf16 included") {
    test::TempDir tmp("st");
    std::vector<float> a{1.5f, -2.0f, 3.25f, 0.0f, 7.0f, -0.5f};
    std::vector<std::uint16_t> bf;
    for (float x : a) bf.push_back(f32_to_bf16(x));
    std::string path = (tmp / "w.safetensors").string();
    safetensors_save(path, {{"a", DType::F32, {2, 3}, a.data()}, {"a.bf16", DType::BF16, {6}, bf.data()}}, {{"k", "v"}});
    SafetensorsFile f(path);
    CHECK(std::memcmp(f.get("a", DType::F32, {2, 3}).data, a.data(), 24) == 0);
    const auto* back = static_cast<const std::uint16_t*>(f.get("a.bf16", DType::BF16, {6}).data);
    for (int i = 0; i < 6; ++i) CHECK(bf16_to_f32(back[i]) == a[i]);   // all exactly representable
    CHECK(f.metadata().at("k") == "v");
    // a JSON text file given for weights (a config: retro-train --init-from config.json) is named as such, where it
    // was "corrupt .safetensors header: length 7885080994160577147 ..."; a truncated real file still says corrupt
    test::write_text(tmp / "config.json", "{\n  \"num_tokens\": 8000,\n  \"dec_dim\": 128\n}\n");
    CHECK_THROWS_WITH(SafetensorsFile((tmp / "config.json").string()),
                      doctest::Contains("is a JSON text file, not a .safetensors file of weights"));
    const std::string whole = test::read_text(path);
    test::write_text(tmp / "cut.safetensors", whole.substr(0, 40));
    CHECK_THROWS_WITH(SafetensorsFile((tmp / "cut.safetensors").string()), doctest::Contains("corrupt .safetensors header"));
}

TEST_CASE("core: safetensors tensors at offsets not aligned for their dtype are read through aligned copies") {
    // The format has no padding between tensors and any header length: an f16 tensor of odd length puts the next f32
    // at a 2-byte offset (our writer keeps the caller's order), a header of 13 bytes every tensor. The readers cast
    // `data` to the element type, which must then be aligned.
    test::TempDir tmp("st-unaligned");
    const std::vector<std::uint16_t> h{f32_to_f16(1.5f), f32_to_f16(-2.0f), f32_to_f16(0.25f)};
    const std::vector<float> w{3.5f, -7.25f};
    const std::vector<double> d{1e300};
    const std::string ours = (tmp / "ours.safetensors").string();
    safetensors_save(ours, {{"h", DType::F16, {3}, h.data()}, {"w", DType::F32, {2}, w.data()}, {"d", DType::F64, {1}, d.data()}});
    std::string json = R"({"h":{"dtype":"F16","shape":[3],"data_offsets":[0,6]},"w":{"dtype":"F32","shape":[2],"data_offsets":[6,14]},)"
                       R"("d":{"dtype":"F64","shape":[1],"data_offsets":[14,22]}})";
    if (json.size() % 2 == 0) json += " ";   // an odd header length: the data starts at an odd offset
    std::string bytes(8, '\0');
    for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((json.size() >> (8 * i)) & 0xff);
    bytes += json;
    bytes.append(reinterpret_cast<const char*>(h.data()), 6);
    bytes.append(reinterpret_cast<const char*>(w.data()), 8);
    bytes.append(reinterpret_cast<const char*>(d.data()), 8);
    const std::string odd = (tmp / "odd.safetensors").string();
    write_bytes(odd, bytes);
    for (const std::string& path : {ours, odd}) {
        CAPTURE(path);
        SafetensorsFile f(path);
        const auto& hv = f.get("h", DType::F16, {3});
        const auto& wv = f.get("w", DType::F32, {2});
        const auto& dv = f.get("d", DType::F64, {1});
        CHECK(reinterpret_cast<std::uintptr_t>(hv.data) % 2 == 0);
        CHECK(reinterpret_cast<std::uintptr_t>(wv.data) % 4 == 0);
        CHECK(reinterpret_cast<std::uintptr_t>(dv.data) % 8 == 0);
        CHECK(std::memcmp(hv.data, h.data(), 6) == 0);
        CHECK(static_cast<const float*>(wv.data)[0] == 3.5f);
        CHECK(static_cast<const float*>(wv.data)[1] == -7.25f);
        CHECK(static_cast<const double*>(dv.data)[0] == 1e300);
        CHECK(f.copied_bytes() == (path == odd ? 22u : 16u));   // ours: h lies aligned, w and d do not
    }
    // the reference library's files (aligned) are read in place
    CHECK(SafetensorsFile(fixture("tensors.safetensors")).copied_bytes() == 0);
}

TEST_CASE("core: a safetensors header of many entries over one unaligned range is refused before anything is copied") {
    // 20,000 F32 entries over the same 4 MB at offset 1: copied once an entry before the overlap check ran (80 GB:
    // bad_alloc, an internal error); the ranges are checked first, so the copies together never pass the data's size
    test::TempDir tmp("st-bomb");
    const std::int64_t floats = 1 << 20;
    std::string json = "{";
    for (int i = 0; i < 20000; ++i)
        json += (i ? "," : "") + std::string("\"t") + std::to_string(i) + "\":{\"dtype\":\"F32\",\"shape\":[" +
                std::to_string(floats) + "],\"data_offsets\":[1," + std::to_string(1 + 4 * floats) + "]}";
    json += "}";
    std::string bytes(8, '\0');
    for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((json.size() >> (8 * i)) & 0xff);
    bytes += json;
    bytes.append(static_cast<std::size_t>(4 * floats + 1), '\0');
    const std::string path = (tmp / "bomb.safetensors").string();
    write_bytes(path, bytes);
    const std::string m = user_error_message([&] { SafetensorsFile f(path); });
    CHECK(m.find("tensors overlap") != std::string::npos);
}

TEST_CASE("core: corrupt safetensors headers are user errors naming the file") {
    test::TempDir tmp("stbad");
    std::string good = test::read_text(fixture("tensors.safetensors"));
    std::uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<std::uint8_t>(good[i]);
    std::string json = good.substr(8, n);
    auto with_json = [&](std::string j) {
        j.append(n > j.size() ? n - j.size() : 0, ' ');
        std::string out(8, '\0');
        for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((j.size() >> (8 * i)) & 0xff);
        return out + j + good.substr(8 + n);
    };
    std::vector<std::pair<std::string, std::string>> cases;
    cases.push_back({"short", good.substr(0, 5)});
    cases.push_back({"length_past_end", std::string("\xff\xff\xff\xff\x00\x00\x00\x00", 8) + good.substr(8)});
    cases.push_back({"truncated", good.substr(0, good.size() - 10)});
    cases.push_back({"bad_json", with_json("{\"w.f32\": [1, 2")});
    cases.push_back({"not_object", with_json("[1, 2, 3]")});
    cases.push_back({"bad_dtype", with_json(R"({"x": {"dtype": "F99", "shape": [1], "data_offsets": [0, 4]}})")});
    cases.push_back({"shape_mismatch", with_json(R"({"x": {"dtype": "F32", "shape": [100], "data_offsets": [0, 4]}})")});
    cases.push_back({"offsets_outside", with_json(R"({"x": {"dtype": "U8", "shape": [4], "data_offsets": [1000000, 1000004]}})")});
    cases.push_back({"huge_shape", with_json(R"({"x": {"dtype": "F32", "shape": [4611686018427387904, 4], "data_offsets": [0, 4]}})")});
    cases.push_back({"negative", with_json(R"({"x": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})")});
    cases.push_back({"overlap", with_json(R"({"x": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]}, "y": {"dtype": "U8", "shape": [4], "data_offsets": [2, 6]}})")});
    for (auto& [name, bytes] : cases) {
        CAPTURE(name);
        std::string path = (tmp / (name + ".safetensors")).string();
        write_bytes(path, bytes);
        std::string m = user_error_message([&] { SafetensorsFile f(path); });
        CHECK(m.find(path) == 0);
        CHECK(m.find('\n') == std::string::npos);
    }
}

TEST_CASE("core: bf16 and f16 conversions") {
    CHECK(bf16_to_f32(f32_to_bf16(1.0f)) == 1.0f);
    CHECK(f32_to_bf16(1.0f) == 0x3f80);
    CHECK(bf16_to_f32(f32_to_bf16(1.00390625f)) == 1.0f);        // ties to even
    CHECK(bf16_to_f32(f32_to_bf16(1.01171875f)) == 1.015625f);   // ties to even, up
    CHECK(std::isnan(bf16_to_f32(f32_to_bf16(NAN))));
    CHECK(f16_to_f32(f32_to_f16(0.333251953125f)) == 0.333251953125f);
}

TEST_CASE("core: f16 conversion matches IEEE half on every half value") {
    for (std::uint32_t h = 0; h < 0x10000u; ++h) {
        float f = f16_to_f32(static_cast<std::uint16_t>(h));
        if (std::isnan(f)) {
            CHECK(std::isnan(f16_to_f32(f32_to_f16(f))));
            continue;
        }
        if (f32_to_f16(f) != h) FAIL("half ", h, " does not round-trip");
    }
    CHECK(f16_to_f32(0x3c00) == 1.0f);
    CHECK(f16_to_f32(0x0001) == 5.9604644775390625e-08f);   // smallest subnormal
    CHECK(f32_to_f16(65520.0f) == 0x7c00);                   // rounds to inf
    CHECK(f32_to_f16(1.0f + 1.0f / 2048) == 0x3c00);         // tie to even
    CHECK(f32_to_f16(1.0f + 3.0f / 2048) == 0x3c02);         // tie to even, up
}

TEST_CASE("core: an npy header longer than its file is refused as truncated - not parsed from the bytes past the end") {
    // (a mutant without the length check parsed the header from past the file's end: "corrupt .npy header:
    // unterminated string", and a file ending at a page boundary would have faulted)
    test::TempDir tmp("npy-cut-header");
    const std::string good = test::read_text(fixture("f32_3x5.npy"));
    REQUIRE(good.size() > 128);   // a version 1.0 header of 128 bytes, then the data
    for (std::size_t keep : {std::size_t(12), std::size_t(40), std::size_t(127)}) {
        CAPTURE(keep);
        const std::string path = (tmp / ("cut" + std::to_string(keep) + ".npy")).string();
        write_bytes(path, good.substr(0, keep));
        CHECK(user_error_message([&] { NpyArray a(path); }) == path + ": truncated .npy header");
    }
}

TEST_CASE("core: an npy header dict without the comma between two entries is refused - as numpy's literal_eval does") {
    // numpy reads the header with ast.literal_eval: "'<f4'  'fortran_order'" is one string there, then a stray ':'
    test::TempDir tmp("npy-comma");
    std::string bytes = test::read_text(fixture("f32_3x5.npy"));
    const std::size_t at = bytes.find("', 'fortran_order'");
    REQUIRE(at != std::string::npos);
    bytes.replace(at, 3, "'  ");   // the same length: the header length still holds
    const std::string path = (tmp / "nocomma.npy").string();
    write_bytes(path, bytes);
    CHECK(user_error_message([&] { NpyArray a(path); }) == path + ": corrupt .npy header: expected ',' or '}' in header");
}

TEST_CASE("core: NpyArray::expect_shape refuses another number of dimensions - a wildcard stands for one size") {
    NpyArray a(fixture("f32_3x5.npy"));
    CHECK_NOTHROW(a.expect_shape({3, 5}));
    CHECK_NOTHROW(a.expect_shape({-1, 5}));
    CHECK_NOTHROW(a.expect_shape({-1, -1}));
    const std::string path = fixture("f32_3x5.npy");
    CHECK(user_error_message([&] { a.expect_shape({3}); }) == path + ": has shape (3, 5), expected (3,)");
    CHECK(user_error_message([&] { a.expect_shape({-1}); }) == path + ": has shape (3, 5), expected (*,)");
    CHECK(user_error_message([&] { a.expect_shape({3, 5, 1}); }) == path + ": has shape (3, 5), expected (3, 5, 1)");
    CHECK(user_error_message([&] { a.expect_shape({3, 4}); }) == path + ": has shape (3, 5), expected (3, 4)");
}

TEST_CASE("core: a safetensors file with no data bytes (only empty tensors, or none) reads back") {
    // the header then ends the file exactly (8 + its length = the file's size), as the safetensors package writes it
    test::TempDir tmp("st-nodata");
    const std::string empty = (tmp / "empty.safetensors").string(), none = (tmp / "none.safetensors").string();
    safetensors_save(empty, {{"e", DType::F32, {0, 4}, nullptr}, {"z", DType::I64, {3, 0}, nullptr}}, {{"k", "v"}});
    safetensors_save(none, {}, {{"k", "v"}});
    for (const std::string& path : {empty, none}) {
        CAPTURE(path);
        const std::string bytes = test::read_text(path);
        std::uint64_t n = 0;
        for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<std::uint8_t>(bytes[static_cast<std::size_t>(i)]);
        CHECK(bytes.size() == 8 + n);
        SafetensorsFile f(path);
        CHECK(f.metadata().at("k") == "v");
        CHECK(f.tensors().size() == (path == empty ? 2u : 0u));
    }
    SafetensorsFile f(empty);
    CHECK(f.get("e", DType::F32, {0, 4}).numel() == 0);
    CHECK(f.get("z", DType::I64, {3, 0}).bytes == 0);
}

TEST_CASE("core: safetensors data_offsets spanning more bytes than the shape needs are refused") {
    // the safetensors package refuses such an entry (its span must be exactly the shape's elements x the dtype's
    // size): reading it would take the bytes after the tensor's elements as no tensor's
    test::TempDir tmp("st-span");
    const std::string json = R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,8]}})";
    std::string bytes(8, '\0');
    for (int i = 0; i < 8; ++i) bytes[static_cast<std::size_t>(i)] = static_cast<char>((json.size() >> (8 * i)) & 0xff);
    bytes += json + std::string(8, '\0');
    const std::string path = (tmp / "span.safetensors").string();
    write_bytes(path, bytes);
    CHECK(user_error_message([&] { SafetensorsFile f(path); }) ==
          path + ": corrupt .safetensors entry 'x': shape (1,) needs 4 bytes but data_offsets span 8");
}
