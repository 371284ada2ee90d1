// A host emulator of a CUDA block for the kernels written against kernels/simt.cuh: every thread of a block runs as
// a fiber (tests/host_fiber.h) on this one OS thread, round-robin, each until it reaches a barrier; a warp's 32
// lanes meet at every warp exchange (shfl_xor, mma.m16n8k16), a block's threads at sync_block, and the threads of a named
// barrier (sync_named: released when as many threads as it names wait at it, all naming the same count). An exchange runs on the values
// every lane deposited (double-buffered by the lane's own exchange count, so one barrier each is enough), the mma
// with the PTX fragment layouts written out in kernels/simt.cuh, as does ldmatrix. What it catches: wrong fragment indices, masks and
// partial tiles (against a reference), reads of shared memory nobody wrote (the block's shared memory starts as NaN
// bytes), and divergent barriers (lanes or warps that never meet: reported as a deadlock naming each thread's place).
// Asynchronous copies (copy16_async) land as late (interleaved: at their thread's async_wait_all) or as early (the
// warp-serial schedules: at once) as the GPU allows; a thread that ends with copies never waited for is reported.
// Races between warps of one phase (between two block barriers) show under the warp-serial schedules: each warp runs
// alone to the next barrier, in ascending or descending order (Schedule; a test runs its launches under each), so a
// warp that writes shared memory another warp of the same phase still reads changes the result.
// A cooperative launch (launch_cooperative: every block resident at once, grid_sync a grid-wide barrier) runs each
// phase block after block, ascending or descending (BlockOrder), so a block that reads what another block of the same
// phase writes sees it in one order and not the other (tests/test_nn_decode_program_host.cpp: the fused decode step).
// A block's static shared variables (RETRO_SIMT_STATIC_SHARED) are its own, NaN bytes until written.
// A check the emulator makes inside a thread (a misaligned ldmatrix, a cp.async outside shared memory, lanes at
// different exchanges) throws std::logic_error out of launch(); the block's other threads are unwound first.
// What it does not: timing, races between lanes of one warp (they run in a fixed order), out-of-bounds global reads,
// memory ordering between blocks (one OS thread: a write is seen at once, so a missing fence does not show).
// Define RETRO_SIMT_HOST, include this, then the kernel header (tests/test_flash_mma_host.cpp).
#pragma once

#define RETRO_SIMT_HOST_EMULATOR 1

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "host_fiber.h"

namespace retro::simt::host {

constexpr int kWarp = 32;

enum class FiberState { ready, at_warp, at_block, done, at_named, at_grid };

struct Exchange {   // one warp's deposits for one exchange
    std::uint32_t a[kWarp][4];
    std::uint32_t b[kWarp][2];
    float f[kWarp];
    std::uint64_t w[kWarp];   // ballot, shfl_idx_u32, warp_sum_u64
    const void* p[kWarp];   // ldmatrix: each lane's row address
    int kind[kWarp];   // 1 = shfl_xor, 2 = mma, 3 = shfl_idx, 4 = ldmatrix, 5 = ballot, 6 = shfl_idx_u32,
                       // 7 = warp_sum_u64, 8 = shfl_idx_u64: lanes at one exchange must agree
};

struct PendingCopy {   // one copy16_async not yet waited for
    void* dst;
    const void* src;   // null: zero fill
};

struct Fiber {
    HostFiber fiber;
    FiberState state = FiberState::ready;
    std::uint64_t exchanges = 0;   // this lane's count of warp exchanges (picks the buffer)
    int named_id = 0, named_count = 0;   // at_named: the barrier and the threads it waits for
    std::vector<PendingCopy> pending;
};

struct Block {
    long long bx = 0, by = 0, grid_x = 1;
    int current = -1;
    std::vector<unsigned char> smem;
    std::map<const void*, std::vector<unsigned char>> statics;   // RETRO_SIMT_STATIC_SHARED's variables
    std::vector<Fiber> fibers;
    std::vector<Exchange> exchange;   // two per warp
    const std::function<void()>* kernel = nullptr;
};

inline thread_local Block* g_block = nullptr;

// The order the emulator runs the warps of a block in between barriers: every warp a step at a time (to its next warp
// exchange), or each warp alone to the next block barrier, lowest or highest first.
enum class Schedule { interleaved, warps_ascending, warps_descending };
// the default: interleaved, or RETRO_SIMT_SCHEDULE=ascending|descending (to run every host kernel test warp-serial)
inline Schedule default_schedule() {
    const char* v = std::getenv("RETRO_SIMT_SCHEDULE");
    if (!v || !*v || std::string(v) == "interleaved") return Schedule::interleaved;
    if (std::string(v) == "ascending") return Schedule::warps_ascending;
    if (std::string(v) == "descending") return Schedule::warps_descending;
    throw std::invalid_argument("RETRO_SIMT_SCHEDULE=" + std::string(v) + ": not interleaved, ascending or descending");
}
inline thread_local Schedule g_schedule = default_schedule();
struct ScheduleScope {   // sets the schedule of this thread's launches while it lives
    Schedule saved;
    explicit ScheduleScope(Schedule s) : saved(g_schedule) { g_schedule = s; }
    ~ScheduleScope() { g_schedule = saved; }
};
inline const char* schedule_name(Schedule s) {
    return s == Schedule::interleaved ? "interleaved" : s == Schedule::warps_ascending ? "warps ascending" : "warps descending";
}
constexpr Schedule kSchedules[] = {Schedule::interleaved, Schedule::warps_ascending, Schedule::warps_descending};

inline int current_thread() { return g_block->current; }
inline long long current_block_x() { return g_block->bx; }
inline long long current_block_y() { return g_block->by; }
inline long long current_grid_x() { return g_block->grid_x; }
inline unsigned char* dynamic_smem() { return g_block->smem.data(); }
inline int block_threads() { return static_cast<int>(g_block->fibers.size()); }
// The block's variable of RETRO_SIMT_STATIC_SHARED (Tag: the declaration's own lambda type, so each declaration has
// its own), NaN bytes until written, as dynamic_smem.
template <typename T, typename Tag>
T& block_static(Tag) {
    static const char key = 0;
    std::vector<unsigned char>& bytes = g_block->statics[&key];
    if (bytes.empty()) bytes.assign(sizeof(T), 0xff);
    return *reinterpret_cast<T*>(bytes.data());
}

inline void wait_as(FiberState s) {
    Fiber& f = g_block->fibers[static_cast<std::size_t>(g_block->current)];
    f.state = s;
    f.fiber.yield();
}
inline void sync_block() { wait_as(FiberState::at_block); }
inline void sync_named(int id, int threads) {
    if (id < 1 || id > 15 || threads <= 0 || threads % kWarp)
        throw std::logic_error("simt host: named barrier " + std::to_string(id) + " for " + std::to_string(threads) +
                               " threads (ids 1..15, whole warps)");
    Fiber& f = g_block->fibers[static_cast<std::size_t>(g_block->current)];
    f.named_id = id;
    f.named_count = threads;
    wait_as(FiberState::at_named);
}
inline void sync_warp() { wait_as(FiberState::at_warp); }
// (outside a cooperative launch nothing releases it: launch() reports a deadlock naming the grid barrier)
inline void grid_sync() { wait_as(FiberState::at_grid); }

// cp.async: the copy may land any time until the thread's next async_wait_all. Interleaved, it lands at the wait
// (the latest: a read before the wait sees the old bytes); under a warp-serial schedule at once (the earliest: a
// copy into a tile another warp of the same phase still reads changes what that warp reads). The copy's source,
// global memory the kernel only reads, does not change in between.
inline void copy16_async(void* dst, const void* src, bool valid) {
    // cp.async.cg of 16 bytes: both addresses 16-byte aligned, as on the GPU (a misaligned one faults there); the
    // shared address relative to the block's dynamic shared memory, whose base the GPU aligns at least as much
    const auto off = static_cast<const unsigned char*>(dst) - g_block->smem.data();
    if (off < 0 || static_cast<std::size_t>(off) + 16 > g_block->smem.size())
        throw std::logic_error("simt host: cp.async destination outside the block's shared memory (offset " +
                               std::to_string(off) + " of " + std::to_string(g_block->smem.size()) + " bytes)");
    if (off % 16 || reinterpret_cast<std::uintptr_t>(src) % 16)
        throw std::logic_error("simt host: cp.async address not 16-byte aligned (shared offset " + std::to_string(off) +
                               ", global " + std::to_string(reinterpret_cast<std::uintptr_t>(src) % 16) + " past 16)");
    if (g_schedule == Schedule::interleaved) {
        g_block->fibers[static_cast<std::size_t>(g_block->current)].pending.push_back({dst, valid ? src : nullptr});
    } else if (valid) {
        std::memcpy(dst, src, 16);
    } else {
        std::memset(dst, 0, 16);
    }
}
inline void async_wait_all() {
    auto& pending = g_block->fibers[static_cast<std::size_t>(g_block->current)].pending;
    for (const PendingCopy& c : pending) {
        if (c.src) std::memcpy(c.dst, c.src, 16);
        else std::memset(c.dst, 0, 16);
    }
    pending.clear();
}

// This lane's buffer for its next exchange, its kind recorded.
inline Exchange& deposit_slot(int kind) {
    const int tid = g_block->current;
    Fiber& f = g_block->fibers[static_cast<std::size_t>(tid)];
    Exchange& e = g_block->exchange[static_cast<std::size_t>((tid / kWarp) * 2 + (f.exchanges++ & 1u))];
    e.kind[tid % kWarp] = kind;
    return e;
}
inline void check_kinds(const Exchange& e) {
    for (int l = 1; l < kWarp; ++l)
        if (e.kind[l] != e.kind[0]) throw std::logic_error("simt host: lanes of one warp met at different exchanges");
}

// Every lane deposits v and gets the value of lane src(lane): the shuffles.
template <typename Src>
float shuffle(float v, int kind, Src src) {
    const int lane = g_block->current % kWarp;
    Exchange& e = deposit_slot(kind);
    e.f[lane] = v;
    sync_warp();
    check_kinds(e);
    return e.f[src(lane) & (kWarp - 1)];
}
inline float shfl_xor(float v, int mask) { return shuffle(v, 1, [mask](int lane) { return lane ^ mask; }); }
inline float shfl_idx(float v, int src_lane) { return shuffle(v, 3, [src_lane](int) { return src_lane; }); }

// The integer exchanges (kernels/simt.cuh: __ballot_sync, __shfl_sync and a butterfly of __shfl_xor_sync on the GPU):
// every lane deposits, all meet, each reads the warp's result.
template <typename Result>
std::uint64_t integer_exchange(std::uint64_t v, int kind, Result result) {
    const int lane = g_block->current % kWarp;
    Exchange& e = deposit_slot(kind);
    e.w[lane] = v;
    sync_warp();
    check_kinds(e);
    return result(e, lane);
}
inline std::uint32_t ballot(bool p) {
    return static_cast<std::uint32_t>(integer_exchange(p ? 1 : 0, 5, [](const Exchange& e, int) {
        std::uint32_t bits = 0;
        for (int l = 0; l < kWarp; ++l) bits |= static_cast<std::uint32_t>(e.w[l] & 1u) << l;
        return std::uint64_t{bits};
    }));
}
inline std::uint32_t shfl_idx_u32(std::uint32_t v, int src_lane) {
    return static_cast<std::uint32_t>(
        integer_exchange(v, 6, [src_lane](const Exchange& e, int) { return e.w[src_lane & (kWarp - 1)]; }));
}
inline std::uint64_t shfl_idx_u64(std::uint64_t v, int src_lane) {
    return integer_exchange(v, 8, [src_lane](const Exchange& e, int) { return e.w[src_lane & (kWarp - 1)]; });
}
inline std::uint64_t warp_sum_u64(std::uint64_t v) {
    return integer_exchange(v, 7, [](const Exchange& e, int) {
        std::uint64_t sum = 0;
        for (int l = 0; l < kWarp; ++l) sum += e.w[l];   // integers: the butterfly's order gives the same sum
        return sum;
    });
}

// d += A B with A, B spread over the warp's lanes as kernels/simt.cuh's comment lays them out.
inline void mma_bf16_16816(float (&d)[4], const std::uint32_t (&a)[4], const std::uint32_t (&b)[2],
                           float (*value)(std::uint16_t)) {
    const int lane = g_block->current % kWarp;
    Exchange& e = deposit_slot(2);
    for (int r = 0; r < 4; ++r) e.a[lane][r] = a[r];
    for (int r = 0; r < 2; ++r) e.b[lane][r] = b[r];
    sync_warp();
    check_kinds(e);
    auto half = [value](std::uint32_t reg, int k) {
        return value(static_cast<std::uint16_t>(k % 2 ? reg >> 16 : reg & 0xffffu));
    };
    const int g = lane / 4, t = lane % 4;
    for (int c = 0; c < 4; ++c) {
        const int row = g + (c >= 2 ? 8 : 0), col = 2 * t + (c & 1);
        float acc = d[c];
        for (int k = 0; k < 16; ++k) {
            const float av = half(e.a[(row % 8) * 4 + (k % 8) / 2][(row >= 8 ? 1 : 0) + (k >= 8 ? 2 : 0)], k);
            const float bv = half(e.b[col * 4 + (k % 8) / 2][k >= 8 ? 1 : 0], k);
            acc += av * bv;
        }
        d[c] = acc;
    }
}

// ldmatrix.x4 (.trans): every lane deposits its row address and gets its two elements of each of the four matrices,
// as kernels/simt.cuh's comment lays them out. A row address off a 16-byte boundary is an error, as on the GPU.
inline void ldmatrix_x4(std::uint32_t (&r)[4], const void* row_addr, bool trans) {
    const int lane = g_block->current % kWarp;
    if (reinterpret_cast<std::uintptr_t>(row_addr) % 16)
        throw std::logic_error("simt host: ldmatrix row address not 16-byte aligned (lane " + std::to_string(lane) + ")");
    Exchange& e = deposit_slot(4);
    e.p[lane] = row_addr;
    sync_warp();
    check_kinds(e);
    const int g = lane / 4, t = lane % 4;
    auto row = [&](int matrix, int i) { return static_cast<const std::uint16_t*>(e.p[matrix * 8 + i]); };
    for (int m = 0; m < 4; ++m) {
        const std::uint16_t lo = trans ? row(m, 2 * t)[g] : row(m, g)[2 * t];
        const std::uint16_t hi = trans ? row(m, 2 * t + 1)[g] : row(m, g)[2 * t + 1];
        r[m] = static_cast<std::uint32_t>(lo) | (static_cast<std::uint32_t>(hi) << 16);
    }
}

inline std::string deadlock_report(const Block& blk) {
    std::string s = "simt host: deadlock in block (" + std::to_string(blk.bx) + ", " + std::to_string(blk.by) + "):";
    const char* names[] = {"ready", "at a warp exchange", "at the block barrier", "done", "at a named barrier",
                           "at the grid barrier"};
    for (std::size_t w = 0; w * kWarp < blk.fibers.size(); ++w) {
        s += " warp " + std::to_string(w) + " [";
        for (int l = 0; l < kWarp; ++l) s += std::to_string(static_cast<int>(blk.fibers[w * kWarp + l].state));
        s += "]";
    }
    s += " (";
    for (int k = 0; k < 6; ++k) s += std::string(k ? ", " : "") + names[k] + "=" + std::to_string(k);
    s += ")";
    return s;
}

// Thread i of blk at the start of the block's kernel.
inline void init_fiber(Block& blk, std::size_t i, std::size_t stack_bytes) {
    blk.fibers[i].fiber.start(
        [&blk, i] {
            (*blk.kernel)();
            blk.fibers[i].state = FiberState::done;
        },
        stack_bytes);
}

// Runs each ready fiber until it waits or ends (under a warp-serial schedule only those of the first warp, in the
// schedule's order, that has one); whether any ran.
[[gnu::noinline]] inline bool run_ready(Block& blk) {
    bool ran = false;
    std::size_t begin = 0, end = blk.fibers.size();
    if (g_schedule != Schedule::interleaved) {
        const std::size_t warps = blk.fibers.size() / kWarp;
        for (std::size_t k = 0; k < warps; ++k) {
            const std::size_t w = g_schedule == Schedule::warps_ascending ? k : warps - 1 - k;
            bool any = false;
            for (std::size_t l = 0; l < kWarp; ++l) any = any || blk.fibers[w * kWarp + l].state == FiberState::ready;
            if (any) {
                begin = w * kWarp;
                end = begin + kWarp;
                break;
            }
        }
    }
    for (std::size_t i = begin; i < end; ++i)
        if (blk.fibers[i].state == FiberState::ready) {
            blk.current = static_cast<int>(i);
            blk.fibers[i].fiber.resume();
            ran = true;
        }
    return ran;
}

// Releases every named barrier at which as many threads wait as it names (throws where they name different counts).
inline bool release_named(Block& blk) {
    int waiting[16] = {}, count[16] = {};
    for (const Fiber& f : blk.fibers) {
        if (f.state != FiberState::at_named) continue;
        if (waiting[f.named_id]++ && count[f.named_id] != f.named_count)
            throw std::logic_error("simt host: threads at named barrier " + std::to_string(f.named_id) +
                                   " name different thread counts");
        count[f.named_id] = f.named_count;
    }
    bool released = false;
    for (int id = 1; id < 16; ++id) {
        if (!waiting[id] || waiting[id] < count[id]) continue;
        if (waiting[id] > count[id])
            throw std::logic_error("simt host: " + std::to_string(waiting[id]) + " threads at named barrier " +
                                   std::to_string(id) + ", which names " + std::to_string(count[id]));
        for (Fiber& f : blk.fibers)
            if (f.state == FiberState::at_named && f.named_id == id) f.state = FiberState::ready;
        released = true;
    }
    return released;
}

// Releases every warp whose lanes all wait at an exchange and every named barrier that is full, else the block's
// barrier when every live thread waits there; whether it released any. live: threads not done.
inline bool release_barriers(Block& blk, int& live) {
    bool released = release_named(blk);
    int at_block = 0;
    live = 0;
    for (std::size_t w = 0; w < blk.fibers.size() / kWarp; ++w) {
        int at_warp = 0;
        for (std::size_t l = 0; l < kWarp; ++l) {
            const FiberState s = blk.fibers[w * kWarp + l].state;
            at_warp += s == FiberState::at_warp;
            at_block += s == FiberState::at_block;
            live += s != FiberState::done;
        }
        if (at_warp == kWarp) {
            for (std::size_t l = 0; l < kWarp; ++l) blk.fibers[w * kWarp + l].state = FiberState::ready;
            released = true;
        }
    }
    if (!released && live > 0 && at_block == live) {
        for (auto& f : blk.fibers)
            if (f.state == FiberState::at_block) f.state = FiberState::ready;
        released = true;
    }
    return released;
}

// A block of the grid ready to run kernel(): its fibers at their start, its shared memory NaN bytes.
inline void init_block(Block& blk, long long bx, long long by, long long grid_x, int threads, std::size_t smem_bytes,
                       const std::function<void()>& kernel, std::size_t stack_bytes) {
    blk.bx = bx;
    blk.by = by;
    blk.grid_x = grid_x;
    blk.kernel = &kernel;
    blk.smem.assign(smem_bytes, 0xff);   // NaN in bf16 and fp32: a read of an unwritten byte shows
    blk.fibers.resize(static_cast<std::size_t>(threads));
    blk.exchange.resize(static_cast<std::size_t>(threads / kWarp) * 2);
    for (std::size_t i = 0; i < blk.fibers.size(); ++i) init_fiber(blk, i, stack_bytes);
}

// Runs the block's threads until none can go on (each done, or waiting at a barrier the block cannot release by
// itself: the grid's, or a deadlock); returns how many are not done.
inline int run_until_stalled(Block& blk) {
    struct Current {   // g_block is blk while it runs, also where a kernel's exception leaves
        Block* outer;
        explicit Current(Block* b) : outer(g_block) { g_block = b; }
        ~Current() { g_block = outer; }
    } current(&blk);
    int live = 0;
    for (;;) {
        const bool ran = run_ready(blk);
        const bool released = release_barriers(blk, live);
        if (live == 0 || (!ran && !released)) break;
    }
    return live;
}

inline void check_copies_waited(const Block& blk) {
    for (std::size_t i = 0; i < blk.fibers.size(); ++i)
        if (!blk.fibers[i].pending.empty())
            throw std::logic_error("simt host: thread " + std::to_string(i) + " ended with " +
                                   std::to_string(blk.fibers[i].pending.size()) + " asynchronous copies never waited for");
}

// Runs one block of the grid to its end; throws std::logic_error on a deadlock.
inline void run_block(long long bx, long long by, long long grid_x, int threads, std::size_t smem_bytes,
                      const std::function<void()>& kernel, std::size_t stack_bytes) {
    Block blk;
    init_block(blk, bx, by, grid_x, threads, smem_bytes, kernel, stack_bytes);
    if (run_until_stalled(blk) > 0) throw std::logic_error(deadlock_report(blk));
    check_copies_waited(blk);
}

// Runs kernel() for every block of the grid (grid_x x grid_y) with `threads` threads (a multiple of 32) and
// smem_bytes of dynamic shared memory; throws std::logic_error on a deadlock.
inline void launch(long long grid_x, long long grid_y, int threads, std::size_t smem_bytes,
                   const std::function<void()>& kernel, std::size_t stack_bytes = 128 * 1024) {
    if (threads <= 0 || threads % kWarp) throw std::logic_error("simt host: threads must be a multiple of 32");
    for (long long by = 0; by < grid_y; ++by)
        for (long long bx = 0; bx < grid_x; ++bx) run_block(bx, by, grid_x, threads, smem_bytes, kernel, stack_bytes);
}

// The order in which a cooperative launch runs its blocks between two grid barriers: each block alone to the next
// grid barrier (or its end), lowest or highest first, so a block that reads what another block writes in the same
// phase sees it in one order and not in the other.
enum class BlockOrder { ascending, descending };

// A cooperative launch (cudaLaunchCooperativeKernel): grid_x blocks all resident at once, so kernel() may call
// grid_sync(). Each phase (the work between two grid barriers) runs block after block in `order`, each block's warps
// under the thread's Schedule; a grid barrier opens when every thread of the grid waits at it. Throws
// std::logic_error on a deadlock, or where some threads end while others wait at the grid barrier (a hang on the GPU).
inline void launch_cooperative(long long grid_x, int threads, std::size_t smem_bytes, const std::function<void()>& kernel,
                               BlockOrder order = BlockOrder::ascending, std::size_t stack_bytes = 128 * 1024) {
    if (threads <= 0 || threads % kWarp) throw std::logic_error("simt host: threads must be a multiple of 32");
    std::vector<std::unique_ptr<Block>> blocks;
    for (long long bx = 0; bx < grid_x; ++bx) {
        blocks.push_back(std::make_unique<Block>());
        init_block(*blocks.back(), bx, 0, grid_x, threads, smem_bytes, kernel, stack_bytes);
    }
    for (;;) {
        for (long long k = 0; k < grid_x; ++k)
            run_until_stalled(*blocks[static_cast<std::size_t>(order == BlockOrder::ascending ? k : grid_x - 1 - k)]);
        std::size_t at_grid = 0, done = 0;
        for (const auto& blk : blocks)
            for (const Fiber& f : blk->fibers) {
                if (f.state == FiberState::at_grid) ++at_grid;
                else if (f.state == FiberState::done) ++done;
                else throw std::logic_error(deadlock_report(*blk));
            }
        if (at_grid == 0) break;
        if (done > 0)
            throw std::logic_error("simt host: " + std::to_string(done) + " threads ended while " +
                                   std::to_string(at_grid) + " wait at the grid barrier");
        for (auto& blk : blocks)
            for (Fiber& f : blk->fibers) f.state = FiberState::ready;
    }
    for (const auto& blk : blocks) check_copies_waited(*blk);
}

}  // namespace retro::simt::host
