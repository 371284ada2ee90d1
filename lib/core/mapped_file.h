// Read-only memory map of a whole file (RAII). Empty files map to an empty span. A page that can no longer be read (the
// file truncated while mapped, or an I/O error: SIGBUS) ends the process with one line naming the file, exit 2.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace retro {

class MappedFile {
public:
    MappedFile() = default;
    explicit MappedFile(const std::string& path);   // throws UserError naming the file
    ~MappedFile();
    MappedFile(MappedFile&& other) noexcept;
    MappedFile& operator=(MappedFile&& other) noexcept;
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;

    const std::uint8_t* data() const { return data_; }
    std::size_t size() const { return size_; }
    const std::string& path() const { return path_; }

private:
    std::string path_;
    const std::uint8_t* data_ = nullptr;
    std::size_t size_ = 0;
};

}  // namespace retro
