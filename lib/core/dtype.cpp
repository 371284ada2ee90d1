// Implementation of dtype.h.
#include "core/dtype.h"

#include <array>
#include <cstring>

#include "core/error.h"

namespace retro {
namespace {
struct DTypeInfo {
    DType type;
    std::size_t size;
    const char* name;
    const char* npy;
    const char* st;
};
constexpr std::array<DTypeInfo, 13> kInfo{{
    {DType::U8, 1, "u8", "|u1", "U8"},       {DType::I8, 1, "i8", "|i1", "I8"},
    {DType::U16, 2, "u16", "<u2", "U16"},    {DType::I16, 2, "i16", "<i2", "I16"},
    {DType::U32, 4, "u32", "<u4", "U32"},    {DType::I32, 4, "i32", "<i4", "I32"},
    {DType::U64, 8, "u64", "<u8", "U64"},    {DType::I64, 8, "i64", "<i8", "I64"},
    {DType::F16, 2, "f16", "<f2", "F16"},    {DType::BF16, 2, "bf16", "<u2", "BF16"},
    {DType::F32, 4, "f32", "<f4", "F32"},    {DType::F64, 8, "f64", "<f8", "F64"},
    {DType::BOOL, 1, "bool", "|b1", "BOOL"},
}};
const DTypeInfo& info(DType t) {
    for (const auto& i : kInfo)
        if (i.type == t) return i;
    throw InternalError("unknown DType");
}
}  // namespace

std::size_t dtype_size(DType t) { return info(t).size; }
std::string dtype_name(DType t) { return info(t).name; }
std::string dtype_npy_descr(DType t) { return info(t).npy; }
std::string dtype_safetensors_name(DType t) { return info(t).st; }

bool dtype_from_name(const std::string& name, DType& out) {
    for (const auto& i : kInfo)
        if (name == i.name) return out = i.type, true;
    return false;
}

bool dtype_from_npy_descr(const std::string& descr, DType& out) {
    // numpy writes '|u1' for one-byte types and '<..' on little-endian machines; '=' is native.
    std::string d = descr;
    if (d.size() == 2) d = "|" + d;
    if (d.size() == 3 && d[0] == '=') d[0] = '<';
    if (d.size() == 3 && (d[1] == 'u' || d[1] == 'i' || d[1] == 'b') && d[2] == '1' && d[0] == '<') d[0] = '|';
    for (const auto& i : kInfo)
        if (i.type != DType::BF16 && d == i.npy) return out = i.type, true;
    return false;
}

bool dtype_from_safetensors_name(const std::string& name, DType& out) {
    for (const auto& i : kInfo)
        if (name == i.st) return out = i.type, true;
    return false;
}

std::int64_t shape_numel(const std::vector<std::int64_t>& shape, const std::string& path) {
    std::int64_t n = 1;
    constexpr std::int64_t kMax = std::int64_t(1) << 62;
    for (auto d : shape) {
        if (d < 0) user_error_in(path, "negative dimension in shape " + shape_string(shape));
        if (d != 0 && n > kMax / d) user_error_in(path, "shape " + shape_string(shape) + " is impossibly large");
        n *= d;
    }
    return n;
}

std::string shape_string(const std::vector<std::int64_t>& shape) {
    std::string s = "(";
    for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    if (shape.size() == 1) s += ",";
    return s + ")";
}

std::uint16_t f32_to_bf16(float f) {
    std::uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40);   // NaN stays NaN
    u += 0x7fffu + ((u >> 16) & 1u);
    return static_cast<std::uint16_t>(u >> 16);
}

float bf16_to_f32(std::uint16_t h) {
    std::uint32_t u = static_cast<std::uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

// IEEE half <-> single by bit manipulation (portable: clang 14 has no _Float16 on x86-64).
std::uint16_t f32_to_f16(float f) {
    std::uint32_t u;
    std::memcpy(&u, &f, 4);
    std::uint32_t sign = (u >> 16) & 0x8000u;
    std::uint32_t abs = u & 0x7fffffffu;
    if (abs > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u);   // NaN
    if (abs >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // rounds to inf
    if (abs < 0x38800000u) {   // subnormal half (or zero): value = abs_float * 2^24 units
        float a;
        std::memcpy(&a, &abs, 4);
        float scaled = a * 16777216.0f;   // exact; round to nearest even below
        std::uint32_t m = static_cast<std::uint32_t>(scaled);
        float rest = scaled - static_cast<float>(m);
        if (rest > 0.5f || (rest == 0.5f && (m & 1u))) ++m;
        return static_cast<std::uint16_t>(sign | m);
    }
    std::uint32_t mant = abs & 0x7fffffu, exp = (abs >> 23) - 127 + 15;
    std::uint32_t h = (exp << 10) | (mant >> 13);
    std::uint32_t round = mant & 0x1fffu;
    if (round > 0x1000u || (round == 0x1000u && (h & 1u))) ++h;   // may carry into the exponent: fine
    return static_cast<std::uint16_t>(sign | h);
}

float f16_to_f32(std::uint16_t h) {
    std::uint32_t sign = (static_cast<std::uint32_t>(h) & 0x8000u) << 16;
    std::uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu, u;
    if (exp == 0) {
        float v = static_cast<float>(mant) / 16777216.0f;   // mant * 2^-24
        std::memcpy(&u, &v, 4);
        u |= sign;
    } else if (exp == 31) {
        u = sign | 0x7f800000u | (mant << 13);
    } else {
        u = sign | ((exp - 15 + 127) << 23) | (mant << 13);
    }
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

}  // namespace retro
