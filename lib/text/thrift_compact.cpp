// Implementation of thrift_compact.h.
#include "text/thrift_compact.h"

#include <string>

namespace retro {
namespace {
constexpr int kMaxDepth = 32;   // nested structs and lists; Parquet's deepest is 4

ThriftType type_of(std::uint8_t nibble) {
    if (nibble > static_cast<std::uint8_t>(ThriftType::kStruct))
        throw ThriftMalformed("unknown Thrift type " + std::to_string(nibble));
    return static_cast<ThriftType>(nibble);
}

std::int64_t unzigzag(std::uint64_t v) { return static_cast<std::int64_t>(v >> 1) ^ -static_cast<std::int64_t>(v & 1); }
}  // namespace

std::uint8_t ThriftReader::byte() {
    if (p_ >= end_) throw ThriftMalformed("cut short");
    return *p_++;
}

std::uint64_t ThriftReader::varint() {
    std::uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        const std::uint8_t b = byte();
        v |= static_cast<std::uint64_t>(b & 0x7f) << shift;
        if (!(b & 0x80)) return v;
    }
    throw ThriftMalformed("a varint longer than 10 bytes");
}

void ThriftReader::begin_struct() {
    if (last_ids_.size() >= kMaxDepth) throw ThriftMalformed("structs nested too deep");
    last_ids_.push_back(0);
}

bool ThriftReader::next_field(std::int16_t& id, ThriftType& type) {
    if (last_ids_.empty()) throw ThriftMalformed("a field outside a struct");
    const std::uint8_t header = byte();
    if (header == 0) {
        last_ids_.pop_back();
        return false;
    }
    type = type_of(header & 0x0f);
    if (type == ThriftType::kStop) throw ThriftMalformed("a stop type in a field header");
    const int delta = header >> 4;
    if (delta != 0) {
        id = static_cast<std::int16_t>(last_ids_.back() + delta);
    } else {
        const std::int64_t explicit_id = unzigzag(varint());
        if (explicit_id < -32768 || explicit_id > 32767) throw ThriftMalformed("a field id out of range");
        id = static_cast<std::int16_t>(explicit_id);
    }
    last_ids_.back() = id;
    return true;
}

std::int64_t ThriftReader::read_int(ThriftType type) {
    switch (type) {
    case ThriftType::kByte: return static_cast<std::int8_t>(byte());
    case ThriftType::kI16:
    case ThriftType::kI32:
    case ThriftType::kI64: return unzigzag(varint());
    default: throw ThriftMalformed("an integer field of another type");
    }
}

bool ThriftReader::read_bool(ThriftType type) {
    if (type == ThriftType::kTrue) return true;
    if (type == ThriftType::kFalse) return false;
    throw ThriftMalformed("a bool field of another type");
}

std::string_view ThriftReader::read_binary() {
    const std::uint64_t n = varint();
    if (n > static_cast<std::uint64_t>(end_ - p_)) throw ThriftMalformed("a string longer than the bytes left");
    const std::string_view s(reinterpret_cast<const char*>(p_), static_cast<std::size_t>(n));
    p_ += n;
    return s;
}

std::uint32_t ThriftReader::begin_list(ThriftType& element) {
    const std::uint8_t header = byte();
    element = type_of(header & 0x0f);
    std::uint64_t n = header >> 4;
    if (n == 15) n = varint();
    // every element takes a byte at least (a bool in a list is one byte; an empty struct its stop byte)
    if (n > static_cast<std::uint64_t>(end_ - p_)) throw ThriftMalformed("a list longer than the bytes left");
    return static_cast<std::uint32_t>(n);
}

void ThriftReader::skip(ThriftType type) { skip_value(type, 0); }

void ThriftReader::skip_value(ThriftType type, int depth) {
    if (depth > kMaxDepth) throw ThriftMalformed("values nested too deep");
    switch (type) {
    case ThriftType::kTrue:
    case ThriftType::kFalse: return;   // a field's bool is its type (in a list: one byte, skipped there)
    case ThriftType::kByte: byte(); return;
    case ThriftType::kI16:
    case ThriftType::kI32:
    case ThriftType::kI64: varint(); return;
    case ThriftType::kDouble:
        if (end_ - p_ < 8) throw ThriftMalformed("cut short");
        p_ += 8;
        return;
    case ThriftType::kBinary: read_binary(); return;
    case ThriftType::kList:
    case ThriftType::kSet: {
        ThriftType element{};
        const std::uint32_t n = begin_list(element);
        for (std::uint32_t i = 0; i < n; ++i) {
            if (element == ThriftType::kTrue || element == ThriftType::kFalse) byte();
            else skip_value(element, depth + 1);
        }
        return;
    }
    case ThriftType::kMap: {
        const std::uint64_t n = varint();
        if (n == 0) return;
        if (n > static_cast<std::uint64_t>(end_ - p_)) throw ThriftMalformed("a map longer than the bytes left");
        const std::uint8_t kinds = byte();
        const ThriftType key = type_of(kinds >> 4), value = type_of(kinds & 0x0f);
        for (std::uint64_t i = 0; i < n; ++i) {
            for (const ThriftType t : {key, value}) {
                if (t == ThriftType::kTrue || t == ThriftType::kFalse) byte();
                else skip_value(t, depth + 1);
            }
        }
        return;
    }
    case ThriftType::kStruct: {
        begin_struct();
        std::int16_t id = 0;
        ThriftType field{};
        while (next_field(id, field)) skip_value(field, depth + 1);
        return;
    }
    case ThriftType::kStop: break;
    }
    throw ThriftMalformed("a value of type stop");
}

}  // namespace retro
