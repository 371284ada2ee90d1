// A reader of Apache Thrift's compact protocol over bytes in memory: as much of it as Parquet's footer (FileMetaData)
// and page headers need, every read bounded by the bytes given. Spec: thrift/doc/specs/thrift-compact-protocol.md.
// A struct is a run of fields, each a header byte (the field id's delta from the one before in its high nibble, 0 for
// an explicit zigzag-varint id after it; the type in its low nibble) and a value, up to a stop byte (0). Integers are
// zigzag varints; a list is a header byte (its size in the high nibble, 15 for a varint size after it; the element
// type in the low nibble) and its elements. Damaged bytes throw ThriftMalformed, never read past the end.
// provides: ThriftMalformed, ThriftType, ThriftReader
#pragma once
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string_view>
#include <vector>

namespace retro {

struct ThriftMalformed : std::runtime_error {
    using std::runtime_error::runtime_error;
};

enum class ThriftType : std::uint8_t {
    kStop = 0, kTrue = 1, kFalse = 2, kByte = 3, kI16 = 4, kI32 = 5, kI64 = 6, kDouble = 7, kBinary = 8,
    kList = 9, kSet = 10, kMap = 11, kStruct = 12
};

class ThriftReader {
public:
    ThriftReader(const std::uint8_t* data, std::size_t size) : p_(data), end_(data + size), begin_(data) {}
    std::size_t position() const { return static_cast<std::size_t>(p_ - begin_); }

    // Struct walking: begin_struct(), then next_field() until it returns false (the stop byte, which ends the struct).
    void begin_struct();
    bool next_field(std::int16_t& id, ThriftType& type);

    std::int64_t read_int(ThriftType type);    // a byte, i16, i32 or i64 field's value
    bool read_bool(ThriftType type);           // a bool field: its value is its type
    std::string_view read_binary();            // a string or binary, in place
    std::uint32_t begin_list(ThriftType& element);   // a list's (or set's) size; its elements follow
    void skip(ThriftType type);                // any value of this type (unknown fields)

private:
    std::uint8_t byte();
    std::uint64_t varint();
    void skip_value(ThriftType type, int depth);
    const std::uint8_t* p_;
    const std::uint8_t* end_;
    const std::uint8_t* begin_;
    std::vector<std::int16_t> last_ids_;   // the last field id of each open struct
};

}  // namespace retro
