// Implementation of parquet_meta.h. Field ids are parquet.thrift's (FileMetaData, SchemaElement, RowGroup,
// ColumnChunk, ColumnMetaData, PageHeader and its data, dictionary and v2 data page headers).
#include "text/parquet_meta.h"

#include <cstring>
#include <limits>
#include <string>

#include "text/thrift_compact.h"

namespace retro {
namespace {

void expect_type(ThriftType got, ThriftType want, const char* field) {
    if (got != want) throw ParquetMalformed(std::string("its ") + field + " has the wrong Thrift type");
}

std::int64_t read_count(ThriftReader& r, ThriftType t, const char* field) {
    const std::int64_t v = r.read_int(t);
    if (v < 0) throw ParquetMalformed(std::string("its ") + field + " is negative");
    return v;
}

int read_enum(ThriftReader& r, ThriftType t) {
    const std::int64_t v = r.read_int(t);
    if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max()) return -1;
    return static_cast<int>(v);
}

ParquetSchemaNode read_schema_element(ThriftReader& r) {
    ParquetSchemaNode n;
    bool has_name = false;
    r.begin_struct();
    std::int16_t id = 0;
    ThriftType t{};
    while (r.next_field(id, t)) {
        switch (id) {
        case 1: n.type = read_enum(r, t); break;
        case 3: n.repetition = read_enum(r, t); break;
        case 4: expect_type(t, ThriftType::kBinary, "schema element's name"), n.name = r.read_binary(), has_name = true; break;
        case 5: {
            const std::int64_t c = read_count(r, t, "schema element's child count");
            if (c > std::numeric_limits<int>::max()) throw ParquetMalformed("a schema element with too many children");
            n.num_children = static_cast<int>(c);
            break;
        }
        default: r.skip(t);
        }
    }
    if (!has_name) throw ParquetMalformed("a schema element has no name");
    return n;
}

void read_column_meta(ThriftReader& r, ParquetColumnChunk& c) {
    c.has_meta = true;
    r.begin_struct();
    std::int16_t id = 0;
    ThriftType t{};
    while (r.next_field(id, t)) {
        switch (id) {
        case 1: c.type = read_enum(r, t); break;
        case 3: {
            expect_type(t, ThriftType::kList, "column's path");
            ThriftType e{};
            const std::uint32_t n = r.begin_list(e);
            if (n > 0) expect_type(e, ThriftType::kBinary, "column's path");   // (an empty list's element type may be 0)
            for (std::uint32_t i = 0; i < n; ++i) c.path.emplace_back(r.read_binary());
            break;
        }
        case 4: c.codec = read_enum(r, t); break;
        case 5: c.num_values = read_count(r, t, "column's value count"); break;
        case 7: c.total_compressed_size = read_count(r, t, "column's size"); break;
        case 9: c.data_page_offset = read_count(r, t, "column's data page offset"); break;
        case 11: c.dictionary_page_offset = read_count(r, t, "column's dictionary page offset"); break;
        default: r.skip(t);
        }
    }
}

ParquetColumnChunk read_column_chunk(ThriftReader& r) {
    ParquetColumnChunk c;
    r.begin_struct();
    std::int16_t id = 0;
    ThriftType t{};
    while (r.next_field(id, t)) {
        if (id == 1 && t == ThriftType::kBinary) c.file_path = r.read_binary();
        else if (id == 3 && t == ThriftType::kStruct) read_column_meta(r, c);
        else r.skip(t);
    }
    return c;
}

ParquetRowGroup read_row_group(ThriftReader& r) {
    ParquetRowGroup g;
    r.begin_struct();
    std::int16_t id = 0;
    ThriftType t{};
    while (r.next_field(id, t)) {
        if (id == 1) {
            expect_type(t, ThriftType::kList, "row group's columns");
            ThriftType e{};
            const std::uint32_t n = r.begin_list(e);
            if (n > 0) expect_type(e, ThriftType::kStruct, "row group's columns");   // (an empty list's element type may be 0)
            for (std::uint32_t i = 0; i < n; ++i) g.columns.push_back(read_column_chunk(r));
        } else if (id == 3) {
            g.num_rows = read_count(r, t, "row group's row count");
        } else {
            r.skip(t);
        }
    }
    return g;
}

}  // namespace

const char* parquet_type_name(int type) {
    static const char* const names[] = {"BOOLEAN", "INT32", "INT64", "INT96", "FLOAT", "DOUBLE", "BYTE_ARRAY", "FIXED_LEN_BYTE_ARRAY"};
    return type >= 0 && type < 8 ? names[type] : "an unknown type";
}

const char* parquet_codec_name(int codec) {
    static const char* const names[] = {"UNCOMPRESSED", "SNAPPY", "GZIP", "LZO", "BROTLI", "LZ4", "ZSTD", "LZ4_RAW"};
    return codec >= 0 && codec < 8 ? names[codec] : "an unknown codec";
}

const char* parquet_encoding_name(int encoding) {
    static const char* const names[] = {"PLAIN", "GROUP_VAR_INT", "PLAIN_DICTIONARY", "RLE", "BIT_PACKED",
                                        "DELTA_BINARY_PACKED", "DELTA_LENGTH_BYTE_ARRAY", "DELTA_BYTE_ARRAY",
                                        "RLE_DICTIONARY", "BYTE_STREAM_SPLIT"};
    return encoding >= 0 && encoding < 10 ? names[encoding] : "an unknown encoding";
}

ParquetFooter parquet_read_footer(const std::uint8_t* data, std::size_t size) {
    if (size < 12) throw ParquetMalformed("too short for a Parquet file (" + std::to_string(size) + " bytes)");
    if (std::memcmp(data + size - 4, "PARE", 4) == 0) throw ParquetMalformed("an encrypted Parquet file (PARE)");
    if (std::memcmp(data + size - 4, "PAR1", 4) != 0 || std::memcmp(data, "PAR1", 4) != 0)
        throw ParquetMalformed("no PAR1 at its start and end: not a Parquet file, or one cut short");
    const std::uint32_t footer_len = parquet_le32(data + size - 8);
    if (footer_len > size - 12)
        throw ParquetMalformed("its footer length (" + std::to_string(footer_len) + ") is more than the file holds");
    ParquetFooter f;
    f.footer_offset = size - 8 - footer_len;
    try {
        ThriftReader r(data + f.footer_offset, footer_len);
        r.begin_struct();
        std::int16_t id = 0;
        ThriftType t{};
        bool has_schema = false;
        while (r.next_field(id, t)) {
            switch (id) {
            case 2: {
                expect_type(t, ThriftType::kList, "schema");
                ThriftType e{};
                const std::uint32_t n = r.begin_list(e);
                if (n > 0) expect_type(e, ThriftType::kStruct, "schema");
                for (std::uint32_t i = 0; i < n; ++i) f.schema.push_back(read_schema_element(r));
                has_schema = true;
                break;
            }
            case 3: f.num_rows = read_count(r, t, "row count"); break;
            case 4: {
                expect_type(t, ThriftType::kList, "row groups");
                ThriftType e{};
                const std::uint32_t n = r.begin_list(e);
                if (n > 0) expect_type(e, ThriftType::kStruct, "row groups");
                for (std::uint32_t i = 0; i < n; ++i) f.row_groups.push_back(read_row_group(r));
                break;
            }
            default: r.skip(t);
            }
        }
        if (!has_schema || f.schema.empty()) throw ParquetMalformed("its footer has no schema");
    } catch (const ThriftMalformed& e) {
        throw ParquetMalformed(std::string("its footer is damaged (") + e.what() + ")");
    }
    return f;
}

ParquetPageHeader parquet_read_page_header(const std::uint8_t* data, std::size_t size) {
    ParquetPageHeader h;
    try {
        ThriftReader r(data, size);
        r.begin_struct();
        std::int16_t id = 0;
        ThriftType t{};
        while (r.next_field(id, t)) {
            switch (id) {
            case 1: h.type = read_enum(r, t); break;
            case 2: h.uncompressed_size = read_count(r, t, "page's size"); break;
            case 3: h.compressed_size = read_count(r, t, "page's compressed size"); break;
            case 4: h.has_crc = true, h.crc = static_cast<std::uint32_t>(r.read_int(t)); break;
            case 5:
            case 7:
            case 8: {
                expect_type(t, ThriftType::kStruct, "page's header");
                r.begin_struct();
                std::int16_t sub = 0;
                ThriftType st{};
                while (r.next_field(sub, st)) {
                    if (sub == 1) h.num_values = read_count(r, st, "page's value count");
                    else if (id == 8 && sub == 2) h.num_nulls = read_count(r, st, "page's null count");
                    else if ((id != 8 && sub == 2) || (id == 8 && sub == 4)) h.encoding = read_enum(r, st);
                    else if (id == 5 && sub == 3) h.definition_level_encoding = read_enum(r, st);
                    else if (id == 5 && sub == 4) h.repetition_level_encoding = read_enum(r, st);
                    else if (id == 8 && sub == 5) h.definition_levels_bytes = read_count(r, st, "page's level size");
                    else if (id == 8 && sub == 6) h.repetition_levels_bytes = read_count(r, st, "page's level size");
                    else if (id == 8 && sub == 7) h.is_compressed = r.read_bool(st);
                    else r.skip(st);
                }
                break;
            }
            default: r.skip(t);
            }
        }
        h.header_size = r.position();
    } catch (const ThriftMalformed& e) {
        throw ParquetMalformed(std::string("a page header is damaged (") + e.what() + ")");
    }
    return h;
}

}  // namespace retro
