// Threading: OpenMP is the one choice, used everywhere (FAISS already brings libgomp).
// thread_count() is what parallel regions use; set_thread_count(0) means all cores.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>

namespace retro {

int thread_count();
void set_thread_count(int n);   // 0 = all cores
int hardware_threads();

// Calls fn(i) for i in [0, n) on thread_count() threads, static schedule. Exceptions thrown by
// fn are caught and the first one is rethrown on the calling thread after the loop.
void parallel_for(std::int64_t n, const std::function<void(std::int64_t)>& fn);

// Like parallel_for but gives each thread a contiguous range [begin, end) and its index.
void parallel_ranges(std::int64_t n,
                     const std::function<void(std::int64_t begin, std::int64_t end, int thread)>& fn);

}  // namespace retro
