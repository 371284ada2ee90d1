// Implementation of threads.h over OpenMP.
#include "core/threads.h"

#include <omp.h>

#include <algorithm>
#include <exception>
#include <mutex>
#include <thread>

namespace retro {
namespace {
int g_threads = 0;  // 0 = all cores
}

int hardware_threads() { return std::max(1, static_cast<int>(std::thread::hardware_concurrency())); }
int thread_count() { return g_threads > 0 ? g_threads : hardware_threads(); }
void set_thread_count(int n) {
    g_threads = n < 0 ? 0 : n;
    omp_set_num_threads(thread_count());
}

void parallel_for(std::int64_t n, const std::function<void(std::int64_t)>& fn) {
    std::exception_ptr first;
    std::mutex mutex;
#pragma omp parallel for schedule(static) num_threads(thread_count())
    for (std::int64_t i = 0; i < n; ++i) {
        try {
            fn(i);
        } catch (...) {
            std::lock_guard<std::mutex> lock(mutex);
            if (!first) first = std::current_exception();
        }
    }
    if (first) std::rethrow_exception(first);
}

void parallel_ranges(std::int64_t n,
                     const std::function<void(std::int64_t, std::int64_t, int)>& fn) {
    int threads = static_cast<int>(std::min<std::int64_t>(thread_count(), std::max<std::int64_t>(n, 1)));
    std::exception_ptr first;
    std::mutex mutex;
#pragma omp parallel num_threads(threads)
    {
        int t = omp_get_thread_num();
        int nt = omp_get_num_threads();
        std::int64_t begin = n * t / nt, end = n * (t + 1) / nt;
        try {
            if (begin < end) fn(begin, end, t);
        } catch (...) {
            std::lock_guard<std::mutex> lock(mutex);
            if (!first) first = std::current_exception();
        }
    }
    if (first) std::rethrow_exception(first);
}

}  // namespace retro
