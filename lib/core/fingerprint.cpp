// Implementation of fingerprint.h over libxxhash (XXH3 64-bit, seed 0).
#include "core/fingerprint.h"

#include <xxhash.h>

#include <cstdio>

#include "core/mapped_file.h"

namespace retro {
namespace {
std::string to_hex(XXH64_hash_t h) {
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
    return buf;
}
}  // namespace

std::string fingerprint_bytes(const void* data, std::size_t n) { return to_hex(XXH3_64bits(data, n)); }

std::string fingerprint_file(const std::string& path) {
    MappedFile f(path);
    return fingerprint_bytes(f.data(), f.size());
}

Fingerprinter::Fingerprinter() : state_(XXH3_createState()) { XXH3_64bits_reset(static_cast<XXH3_state_t*>(state_)); }
Fingerprinter::~Fingerprinter() { XXH3_freeState(static_cast<XXH3_state_t*>(state_)); }
void Fingerprinter::update(const void* data, std::size_t n) { XXH3_64bits_update(static_cast<XXH3_state_t*>(state_), data, n); }
std::string Fingerprinter::hex() const { return to_hex(XXH3_64bits_digest(static_cast<XXH3_state_t*>(state_))); }

}  // namespace retro
