// Tests of the host emulator's fibers (tests/host_fiber.h): switches keep each fiber's own frames, an exception
// leaves the resume() that ran it, and closing a waiting fiber unwinds it; in the block emulator (tests/simt_host.h)
// a kernel's failed check leaves launch() and a deadlock unwinds every waiting thread.
#define RETRO_SIMT_HOST 1
#include "simt_host.h"

#include "../kernels/simt.cuh"

#include <doctest/doctest.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using retro::simt::host::HostFiber;

struct CountOnExit {   // counts its destructor: which frames unwound
    int* n;
    ~CountOnExit() { ++*n; }
};

}  // namespace

TEST_CASE("host fiber: fibers yield and resume in turn, each keeping its own locals") {
    std::vector<std::string> trace;
    HostFiber a, b;
    a.start([&] {
        int local = 1;
        for (int k = 0; k < 3; ++k) {
            trace.push_back("a" + std::to_string(local));
            local *= 10;
            a.yield();
        }
    }, 64 * 1024);
    b.start([&] {
        std::string local = "b";
        for (int k = 0; k < 2; ++k) {
            local += "+";
            trace.push_back(local);
            b.yield();
        }
    }, 64 * 1024);
    CHECK(trace.empty());   // nothing runs before the first resume
    while (!a.ended() || !b.ended()) {
        if (!a.ended()) a.resume();
        if (!b.ended()) b.resume();
    }
    CHECK(trace == std::vector<std::string>{"a1", "b+", "a10", "b++", "a100"});
}

TEST_CASE("host fiber: an exception thrown in the fiber leaves the resume() that ran it, and the fiber has ended") {
    int unwound = 0;
    HostFiber f;
    f.start([&] {
        CountOnExit guard{&unwound};
        f.yield();
        throw std::logic_error("the fiber's own error");
    }, 64 * 1024);
    f.resume();
    CHECK_FALSE(f.ended());
    CHECK(unwound == 0);
    CHECK_THROWS_WITH_AS(f.resume(), "the fiber's own error", std::logic_error);
    CHECK(f.ended());
    CHECK(unwound == 1);
}

TEST_CASE("host fiber: closing a waiting fiber unwinds its frames once, and one never resumed runs nothing") {
    int unwound = 0, started = 0, after_yield = 0;
    {
        HostFiber waiting, fresh;
        waiting.start([&] {
            CountOnExit outer{&unwound};
            ++started;
            [&] {
                CountOnExit inner{&unwound};
                waiting.yield();
                ++after_yield;
            }();
        }, 64 * 1024);
        fresh.start([&] { ++started; }, 64 * 1024);
        waiting.resume();
        CHECK(started == 1);
        CHECK(unwound == 0);
    }   // both destroyed here: waiting is closed, fresh never runs
    CHECK(started == 1);
    CHECK(after_yield == 0);
    CHECK(unwound == 2);
}

TEST_CASE("host emulator fibers: a kernel's failed check leaves launch(), and a deadlock unwinds every waiting thread") {
    namespace simt = retro::simt;
    // a misaligned ldmatrix row: the emulator's check throws in thread 63 after every thread has started (the block
    // barrier), under any schedule some of the others waiting at their exchange or the barrier
    alignas(16) std::uint16_t tile[8 * 32 + 8] = {};
    int unwound = 0;
    CHECK_THROWS_WITH_AS(simt::host::launch(1, 1, 64, 0, [&] {
        CountOnExit guard{&unwound};
        simt::sync_block();
        std::uint32_t r[4];
        const int lane = simt::thread_x() % 32;
        simt::ldmatrix_x4<false>(r, tile + 8 * lane + (simt::thread_x() == 63 ? 1 : 0));
    }), doctest::Contains("ldmatrix row address not 16-byte aligned"), std::logic_error);
    CHECK(unwound == 64);   // the thread that threw, those that ended, and those still waiting (closed)
    // a divergent barrier: a deadlock reported, each of the 64 waiting threads unwound
    unwound = 0;
    CHECK_THROWS_WITH_AS(simt::host::launch(1, 1, 64, 0, [&] {
        CountOnExit guard{&unwound};
        if (simt::thread_x() % 32 < 16) simt::sync_warp();
        else simt::sync_block();
    }), doctest::Contains("deadlock"), std::logic_error);
    CHECK(unwound == 64);
    // and the emulator runs the next launch as usual
    std::vector<int> seen(64, -1);
    simt::host::launch(1, 1, 64, 0, [&] {
        simt::sync_block();
        seen[static_cast<std::size_t>(simt::thread_x())] = simt::thread_x();
    });
    for (int t = 0; t < 64; ++t) CHECK(seen[static_cast<std::size_t>(t)] == t);
}
