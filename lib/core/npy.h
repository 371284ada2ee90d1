// NumPy .npy files: parse/validate a header, map a file read-only, write whole arrays atomically,
// and stream rows into a file whose header is patched at commit. Format versions 1.0, 2.0 (and
// 3.0 on read), C order, little-endian. Any malformed or lying header is a UserError naming the
// file; nothing is allocated from header values before they are checked against the file size.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/atomic_file.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/mapped_file.h"

namespace retro {

struct NpyHeader {
    DType dtype = DType::U8;
    std::vector<std::int64_t> shape;
    std::size_t data_offset = 0;   // bytes before the array data
    int major = 1, minor = 0;
    std::int64_t numel() const;
};

// Parses the header at the front of `bytes`; checks that the data fits in `size`.
NpyHeader npy_parse(const std::uint8_t* bytes, std::size_t size, const std::string& path);

// Header bytes (magic .. '\n') for an array; padded with spaces so its length is a multiple of
// 64 and at least `min_length` (used by the streaming writer to leave room for the final shape).
std::string npy_header_bytes(DType dtype, const std::vector<std::int64_t>& shape, std::size_t min_length = 0);

// A read-only mapped .npy array.
class NpyArray {
public:
    NpyArray() = default;
    explicit NpyArray(const std::string& path);
    const NpyHeader& header() const { return header_; }
    DType dtype() const { return header_.dtype; }
    const std::vector<std::int64_t>& shape() const { return header_.shape; }
    std::int64_t numel() const { return header_.numel(); }
    std::int64_t dim(std::size_t i) const { return header_.shape.at(i); }
    const void* raw() const { return file_.data() + header_.data_offset; }
    std::size_t bytes() const { return static_cast<std::size_t>(numel()) * dtype_size(header_.dtype); }
    const std::string& path() const { return file_.path(); }

    // Typed view; throws UserError naming the file when the dtype differs.
    template <typename T>
    const T* data() const {
        if (dtype_of<T>() != header_.dtype)
            user_error_in(path(), "has dtype " + dtype_name(header_.dtype) + ", expected " + dtype_name(dtype_of<T>()));
        return static_cast<const T*>(raw());
    }
    // Throws UserError naming the file unless the rank (and non-negative entries of `shape`) match.
    void expect_shape(const std::vector<std::int64_t>& shape) const;

private:
    MappedFile file_;
    NpyHeader header_;
};

// Writes a whole array atomically.
void npy_save(const std::string& path, DType dtype, const std::vector<std::int64_t>& shape, const void* data);

template <typename T>
void npy_save(const std::string& path, const std::vector<std::int64_t>& shape, const T* data) {
    npy_save(path, dtype_of<T>(), shape, data);
}

// Streams rows of shape `row_shape` into PATH.tmp; commit() writes the final header and renames.
class NpyWriter {
public:
    NpyWriter(const std::string& path, DType dtype, std::vector<std::int64_t> row_shape);
    void append(const void* rows, std::int64_t row_count);
    std::int64_t rows() const { return rows_; }
    void commit();

private:
    AtomicFile file_;
    DType dtype_;
    std::vector<std::int64_t> row_shape_;
    std::size_t row_bytes_ = 0;
    std::size_t header_length_ = 0;
    std::int64_t rows_ = 0;
};

}  // namespace retro
