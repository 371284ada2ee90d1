// Fingerprints: xxh3-64 of a file's bytes (or a buffer), as 16 lowercase hex digits. Used in
// manifest.json so a stage can refuse inputs made from something else.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace retro {

std::string fingerprint_bytes(const void* data, std::size_t n);
class Progress;
// Throws UserError naming the file; adds the bytes read to `progress` when given.
std::string fingerprint_file(const std::string& path, Progress* progress = nullptr);

// Incremental form, for data written in pieces.
class Fingerprinter {
public:
    Fingerprinter();
    ~Fingerprinter();
    Fingerprinter(const Fingerprinter&) = delete;
    Fingerprinter& operator=(const Fingerprinter&) = delete;
    void update(const void* data, std::size_t n);
    std::string hex() const;

private:
    void* state_;
};

}  // namespace retro
