// Implementation of fingerprint.h over libxxhash (XXH3 64-bit, seed 0).
#include "core/fingerprint.h"

#include <xxhash.h>

#include <cstdio>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/progress.h"

namespace retro {
namespace {
std::string to_hex(XXH64_hash_t h) {
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
    return buf;
}
}  // namespace

std::string fingerprint_bytes(const void* data, std::size_t n) { return to_hex(XXH3_64bits(data, n)); }

// Streams the file through a fixed buffer with read(2): mapping it would put every page of a
// large output in the resident set.
std::string fingerprint_file(const std::string& path, Progress* progress) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) user_error_in(path, std::string("cannot open: ") + std::strerror(errno));
    Fingerprinter fp;
    std::vector<char> buf(1 << 20);
    while (true) {
        ssize_t n = ::read(fd, buf.data(), buf.size());
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            ::close(fd);
            user_error_in(path, std::string("read error: ") + std::strerror(errno));
        }
        if (n == 0) break;
        fp.update(buf.data(), static_cast<std::size_t>(n));
        if (progress) progress->add(n);
    }
    ::close(fd);
    return fp.hex();
}

Fingerprinter::Fingerprinter() : state_(XXH3_createState()) { XXH3_64bits_reset(static_cast<XXH3_state_t*>(state_)); }
Fingerprinter::~Fingerprinter() { XXH3_freeState(static_cast<XXH3_state_t*>(state_)); }
void Fingerprinter::update(const void* data, std::size_t n) { XXH3_64bits_update(static_cast<XXH3_state_t*>(state_), data, n); }
std::string Fingerprinter::hex() const { return to_hex(XXH3_64bits_digest(static_cast<XXH3_state_t*>(state_))); }

}  // namespace retro
