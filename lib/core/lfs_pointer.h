// Git LFS pointer files. A repository cloned without git-lfs (a Hugging Face checkpoint, a dataset) holds, in
// place of each large file, a ~130-byte text naming it: "version https://git-lfs.github.com/spec/v1",
// "oid sha256:...", "size N". Readers of weights, tokenizer models, arrays, indices, images and compressed corpora
// check for one where the file does not parse, so that the user is told to fetch the file rather than that it is
// corrupt ("corrupt .safetensors header: length 2336927755350992246 does not fit the file").
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace retro {

// True when `bytes` start as an LFS pointer file does (the spec's first line).
bool is_lfs_pointer(const std::uint8_t* bytes, std::size_t size);
// Throws UserError naming `path` when `bytes` (the file's first bytes, or all of them) are an LFS pointer.
void refuse_lfs_pointer(const std::string& path, const std::uint8_t* bytes, std::size_t size);
// The same for a file on disk (its first 200 bytes); a file that cannot be read passes (its reader says why).
void refuse_lfs_pointer_file(const std::string& path);

}  // namespace retro
