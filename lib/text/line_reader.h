// Reads a text file line by line, transparently decompressing .gz (zlib) and .zst (zstd).
// Lines are returned without the trailing '\n' (and '\r'); byte_offset() is the offset of the
// last line in the decompressed stream.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

namespace retro {

class LineReader {
public:
    explicit LineReader(const std::string& path);   // throws UserError naming the file
    ~LineReader();
    LineReader(const LineReader&) = delete;
    LineReader& operator=(const LineReader&) = delete;
    bool next(std::string& line);
    std::int64_t line_number() const { return line_number_; }     // 1-based, of the last line
    std::int64_t byte_offset() const { return line_offset_; }
    const std::string& path() const { return path_; }

    struct Source;   // one implementation per compression kind (line_reader.cpp)

private:
    bool fill();   // appends decompressed bytes to buf_; false at end of input
    std::unique_ptr<Source> src_;
    std::string path_, buf_;
    std::size_t pos_ = 0;
    std::int64_t line_number_ = 0, line_offset_ = 0, consumed_ = 0;
};

// Reads a whole (possibly compressed) file into memory.
std::string read_whole_file(const std::string& path);

}  // namespace retro
