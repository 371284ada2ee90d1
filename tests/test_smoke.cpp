// Smoke checks of the test frame itself: threads and the skip path.
#include "test_util.h"

#include <atomic>

#include "core/cuda_device.h"
#include "core/threads.h"

TEST_CASE("parallel_for visits every index once") {
    std::vector<std::atomic<int>> seen(1000);
    retro::parallel_for(1000, [&](std::int64_t i) { seen[i]++; });
    for (auto& s : seen) CHECK(s.load() == 1);
}

TEST_CASE("parallel_for rethrows a worker's exception") {
    CHECK_THROWS_AS(retro::parallel_for(10, [](std::int64_t i) { if (i == 7) throw std::runtime_error("x"); }),
                    std::runtime_error);
}

TEST_CASE("cuda probe answers without a device") {
    if (retro::cuda_device_count() == 0) RETRO_SKIP("no CUDA device");
    CHECK(!retro::cuda_device_name().empty());
}
