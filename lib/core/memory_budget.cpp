// Implementation of memory_budget.h.
#include "core/memory_budget.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <utility>

#include "core/blas_core.h"
#include "core/error.h"
#include "core/threads.h"

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

// RETRO_MEMORY_LIMIT as bytes: a number (8000000000, 8e9) with an optional unit, K/M/G/T (powers of 1024, as
// `ulimit` and `free` take them; KiB/MiB/GiB/TiB and KB/MB/GB/TB alike). "8G" was read as 8 bytes and "abc" ignored,
// both without a word: anything else is refused naming the variable.
}  // namespace

std::int64_t byte_size_parse(const std::string& variable, const std::string& v, const std::string& kind) {
    char* end = nullptr;
    const double number = std::strtod(v.c_str(), &end);
    std::string unit(end);
    for (auto& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    double scale = 0;
    if (unit.empty() || unit == "B") scale = 1;
    static const char* const kPrefixes = "KMGT";
    for (int p = 0; p < 4; ++p) {   // K, KB, KIB; M, MB, MIB; ...
        const std::string k(1, kPrefixes[p]);
        if (unit == k || unit == k + "B" || unit == k + "IB") scale = std::ldexp(1.0, 10 * (p + 1));
    }
    if (end == v.c_str() || scale == 0 || !(number > 0) || !std::isfinite(number) || number * scale > 9.2e18)
        user_error_in(variable, "'" + v + "' is not a " + kind,
                      "give bytes, or a number with K, M, G or T (e.g. 8G), or unset it");
    return static_cast<std::int64_t>(number * scale);
}

namespace {
std::int64_t memory_limit_from_env(const char* env) { return byte_size_parse("RETRO_MEMORY_LIMIT", env, "memory size"); }
}  // namespace

namespace {
// /proc/self/statm's pages: the whole address space (RLIMIT_AS's measure) and data + stack (RLIMIT_DATA's, roughly).
std::pair<std::int64_t, std::int64_t> address_space_used() {
    std::ifstream statm("/proc/self/statm");
    std::int64_t size = 0, resident = 0, shared = 0, text = 0, lib = 0, data = 0;
    statm >> size >> resident >> shared >> text >> lib >> data;
    const std::int64_t page = ::sysconf(_SC_PAGESIZE);
    return {size * page, data * page};
}

std::int64_t memory_available_given(std::int64_t headroom) {
    std::int64_t avail = std::min(meminfo_available(), headroom);
    const std::int64_t limit = read_number("/sys/fs/cgroup/memory.max");   // cgroup v2
    if (limit > 0) {
        const std::int64_t used = std::max<std::int64_t>(0, read_number("/sys/fs/cgroup/memory.current"));
        avail = std::min(avail, std::max<std::int64_t>(0, limit - used));
    }
    if (const char* env = std::getenv("RETRO_MEMORY_LIMIT"); env && *env) avail = std::min(avail, memory_limit_from_env(env));
    return avail;
}

// A resource limit's soft value in bytes, the largest int64 where it is unlimited.
std::int64_t rlimit_bytes(int resource) {
    rlimit rl{};
    if (::getrlimit(resource, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY ||
        rl.rlim_cur >= static_cast<rlim_t>(std::numeric_limits<std::int64_t>::max()))
        return std::numeric_limits<std::int64_t>::max();
    return static_cast<std::int64_t>(rl.rlim_cur);
}
}  // namespace

std::int64_t address_space_limit() {   // (RLIMIT_DATA counts private mappings since Linux 4.7)
    return std::min(rlimit_bytes(RLIMIT_AS), rlimit_bytes(RLIMIT_DATA));
}

std::int64_t address_space_headroom() {
    constexpr std::int64_t kUnlimited = std::numeric_limits<std::int64_t>::max();
    const std::int64_t as = rlimit_bytes(RLIMIT_AS), data = rlimit_bytes(RLIMIT_DATA);
    if (as == kUnlimited && data == kUnlimited) return kUnlimited;
    // OpenBLAS maps a buffer (kBlasThreadBufferBytes) for each thread that runs a GEMM, on its first one, and retries
    // a refused mmap for ever: under a `ulimit -v` too small for them every tool spun at 100 % CPU. Its own threads map
    // theirs as they start (reexec_for_address_limit sized their number); each of ours maps one on its first GEMM, and
    // has a stack (RLIMIT_STACK, 8 MiB by default); a malloc arena besides the main one reserves 64 MiB
    // (heap_limit_arenas keeps them to two in all under a limit)
    const std::int64_t stack_limit = rlimit_bytes(RLIMIT_STACK);
    const std::int64_t stack_bytes = stack_limit == kUnlimited ? std::int64_t(8) << 20 : stack_limit;
    const std::int64_t per_thread = kBlasThreadBufferBytes + stack_bytes;
    const std::int64_t reserve = per_thread * thread_count() + (kLimitedArenas - 1) * (std::int64_t(64) << 20);   // (the
    // main arena is the heap's, counted as it grows)
    const auto [size, data_used] = address_space_used();
    std::int64_t headroom = kUnlimited;
    if (as != kUnlimited) headroom = std::min(headroom, as - size - reserve);
    if (data != kUnlimited) headroom = std::min(headroom, data - data_used - reserve);
    return std::max<std::int64_t>(0, headroom);
}

std::int64_t memory_available_bytes() { return memory_available_given(address_space_headroom()); }

std::string memory_format_bytes(double bytes) {
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    int u = 0;
    while (bytes >= 1024 && u < 6) bytes /= 1024, ++u;
    char buf[64];
    std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", bytes, units[u]);
    return buf;
}

void memory_require(const std::string& option, double bytes, const std::string& what, const std::string& fix) {
    const std::int64_t headroom = address_space_headroom();   // (once: the message names what limited it)
    const std::int64_t avail = memory_available_given(headroom);
    if (bytes <= static_cast<double>(avail)) return;
    const char* env = std::getenv("RETRO_MEMORY_LIMIT");   // (the cap named where it is what refuses)
    const bool capped = env && *env && memory_limit_from_env(env) == avail;
    const bool ulimit = !capped && headroom == avail;
    user_error_in(option, what + " needs about " + memory_format_bytes(bytes) + ", more than the " +
                              memory_format_bytes(static_cast<double>(avail)) + " of memory available" +
                              (capped ? " (RETRO_MEMORY_LIMIT)"
                               : ulimit ? " (what the address-space limit, ulimit -v or -d, leaves beside each thread's "
                                          "stack and OpenBLAS buffer of 130 MiB)"
                                        : ""),
                  ulimit ? fix + "; or raise the ulimit, or use fewer --threads" : fix);
}

}  // namespace retro
