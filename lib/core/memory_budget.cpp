// Implementation of memory_budget.h.
#include "core/memory_budget.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>

#include "core/error.h"

namespace retro {
namespace {

std::int64_t meminfo_available() {
    std::ifstream in("/proc/meminfo");
    std::string key;
    std::int64_t kb = 0;
    std::string unit;
    while (in >> key >> kb >> unit)
        if (key == "MemAvailable:") return kb * 1024;
    return std::numeric_limits<std::int64_t>::max();
}

std::int64_t read_number(const char* path) {
    std::ifstream in(path);
    std::string s;
    if (!(in >> s) || s == "max") return -1;
    return std::strtoll(s.c_str(), nullptr, 10);
}

}  // namespace

std::int64_t memory_available_bytes() {
    std::int64_t avail = meminfo_available();
    const std::int64_t limit = read_number("/sys/fs/cgroup/memory.max");   // cgroup v2
    if (limit > 0) {
        const std::int64_t used = std::max<std::int64_t>(0, read_number("/sys/fs/cgroup/memory.current"));
        avail = std::min(avail, std::max<std::int64_t>(0, limit - used));
    }
    if (const char* env = std::getenv("RETRO_MEMORY_LIMIT")) {
        const std::int64_t cap = std::strtoll(env, nullptr, 10);
        if (cap > 0) avail = std::min(avail, cap);
    }
    return avail;
}

std::string memory_format_bytes(double bytes) {
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    int u = 0;
    while (bytes >= 1024 && u < 6) bytes /= 1024, ++u;
    char buf[64];
    std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", bytes, units[u]);
    return buf;
}

void memory_require(const std::string& option, double bytes, const std::string& what, const std::string& fix) {
    const std::int64_t avail = memory_available_bytes();
    if (bytes <= static_cast<double>(avail)) return;
    user_error_in(option, what + " needs about " + memory_format_bytes(bytes) + ", more than the " +
                              memory_format_bytes(static_cast<double>(avail)) + " of memory available",
                  fix);
}

}  // namespace retro
