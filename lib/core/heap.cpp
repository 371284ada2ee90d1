// Implementation of heap.h over glibc's mallopt.
#include "core/heap.h"

#include <cstdlib>   // defines __GLIBC__ on glibc
#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace retro {

void heap_keep_freed_memory() {
#if defined(__GLIBC__)
    mallopt(M_MMAP_MAX, 0);                 // every block from the heap, none mapped on its own
    mallopt(M_TRIM_THRESHOLD, 1 << 30);     // give freed memory at the top back only above 1 GiB
#endif
}

void heap_limit_arenas(int arenas) {
#if defined(__GLIBC__)
    mallopt(M_ARENA_MAX, arenas);
#else
    (void)arenas;
#endif
}

}  // namespace retro
