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
// What RLIMIT_AS (`ulimit -v`) leaves of the address space, less the OpenBLAS buffer each of our threads maps on its
// first GEMM (core/blas_core.h: 130 MiB; OpenBLAS retries a refused one for ever); the largest int64 where unlimited.
// memory_available_bytes takes it into account.
std::int64_t address_space_headroom();

// A size in bytes as RETRO_MEMORY_LIMIT takes it (8000000000, 8e9, 8G, 512MiB: K/M/G/T powers of 1024); anything
// else a UserError naming `variable` ("'8X' is not a KIND").
std::int64_t byte_size_parse(const std::string& variable, const std::string& value, const std::string& kind);

// "12.3 GiB", "512 MiB", "4 KiB", "17 B"
std::string memory_format_bytes(double bytes);

// UserError naming `option` when `bytes` (what `what` needs) exceeds the available memory.
void memory_require(const std::string& option, double bytes, const std::string& what, const std::string& fix);

}  // namespace retro
