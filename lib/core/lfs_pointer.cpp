// Implementation of lfs_pointer.h.
#include "core/lfs_pointer.h"

#include <algorithm>
#include <cstring>
#include <fstream>

#include "core/error.h"

namespace retro {

namespace {
constexpr char kPointerStart[] = "version https://git-lfs.github.com/spec/";
}

bool is_lfs_pointer(const std::uint8_t* bytes, std::size_t size) {
    const std::size_t n = sizeof(kPointerStart) - 1;
    return size >= n && std::memcmp(bytes, kPointerStart, n) == 0;
}

void refuse_lfs_pointer(const std::string& path, const std::uint8_t* bytes, std::size_t size) {
    if (!is_lfs_pointer(bytes, size)) return;
    // "size N" names the real file's bytes (the pointer's last line, by the spec's key order)
    const std::string text(reinterpret_cast<const char*>(bytes), std::min<std::size_t>(size, 1024));
    std::string real;
    if (const std::size_t at = text.find("\nsize "); at != std::string::npos) {
        const std::size_t begin = at + 6, end = text.find_first_not_of("0123456789", begin);
        real = text.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
    }
    user_error_in(path,
                  "is a Git LFS pointer" + (real.empty() ? std::string() : " to a " + real + "-byte file") +
                      ", not the file itself (the repository was cloned without git-lfs)",
                  "fetch it with `git lfs pull` in that clone (after `git lfs install`), or download the file itself");
}

void refuse_lfs_pointer_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    char head[200];
    in.read(head, sizeof head);
    refuse_lfs_pointer(path, reinterpret_cast<const std::uint8_t*>(head), static_cast<std::size_t>(in.gcount()));
}

}  // namespace retro
