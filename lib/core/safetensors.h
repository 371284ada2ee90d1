// .safetensors files (Hugging Face): 8-byte little-endian header length, a JSON header
// {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {str: str}}, then the bytes.
// Reading maps the file and validates every entry against the file size before use; writing is
// atomic and pads the header with spaces to 8 bytes, as the reference library does.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/mapped_file.h"

namespace retro {

struct TensorView {
    DType dtype = DType::F32;
    std::vector<std::int64_t> shape;
    const void* data = nullptr;
    std::size_t bytes = 0;
    std::int64_t numel() const { return shape_numel(shape, ""); }
};

class SafetensorsFile {
public:
    SafetensorsFile() = default;
    explicit SafetensorsFile(const std::string& path);
    bool has(const std::string& name) const { return tensors_.count(name) != 0; }
    // Throws UserError naming the file and tensor when missing.
    const TensorView& get(const std::string& name) const;
    // Like get, also checking dtype and shape.
    const TensorView& get(const std::string& name, DType dtype, const std::vector<std::int64_t>& shape) const;
    const std::map<std::string, TensorView>& tensors() const { return tensors_; }
    const std::map<std::string, std::string>& metadata() const { return metadata_; }
    const std::string& path() const { return file_.path(); }
    // Bytes of tensors copied out of the mapping because their offset in the file is not a multiple of their element
    // size (the format allows it: no padding between tensors, any header length); the readers cast `data` to
    // float*, uint16_t*, ..., which must be aligned. 0 for every file the reference library or we write.
    std::size_t copied_bytes() const { return copied_bytes_; }

private:
    MappedFile file_;
    std::vector<std::vector<std::uint64_t>> copies_;   // the unaligned tensors' aligned copies (8-byte storage)
    std::size_t copied_bytes_ = 0;
    std::map<std::string, TensorView> tensors_;
    std::map<std::string, std::string> metadata_;
};

struct TensorToWrite {
    std::string name;
    DType dtype = DType::F32;
    std::vector<std::int64_t> shape;
    const void* data = nullptr;
};

void safetensors_save(const std::string& path, const std::vector<TensorToWrite>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

}  // namespace retro
