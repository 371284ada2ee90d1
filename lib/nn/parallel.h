// Threading for the nn ops: retro::parallel_ranges / parallel_for, but run inline when the loop is too small
// to pay for waking a thread team (gradient checks and tiny models call the ops thousands of times; on a
// loaded machine an OpenMP region can cost milliseconds). `work` is the rough number of scalar operations.
#pragma once
#include <cstdint>
#include <functional>

#include "core/threads.h"

namespace retro::nn {

inline constexpr std::int64_t PARALLEL_MIN_WORK = 1 << 16;

inline void ranges(std::int64_t n, std::int64_t work,
                   const std::function<void(std::int64_t, std::int64_t, int)>& fn) {
    if (n <= 0) return;
    if (work < PARALLEL_MIN_WORK || thread_count() == 1) {
        fn(0, n, 0);
        return;
    }
    parallel_ranges(n, fn);
}

inline void for_each(std::int64_t n, std::int64_t work, const std::function<void(std::int64_t)>& fn) {
    if (work < PARALLEL_MIN_WORK || thread_count() == 1) {
        for (std::int64_t i = 0; i < n; i++) fn(i);
        return;
    }
    parallel_for(n, fn);
}

}  // namespace retro::nn
