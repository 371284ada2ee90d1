// heap_keep_freed_memory(): makes glibc malloc keep freed memory for reuse (no mmap for large blocks, no
// trimming of the heap top). A training loop frees and reallocates the same large activation and gradient
// buffers every step; by default each block over the mmap threshold (at most 32 MiB) is a fresh mapping,
// so every step paid page faults and the kernel's page clearing again (~8% of a demo-config step). The
// process's peak memory is unchanged; it just is not handed back between steps. No-op off glibc.
#pragma once

namespace retro {

void heap_keep_freed_memory();
// At most `arenas` malloc arenas (each reserves 64 MiB of address space, and glibc makes up to 8 a core): called under
// an address-space limit (`ulimit -v`), where those reservations counted against it. No-op off glibc.
void heap_limit_arenas(int arenas);

}  // namespace retro
