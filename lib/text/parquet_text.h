// One text column of a Parquet file, read row by row: a corpus's documents as the Hugging Face hub, pyarrow, pandas,
// Polars, DuckDB and Spark write them (a top-level BYTE_ARRAY column, REQUIRED or OPTIONAL; pages v1 or v2; PLAIN,
// dictionary, DELTA_LENGTH_BYTE_ARRAY or DELTA_BYTE_ARRAY values; SNAPPY, GZIP, ZSTD, LZ4, LZ4_RAW, BROTLI or no compression). The file is
// memory-mapped and read one page at a time, so memory stays at a page (and its column chunk's dictionary), whatever
// the file's size. Why our own reader and not Apache Arrow's: docs/dependencies.md.
// provides: ParquetColumnProblem, ParquetTextFile
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/mapped_file.h"
#include "text/parquet_meta.h"

namespace retro {

// The file is whole, but its column `name` cannot be read as text (missing, nested, repeated, not strings).
struct ParquetColumnProblem : ParquetMalformed {
    using ParquetMalformed::ParquetMalformed;
};

class ParquetTextFile {
public:
    explicit ParquetTextFile(const std::string& path);   // UserError where it cannot be opened; ParquetMalformed
    std::int64_t num_rows() const { return footer_.num_rows; }
    // The top-level columns, as "name (TYPE)" ("name (group)" for a nested one), for a refusal's list.
    std::vector<std::string> column_names() const;

    // Calls fn(row, text, page_offset) for each row of column `name`, in order: row counts from 0 in the file; text is
    // the row's string (its bytes as stored: the caller checks UTF-8), or nullptr for a null; page_offset is where the
    // row's page starts in the file (progress). Throws ParquetColumnProblem or ParquetMalformed.
    void read_column(const std::string& name,
                     const std::function<void(std::int64_t row, const std::string_view* text, std::int64_t page_offset)>& fn) const;

private:
    struct Leaf {
        std::size_t index = 0;   // among the schema's leaves: the row groups' column chunk
        std::size_t node = 0;    // in footer_.schema
        int depth = 0;           // 1: a top-level column
    };
    void find_leaves(std::size_t& next, int depth, std::vector<Leaf>& leaves, std::vector<std::size_t>& top) const;
    void read_chunk(const ParquetColumnChunk& chunk, int max_definition, std::int64_t& row,
                    const std::function<void(std::int64_t, const std::string_view*, std::int64_t)>& fn) const;

    MappedFile file_;
    ParquetFooter footer_;
    std::vector<Leaf> leaves_;
    std::vector<std::size_t> top_;   // the schema nodes of the top-level columns
};

}  // namespace retro
