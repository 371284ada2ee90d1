// A Parquet file's footer, read from the file's bytes: its schema, row groups and column chunks, and its page headers
// (format: apache/parquet-format, src/main/thrift/parquet.thrift). Only what reading one text column of a corpus needs
// is kept; every other field is skipped. Damaged bytes throw ParquetMalformed with what was wrong.
// provides: ParquetMalformed, parquet enums, ParquetSchemaNode, ParquetColumnChunk, ParquetRowGroup, ParquetFooter,
//           parquet_read_footer, ParquetPageHeader, parquet_read_page_header, parquet_type_name, parquet_codec_name,
//           parquet_encoding_name, parquet_le32
#pragma once
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace retro {

struct ParquetMalformed : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// parquet.thrift's enums, as the file holds them
namespace parquet {
enum Type : int { kBoolean = 0, kInt32 = 1, kInt64 = 2, kInt96 = 3, kFloat = 4, kDouble = 5, kByteArray = 6, kFixedLenByteArray = 7 };
enum Repetition : int { kRequired = 0, kOptional = 1, kRepeated = 2 };
enum Codec : int { kUncompressed = 0, kSnappy = 1, kGzip = 2, kLzo = 3, kBrotli = 4, kLz4 = 5, kZstd = 6, kLz4Raw = 7 };
enum Encoding : int {
    kPlain = 0, kPlainDictionary = 2, kRle = 3, kBitPacked = 4, kDeltaBinaryPacked = 5, kDeltaLengthByteArray = 6,
    kDeltaByteArray = 7, kRleDictionary = 8, kByteStreamSplit = 9
};
enum PageType : int { kDataPage = 0, kIndexPage = 1, kDictionaryPage = 2, kDataPageV2 = 3 };
}  // namespace parquet

const char* parquet_type_name(int type);
const char* parquet_codec_name(int codec);
const char* parquet_encoding_name(int encoding);

struct ParquetSchemaNode {
    std::string name;
    int type = -1;                          // parquet::Type; -1 for a group
    int repetition = parquet::kRequired;    // parquet::Repetition
    int num_children = 0;                   // > 0 for a group
};

struct ParquetColumnChunk {
    bool has_meta = false;                  // false: encrypted, or written elsewhere
    std::string file_path;                  // a chunk in another file (never in a corpus file)
    int type = -1, codec = parquet::kUncompressed;
    std::vector<std::string> path;          // path_in_schema
    std::int64_t num_values = 0, total_compressed_size = 0, data_page_offset = -1, dictionary_page_offset = -1;
};

struct ParquetRowGroup {
    std::int64_t num_rows = 0;
    std::vector<ParquetColumnChunk> columns;   // one a leaf of the schema, in the schema's order
};

struct ParquetFooter {
    std::int64_t num_rows = 0;
    std::vector<ParquetSchemaNode> schema;     // depth first; schema[0] is the root
    std::vector<ParquetRowGroup> row_groups;
    std::size_t footer_offset = 0;             // where the FileMetaData starts: column data lies before it
};

// Reads the footer of a whole Parquet file in memory (`data`, `size`): "PAR1", the data, FileMetaData, its 4-byte
// length, "PAR1". Throws ParquetMalformed ("no PAR1 at its end": not a Parquet file; "PARE": encrypted).
ParquetFooter parquet_read_footer(const std::uint8_t* data, std::size_t size);

struct ParquetPageHeader {
    int type = -1;                             // parquet::PageType
    std::int64_t uncompressed_size = 0, compressed_size = 0;
    bool has_crc = false;
    std::uint32_t crc = 0;
    std::int64_t num_values = 0;               // data and dictionary pages
    int encoding = parquet::kPlain;            // of the values
    int definition_level_encoding = parquet::kRle;   // v1 data pages
    int repetition_level_encoding = parquet::kRle;
    std::int64_t num_nulls = 0;                // v2 data pages
    std::int64_t definition_levels_bytes = 0, repetition_levels_bytes = 0;
    bool is_compressed = true;                 // v2: false where the values were left uncompressed
    std::size_t header_size = 0;               // the header's own bytes, before the page's
};

// Reads the page header at data[0, size). Throws ParquetMalformed.
ParquetPageHeader parquet_read_page_header(const std::uint8_t* data, std::size_t size);

// A 4-byte little-endian length (the footer's, a PLAIN string's, a v1 page's definition levels').
inline std::uint32_t parquet_le32(const std::uint8_t* p) {
    return static_cast<std::uint32_t>(p[0]) | static_cast<std::uint32_t>(p[1]) << 8 | static_cast<std::uint32_t>(p[2]) << 16 |
           static_cast<std::uint32_t>(p[3]) << 24;
}

}  // namespace retro
