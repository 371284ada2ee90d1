// Element types shared by .npy and .safetensors. bf16 has no numpy dtype: in .npy it is stored
// as '<u2' and tagged "bf16" in manifest.json (docs/formats.md); safetensors has "BF16".
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace retro {

enum class DType { U8, I8, U16, I16, U32, I32, U64, I64, F16, BF16, F32, F64, BOOL };

std::size_t dtype_size(DType t);
std::string dtype_name(DType t);                   // "u8", "i32", "f32", "bf16", ...
bool dtype_from_name(const std::string& name, DType& out);
std::string dtype_npy_descr(DType t);              // "|u1", "<i4", ... (bf16 -> "<u2")
bool dtype_from_npy_descr(const std::string& descr, DType& out);
std::string dtype_safetensors_name(DType t);       // "U8", "F32", "BF16", ...
bool dtype_from_safetensors_name(const std::string& name, DType& out);

template <typename T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<std::uint8_t>() { return DType::U8; }
template <> constexpr DType dtype_of<std::int8_t>() { return DType::I8; }
template <> constexpr DType dtype_of<std::uint16_t>() { return DType::U16; }
template <> constexpr DType dtype_of<std::int16_t>() { return DType::I16; }
template <> constexpr DType dtype_of<std::uint32_t>() { return DType::U32; }
template <> constexpr DType dtype_of<std::int32_t>() { return DType::I32; }
template <> constexpr DType dtype_of<std::uint64_t>() { return DType::U64; }
template <> constexpr DType dtype_of<std::int64_t>() { return DType::I64; }
template <> constexpr DType dtype_of<float>() { return DType::F32; }
template <> constexpr DType dtype_of<double>() { return DType::F64; }

// Number of elements of a shape; throws UserError naming `path` if it overflows 2^62.
std::int64_t shape_numel(const std::vector<std::int64_t>& shape, const std::string& path);
std::string shape_string(const std::vector<std::int64_t>& shape);   // "(3, 4)"

// bf16 <-> f32 (round to nearest even), f16 <-> f32.
std::uint16_t f32_to_bf16(float f);
float bf16_to_f32(std::uint16_t h);
std::uint16_t f32_to_f16(float f);
float f16_to_f32(std::uint16_t h);

}  // namespace retro
