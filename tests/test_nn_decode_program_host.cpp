// The fused decode step's device code (kernels/nn_decode_program.cuh: one cooperative kernel a token, issue 21) on the
// host, through the block emulator's cooperative launch (tests/simt_host.h: every block of the grid resident, grid
// barriers, each phase run block after block in ascending or descending order under every warp schedule). A backend
// that is the host backend but for its fused steps — recorded by BackendDecoder as on the GPU, run by the emulator —
// decodes two configs with retrieval, one and two sequences; each fused step must
//   - leave every byte of backend memory (activations, KV caches, attention's partials and counters) as the same ops
//     launched one after another leave it (the GPU test "the fused decode step gives the launched ops' bits" holds the
//     real kernel to the same): a missing grid barrier, a phase that reads what another block of it writes, or a
//     grid-stride loop that maps work to threads by the grid's size shows here under one block order or the other;
//   - and give the host decoder's logits within the op harness's fp32 bound (1e-5), token after token: an op handed
//     the wrong argument (a pointer, a size, the norm's scratch) shows here, where the bit check, whose two sides run
//     the same op code, cannot see it.
// On a GPU the same device code runs as decode_program_k (test_generate.cpp's CUDA case).
#define RETRO_SIMT_HOST 1
#include "simt_host.h"
//
#include "../kernels/nn_decode_program.cuh"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "model/params.h"
#include "nn/decode_program.h"
#include "nn/nn_backend_host.h"
#include "test_decode_fixtures.h"
#include "test_util.h"

using namespace retro;
namespace prog = retro::nn::detail::program;
namespace sh = retro::simt::host;

namespace {

constexpr long long kFusedBlocks = 3;    // a small grid: every grid-stride loop goes round, attention's splits spread
constexpr long long kLaunchedBlocks = 2;   // the ops one by one: another grid (the bits may not depend on it)

struct EmulatedStep final : nn::BackendGraph {
    nn::DecodeProgram program;
    prog::DecodeProgramPlan plan;
    std::size_t smem = 0;
    int rows = 0;
};

// f(std::integral_constant<int, NR>) for the rows of the step (the kernel's NR template: 1 to gemv::kMaxRows)
template <typename F>
void with_rows(int rows, F&& f) {
    [&]<int... R>(std::integer_sequence<int, R...>) {
        const bool found = ((rows == R + 1 ? (f(std::integral_constant<int, R + 1>{}), true) : false) || ...);
        if (!found) FAIL("a fused step of " << rows << " rows");
    }(std::make_integer_sequence<int, nn::gemv::kMaxRows>{});
}

// The host backend, but its fused decode steps run kernels/nn_decode_program.cuh's device code in the emulator, each
// launch checked against the same ops launched one by one from the same memory.
class EmulatedFusedBackend final : public nn::HostNnBackend {
public:
    std::int64_t launches = 0, checked = 0;
    // launches emulated, each compared with its ops one by one: every block order and warp schedule (the later
    // launches run the host's ops)
    std::int64_t check_first = 6;

    void* alloc(std::size_t bytes) override {
        void* p = HostNnBackend::alloc(bytes);
        live_[p] = bytes;
        return p;
    }
    void release(void* p) noexcept override {
        live_.erase(p);
        HostNnBackend::release(p);
    }

    std::unique_ptr<nn::BackendGraph> fuse_decode_program(const nn::DecodeProgram& p, std::string* why) override {
        auto step = std::make_unique<EmulatedStep>();
        for (const nn::DecodeOp& op : p.ops)
            if (!nn::decode_op_is_element_wise(op.kind)) {
                step->rows = static_cast<int>(op.N);
                break;
            }
        for (const nn::DecodeOp& op : p.ops)
            if (!nn::decode_op_is_element_wise(op.kind) && op.N != step->rows) {
                if (why) *why = "rows differ between ops";
                return nullptr;
            }
        if (step->rows < 1 || step->rows > nn::gemv::kMaxRows) {
            if (why) *why = "more than 8 rows a step";
            return nullptr;
        }
        step->program = p;
        step->plan = prog::plan_decode_program(p, 16ll << 20);
        for (const nn::DecodeOp& op : p.ops)
            if (op.gamma && nn::decode_op_is_gemv(op.kind))
                step->smem = std::max(step->smem, static_cast<std::size_t>(nn::gemv::smem_bytes(step->rows, op.I, true)));
        if (why) why->clear();
        return step;
    }

    void launch_graph(const nn::BackendGraph& g) override {
        const auto* step = dynamic_cast<const EmulatedStep*>(&g);
        if (!step) return HostNnBackend::launch_graph(g);
        // the block order and warp schedule of this launch: every combination in turn
        const auto order = launches % 2 ? sh::BlockOrder::descending : sh::BlockOrder::ascending;
        const sh::Schedule schedule = sh::kSchedules[(launches / 2) % 3];
        launches++;
        if (checked == check_first) {   // (the emulator's time: the later steps by the host's ops)
            nn::run_decode_program(*this, step->program);
            return;
        }
        checked++;
        const Memory before = snapshot();
        run_fused(*step, order, schedule);
        const Memory fused = snapshot();
        restore(before);
        run_one_by_one(*step);
        const Memory one_by_one = snapshot();
        compare(*step, fused, one_by_one, order, schedule);
        restore(fused);   // the decode goes on from the fused step's memory
    }

private:
    using Memory = std::map<void*, std::vector<unsigned char>>;
    std::map<void*, std::size_t> live_;   // this backend's allocations

    Memory snapshot() const {
        Memory m;
        for (const auto& [p, bytes] : live_) {
            const auto* b = static_cast<const unsigned char*>(p);
            m[p].assign(b, b + bytes);
        }
        return m;
    }
    static void restore(const Memory& m) {
        for (const auto& [p, bytes] : m) std::memcpy(p, bytes.data(), bytes.size());
    }

    static void run_fused(const EmulatedStep& s, sh::BlockOrder order, sh::Schedule schedule) {
        const sh::ScheduleScope scope(schedule);
        with_rows(s.rows, [&](auto nr) {
            sh::launch_cooperative(kFusedBlocks, nn::detail::kThreads, s.smem, [&] {
                prog::decode_program_body<decltype(nr)::value>(s.program.ops.data(), static_cast<int>(s.program.ops.size()),
                                                               s.plan.pieces.data(), static_cast<int>(s.plan.pieces.size()),
                                                               s.plan.schedule.data());
            }, order);
        });
    }
    static void run_one_by_one(const EmulatedStep& s) {
        with_rows(s.rows, [&](auto nr) {
            for (const nn::DecodeOp& op : s.program.ops)
                sh::launch(kLaunchedBlocks, 1, nn::detail::kThreads, s.smem,
                           [&] { prog::run_op<decltype(nr)::value>(op); });
        });
    }

    // every allocation equal byte for byte; a difference named by the allocation, the float and the ops that write
    // into that allocation
    static void compare(const EmulatedStep& s, const Memory& a, const Memory& b, sh::BlockOrder order,
                        sh::Schedule schedule) {
        for (const auto& [p, bytes] : a) {
            const auto& other = b.at(p);
            if (std::memcmp(bytes.data(), other.data(), bytes.size()) == 0) continue;
            std::size_t at = 0;
            while (at < bytes.size() && bytes[at] == other[at]) at++;
            const std::size_t f = at / sizeof(float);
            float x = 0, y = 0;
            std::memcpy(&x, bytes.data() + f * sizeof(float), sizeof x);
            std::memcpy(&y, other.data() + f * sizeof(float), sizeof y);
            std::string writers;
            const auto* lo = static_cast<const char*>(p);
            auto inside = [&](const void* q) {
                return q && static_cast<const char*>(q) >= lo && static_cast<const char*>(q) < lo + bytes.size();
            };
            for (std::size_t i = 0; i < s.program.ops.size(); i++) {
                const nn::DecodeOp& op = s.program.ops[i];
                if (inside(op.out) || inside(op.xn) || inside(op.norm) || inside(op.cache.kcache) ||
                    inside(op.cache.vcache) || inside(op.cache.workspace) || inside(op.cache.counters))
                    writers += " " + std::to_string(i) + ":" + nn::decode_op_name(op.kind);
            }
            const std::string how = std::string(order == sh::BlockOrder::ascending ? "blocks ascending" : "blocks descending") +
                                    ", " + sh::schedule_name(schedule);
            FAIL_CHECK("fused step (" << how << ") differs from its ops launched one by one in an "
                       << bytes.size() << "-byte allocation at float " << f << ": " << x << " against " << y
                       << "; ops writing there:" << writers);
            return;
        }
    }
};

}  // namespace

TEST_CASE("decode program (host emulator): a fused step leaves the memory of its ops launched one by one, and decodes "
          "as the host does") {
    // (two sequences: a two-row step, whose q, k and v projections share a phase; the same-width config, whose
    // encoder embeds straight into its stream; a long prompt: past 128 positions attention_decode takes three splits
    // of 64 keys, spread over the blocks, and the last to count combines them — another block in each order)
    // (the long prompt's steps each launched once more, as retro-bench's replay timing does: a replay, whose
    // attention counters must be back at 0, must leave the decode to go on as the host's)
    struct Case {
        bool same_width;
        std::int64_t sequences, prompt, end;
        int replays;
    };
    for (const Case& k : {Case{false, 1, 5, 24, 0}, Case{true, 2, 5, 24, 0}, Case{false, 2, 140, 150, 1}}) {
        RetroConfig c = k.same_width ? test::same_width_decode_config() : test::decode_config();
        c.max_seq_len = std::max<std::int64_t>(c.max_seq_len, (k.end + 8) / c.chunk_size * c.chunk_size);
        RetroModel<float> model(c);
        params_init(model.params(), model.layout(), 3);
        {
            CAPTURE(k.same_width);
            CAPTURE(k.sequences);
            CAPTURE(k.prompt);
            const std::int64_t sequences = k.sequences;
            nn::HostNnBackend host;
            const auto reference = test::decode_logits(host, c, model, true, nn::DecodeProgramMode::off, nullptr,
                                                       nullptr, sequences, 0, k.prompt, k.end);
            EmulatedFusedBackend emulated;
            std::int64_t fused = 0;
            const auto logits = test::decode_logits(emulated, c, model, true, nn::DecodeProgramMode::fused, nullptr,
                                                    &fused, sequences, k.replays, k.prompt, k.end);
            MESSAGE("fused steps: " << fused << ", launched " << emulated.launches << " times, the first "
                    << emulated.checked << " emulated and checked against their ops one by one");
            CHECK(fused > 0);
            CHECK(emulated.checked == std::min(emulated.launches, emulated.check_first));
            REQUIRE(logits.size() == reference.size());
            const std::size_t V = static_cast<std::size_t>(c.num_tokens);
            for (std::size_t row = 0; row * V < logits.size(); row++) {   // each step's row against the host's
                CAPTURE(row);
                const std::vector<float> ref(reference.begin() + row * V, reference.begin() + (row + 1) * V);
                CHECK(test::rel_err(logits.data() + row * V, ref) <= 1e-5);
            }
        }
    }
}

// The same at the demo config's shapes (examples/configs/demo.json: width 128, 8 heads of 32, an 8000-token vocabulary,
// chunks of 32), one, two and eight rows a step: minutes in the emulator, so run by hand (-tc with its name and
// --no-skip), not in CI; last run: docs/gpu.md "The fused decode step".
TEST_CASE("decode program (host emulator): the demo config's shapes, 1, 2 and 8 rows" * doctest::skip()) {
    RetroConfig c = RetroConfig::load((test::source_dir() / "examples" / "configs" / "demo.json").string());
    RetroModel<float> model(c);
    params_init(model.params(), model.layout(), 3);
    for (const std::int64_t sequences : {1, 2, 8}) {
        CAPTURE(sequences);
        nn::HostNnBackend host;
        const auto reference = test::decode_logits(host, c, model, true, nn::DecodeProgramMode::off, nullptr, nullptr,
                                                   sequences, 0, 30, 36);
        EmulatedFusedBackend emulated;
        emulated.check_first = 3;
        std::int64_t fused = 0;
        const auto logits = test::decode_logits(emulated, c, model, true, nn::DecodeProgramMode::fused, nullptr, &fused,
                                                sequences, 0, 30, 36);
        MESSAGE("fused steps: " << fused << ", the first " << emulated.checked << " emulated");
        CHECK(emulated.checked > 0);
        REQUIRE(logits.size() == reference.size());
        const std::size_t V = static_cast<std::size_t>(c.num_tokens);
        for (std::size_t row = 0; row * V < logits.size(); row++) {
            CAPTURE(row);
            const std::vector<float> ref(reference.begin() + row * V, reference.begin() + (row + 1) * V);
            CHECK(test::rel_err(logits.data() + row * V, ref) <= 1e-5);
        }
    }
}

TEST_CASE("decode attention (host emulator): a position outside the cache gives NaN for its row and touches nothing else") {
    // two slots of a cache of L = 100 (two splits), 2 heads of 32; row 0 at position 70 (both splits), row 1 at a bad
    // position; the self-attention form (the new key and value written at the position) and CCA's (no new key, the
    // null column, a key mask), the blocks run in ascending and descending order (which split finishes last and
    // combines). Before session 66 a row at pos >= L wrote its new key past its slot's cache and left its counters
    // short of their splits (every later call wrong); one at pos < 0 left its output unwritten.
    namespace dec = retro::nn::detail::decode;
    constexpr long long L = 100, H = 2, D = 32, HD = H * D, rows = 2, S = (L + 63) / 64;
    std::mt19937 rng(66);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    auto randn = [&](long long n) {
        std::vector<float> x(static_cast<std::size_t>(n));
        for (auto& e : x) e = normal(rng);
        return x;
    };
    // the caches with a guard slot after them: a write past slot 1's rows would land there
    const std::vector<float> k0 = randn(3 * L * HD), v0 = randn(3 * L * HD), q = randn(rows * HD),
                             k_new = randn(rows * HD), v_new = randn(rows * HD), null_k = randn(HD), null_v = randn(HD);
    std::vector<std::uint8_t> mask(static_cast<std::size_t>(3 * L));
    for (auto& m : mask) m = rng() % 4 != 0;
    const std::vector<std::int64_t> seq{0, 1};
    for (const bool cca : {false, true})
        for (const auto order : {sh::BlockOrder::ascending, sh::BlockOrder::descending}) {
            CAPTURE(cca);
            CAPTURE(order == sh::BlockOrder::ascending);
            auto cache_of = [&](std::vector<float>& kc, std::vector<float>& vc) {
                nn::NnBackend::DecodeCache cache;
                cache.kcache = kc.data(), cache.vcache = vc.data(), cache.L = L;
                if (cca) cache.null_k = null_k.data(), cache.null_v = null_v.data(), cache.key_mask = mask.data();
                else cache.k_new = k_new.data(), cache.v_new = v_new.data();
                return cache;
            };
            auto run = [&](const std::vector<std::int64_t>& pos, std::vector<float>& kc, std::vector<float>& vc,
                           std::vector<std::uint32_t>& counters, long long n_rows) {
                std::vector<float> out(static_cast<std::size_t>(n_rows * HD), -7.0f),
                    part(static_cast<std::size_t>(n_rows * H * S * (D + 2)));
                nn::NnBackend::DecodeCache cache = cache_of(kc, vc);
                cache.workspace = part.data(), cache.counters = counters.data();
                sh::launch_cooperative(3, retro::nn::detail::kThreads, 0, [&] {
                    dec::attention_decode_rows(out.data(), part.data(), q.data(), cache, pos.data(), seq.data(), n_rows,
                                               H, D, S, dec::attention_decode_vec4(D, kc.data()));
                }, order);
                return out;
            };
            // row 0 alone: the reference bits
            std::vector<float> k_ref = k0, v_ref = v0;
            std::vector<std::uint32_t> c_ref(static_cast<std::size_t>(rows * H), 0u);
            const auto ref = run({70}, k_ref, v_ref, c_ref, 1);
            {   // and the host backend's attention within the op harness's fp32 bound
                std::vector<float> kh = k0, vh = v0, out_h(static_cast<std::size_t>(HD));
                const std::vector<std::int64_t> pos{70};
                nn::HostNnBackend().attention_decode(out_h.data(), q.data(), cache_of(kh, vh), pos.data(), seq.data(), 1,
                                                     H, D);
                CHECK(test::rel_err(ref.data(), out_h) <= 1e-5);
            }
            for (const long long bad : {L, L + 64, -1LL}) {
                CAPTURE(bad);
                std::vector<float> kc = k0, vc = v0;
                std::vector<std::uint32_t> counters(static_cast<std::size_t>(rows * H), 0u);
                const auto out = run({70, bad}, kc, vc, counters, rows);
                CHECK(std::memcmp(out.data(), ref.data(), static_cast<std::size_t>(HD) * sizeof(float)) == 0);
                CHECK(std::all_of(out.begin() + HD, out.end(), [](float x) { return std::isnan(x); }));
                CHECK(kc == k_ref);   // row 0's new key at its position, nothing else (slot 1, the guard slot: as they were)
                CHECK(vc == v_ref);
                CHECK(std::all_of(counters.begin(), counters.end(), [](std::uint32_t c) { return c == 0; }));
                // the next call, every position good, finds the counters as it needs them: both rows as alone
                std::vector<float> k2 = k0, v2 = v0;
                std::vector<std::uint32_t> fresh(counters.size(), 0u);
                kc = k0, vc = v0;
                const auto after = run({70, 30}, kc, vc, counters, rows);
                const auto clean = run({70, 30}, k2, v2, fresh, rows);
                CHECK(after == clean);
            }
        }
}

TEST_CASE("decode program (host emulator): a cooperative launch waits at grid barriers and refuses divergent ones") {
    // every block writes its slot, the grid meets, every block reads its neighbour's: the grid barrier orders them
    // under both block orders; without it, one order reads the slot before it is written
    for (const auto order : {sh::BlockOrder::ascending, sh::BlockOrder::descending}) {
        for (const bool barrier : {true, false}) {
            std::vector<float> slots(4, -1.0f), seen(4, -2.0f);
            sh::launch_cooperative(4, 64, 0, [&] {
                const long long b = simt::block_x();
                if (simt::thread_x() == 0) slots[static_cast<std::size_t>(b)] = static_cast<float>(b);
                if (barrier) simt::grid_sync();
                if (simt::thread_x() == 0) seen[static_cast<std::size_t>(b)] = slots[static_cast<std::size_t>((b + 1) % 4)];
            }, order);
            bool all = true;
            for (int b = 0; b < 4; b++) all = all && seen[static_cast<std::size_t>(b)] == static_cast<float>((b + 1) % 4);
            CAPTURE(barrier);
            CHECK(all == barrier);
        }
    }
    // a block whose threads end while the others wait would hang the GPU: refused
    CHECK_THROWS_AS(sh::launch_cooperative(2, 32, 0, [&] {
                        if (simt::block_x() == 0) simt::grid_sync();
                    }),
                    std::logic_error);
    // and a grid barrier outside a cooperative launch, which nothing releases: a deadlock
    CHECK_THROWS_AS(sh::launch(1, 1, 32, 0, [&] { simt::grid_sync(); }), std::logic_error);
}

TEST_CASE("fused decode step: each op's prefetch pieces are those its span overlaps") {
    // the device walks only schedule[i]'s pieces [piece_first, piece_end) (it scanned all of them before every op);
    // held here to a scan of every piece, over GEMVs of many sizes (some past the 16 MB cap) between other ops, and
    // look-ahead windows from none to past the whole stream
    std::vector<float> dummy(16);
    nn::DecodeProgram p;
    std::mt19937_64 rng(55);
    for (int i = 0; i < 40; i++) {
        nn::DecodeOp op;
        op.kind = rng() % 4 == 0 ? nn::DecodeOpKind::zero : nn::DecodeOpKind::linear;
        op.out = dummy.data() + i % 8;
        op.x = dummy.data() + 8 + i % 8;
        op.W = dummy.data();
        op.N = 1;
        op.I = 1 + static_cast<std::int64_t>(rng() % 4096);
        op.O = 1 + static_cast<std::int64_t>(rng() % 2048);
        p.ops.push_back(op);
    }
    for (const long long window : {0ll, 1ll, 1ll << 20, 16ll << 20, 1ll << 40}) {
        CAPTURE(window);
        const prog::DecodeProgramPlan plan = prog::plan_decode_program(p, window);
        REQUIRE(plan.schedule.size() == p.ops.size());
        for (std::size_t i = 0; i < plan.schedule.size(); i++) {
            const prog::OpSchedule& s = plan.schedule[i];
            int first = -1, end = -1;
            for (int k = 0; k < static_cast<int>(plan.pieces.size()); k++) {
                const prog::StreamPiece& pc = plan.pieces[static_cast<std::size_t>(k)];
                if (std::max(s.from, pc.begin) < std::min(s.to, pc.begin + pc.bytes)) {
                    if (first < 0) first = k;
                    end = k + 1;
                }
            }
            CAPTURE(i);
            if (first < 0) {
                CHECK(s.piece_first == s.piece_end);
            } else {
                CHECK(s.piece_first == first);
                CHECK(s.piece_end == end);
            }
        }
    }
}
