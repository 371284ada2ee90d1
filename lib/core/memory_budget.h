// The memory a job may use, checked before it allocates: an option that sizes memory (IVF lists, PQ
// codes, HNSW M, batch and block sizes, vocabulary size) is refused with one line naming the option,
// what it would need and what the machine has, instead of the kernel's OOM killer ending the run
// half-way with its output folder half-written.
// "Available" is the smaller of /proc/meminfo's MemAvailable and the cgroup's memory.max (less what
// the cgroup already uses) and what a `ulimit -v` leaves (address_space_headroom); RETRO_MEMORY_LIMIT (bytes, or with K/M/G/T: 8G; anything else is refused naming it) lowers it further.
#pragma once
#include <cstdint>
#include <string>

namespace retro {

std::int64_t memory_available_bytes();
// What RLIMIT_AS (`ulimit -v`) and RLIMIT_DATA (`ulimit -d`) leave of the address space, less what each of our
// threads maps beside the tool's data (its stack; the OpenBLAS buffer it maps on its first GEMM, core/blas_core.h: 130
// MiB, which OpenBLAS retries for ever when refused) and two malloc arenas; the largest int64 where unlimited.
// memory_available_bytes takes it into account.
std::int64_t address_space_headroom();
// The smaller of RLIMIT_AS and RLIMIT_DATA in bytes, the largest int64 where neither is set.
std::int64_t address_space_limit();
// The malloc arenas a process under such a limit keeps to (heap_limit_arenas), the main one among them: each other
// one reserves 64 MiB of address space.
constexpr std::int64_t kLimitedArenas = 2;

// A size in bytes as RETRO_MEMORY_LIMIT takes it (8000000000, 8e9, 8G, 512MiB: K/M/G/T powers of 1024); anything
// else a UserError naming `variable` ("'8X' is not a KIND").
std::int64_t byte_size_parse(const std::string& variable, const std::string& value, const std::string& kind);

// "12.3 GiB", "512 MiB", "4 KiB", "17 B"
std::string memory_format_bytes(double bytes);

// UserError naming `option` when `bytes` (what `what` needs) exceeds the available memory.
void memory_require(const std::string& option, double bytes, const std::string& what, const std::string& fix);

}  // namespace retro
