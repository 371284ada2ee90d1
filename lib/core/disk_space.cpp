// Implementation of disk_space.h.
#include "core/disk_space.h"

#include <sys/statvfs.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "core/log.h"
#include "core/memory_budget.h"
#include "core/output_folder.h"

namespace fs = std::filesystem;

namespace retro {

std::int64_t disk_free_bytes(const std::string& path) {
    const fs::path p = path_nearest_existing(path);
    struct statvfs st {};
    std::int64_t free = -1;
    if (!p.empty() && ::statvfs(p.c_str(), &st) == 0)
        free = static_cast<std::int64_t>(st.f_bavail) * static_cast<std::int64_t>(st.f_frsize);
    if (const char* env = std::getenv("RETRO_DISK_FREE"); env && *env) {
        const std::int64_t cap = byte_size_parse("RETRO_DISK_FREE", env, "disk size");
        free = free < 0 ? cap : std::min(free, cap);
    }
    return free;
}

void disk_space_warn(const std::string& out, double bytes, const std::string& what) {
    const std::int64_t free = disk_free_bytes(out);
    if (free < 0 || bytes <= static_cast<double>(free)) return;
    log_warn(out + ": this run writes about " + memory_format_bytes(bytes) + " at its peak (" + what + "), and its disk has " +
             memory_format_bytes(static_cast<double>(free)) + " free: a full disk stops it (--resume then continues it once "
             "there is room)");
}

}  // namespace retro
