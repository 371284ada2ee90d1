// The free space of an output's filesystem, said before a long run fills it. A run stopped by a full disk keeps its
// finished parts (--resume continues it), but retro-index wrote two copies of the embeddings (the parts and
// embeddings.npy) and the index before it removed the parts: a peak of about three times the output it keeps, found
// out hours into the run (a helper's disk-full campaign, session 56). A warning, not a refusal: space can be made while
// the run embeds.
// provides: disk_free_bytes, disk_space_warn
#pragma once
#include <cstdint>
#include <string>

namespace retro {

// Bytes free to this user on the filesystem holding `path` (or its nearest existing folder above); -1 where unknown.
// RETRO_DISK_FREE (a size as RETRO_MEMORY_LIMIT takes it) lowers it, so that the warning can be tested.
std::int64_t disk_free_bytes(const std::string& path);

// Warns where `bytes` (what the run will write into `out` at its peak, `what` saying of what) exceed the free space.
void disk_space_warn(const std::string& out, double bytes, const std::string& what);

}  // namespace retro
