// NnBackend (nn/nn_backend.h): the op harness's BackendCases (ops/backend_case.h) run through
//   - HostNnBackend: upload -> op -> download must give exactly the bits of the nn/*.h functions called directly
//     (the CpuCase body in float), for every op of the interface;
//   - cuda_nn_backend, when a device exists: within the op's fp32 bound of the CPU in double, on the small test
//     cases and on the perf shapes (many blocks, strided loops, keys beyond one block), and bit-identical run to
//     run (no atomics). Without a device it prints "skipped: no CUDA device".
//   - graphs (begin_capture / end_capture / launch_graph) on both: a captured sequence replays on new inputs with the
//     direct run's bits, and the memory calls a graph cannot hold are refused while capturing.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "backend_case.h"
#include "core/cuda_device.h"
#include "nn/fused_ops.h"
#include "nn/nn_backend_cuda.h"
#include "nn/nn_backend_host.h"
#include "op_registry.h"
#include "test_util.h"

using namespace retro;

namespace {

// Every op of nn/nn_backend.h but the memory ones the arena always calls (alloc, release, upload, download, zero).
const std::vector<std::string> kAllOps = {
    "linear_forward",        "linear_backward",      "rmsnorm_forward",      "rmsnorm_backward",
    "gelu_forward",          "gelu_backward",        "rotary_forward",       "rotary_backward",
    "scale",                 "attention_forward",    "attention_backward",   "embedding_forward",
    "embedding_backward",    "position_add_forward", "position_add_backward", "cross_entropy_forward",
    "cross_entropy_backward", "residual_sum",        "residual_add",         "gather_rows",
    "gather_add_rows",       "sum_squares",          "adamw_update",         "copy",
    "synchronize",           "copy_head_forward",    "copy_head_backward",   "attention_decode",
    "residual_rmsnorm_forward", "rmsnorm_backward_add", "scatter_rows", "rotary_scale_forward",
    "linear_gelu_forward", "linear_gelu_forward_bf16", "linear_forward_bf16x", "linear_backward_bf16x",
    "residual_rmsnorm_forward_bf16", "linear_gelu_forward_bf16x", "gelu_linear_backward_bf16x",
    "rmsnorm_forward_bf16", "linear_forward_shared_bf16x", "linear_backward_shared_bf16x"};

bool bits_equal(const std::vector<double>& a, const std::vector<double>& b) {
    return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0);
}

// Memory round trip: upload, copy, zero part, download.
void check_memory(nn::NnBackend& be) {
    std::vector<float> host(1000);
    for (std::size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(i) * 0.5f - 3.0f;
    const std::size_t bytes = host.size() * sizeof(float);
    void* a = be.alloc(bytes);
    void* b = be.alloc(bytes);
    CHECK(reinterpret_cast<std::uintptr_t>(a) % 256 == 0);
    CHECK(reinterpret_cast<std::uintptr_t>(b) % 256 == 0);
    be.upload(a, host.data(), bytes);
    be.copy(b, a, bytes);
    be.zero(b, 100 * sizeof(float));
    std::vector<float> back(host.size(), -1.0f);
    be.download(back.data(), b, bytes);
    for (std::size_t i = 0; i < host.size(); ++i) {
        INFO(be.name() << " element " << i);
        CHECK(back[i] == (i < 100 ? 0.0f : host[i]));
    }
    be.synchronize();
    be.release(a);
    be.release(b);
    be.release(nullptr);
}

}  // namespace

TEST_CASE("nn backend: every op through HostNnBackend gives the nn ops' bits") {
    nn::HostNnBackend host;
    CHECK(host.name() == "cpu");
    check_memory(host);
    std::set<std::string> covered;
    int cases = 0;
    for (const auto& op : ops::registry())
        for (int seed = 1; seed <= op.test_seeds; ++seed) {
            auto c = op.test_case(static_cast<std::uint64_t>(seed));
            auto* r = dynamic_cast<ops::BackendRunnable*>(c.get());
            if (!r) continue;
            CHECK(!op.cuda.empty());
            CHECK((c->supports(ops::Backend::CUDA, ops::DType::F32) || c->supports(ops::Backend::CUDA, ops::DType::BF16)));
            for (const auto& name : r->backend_ops()) covered.insert(name);
            const auto direct = c->run(ops::Backend::CPU, ops::DType::F32);
            const auto through = r->run_on(host);
            const auto names = c->outputs();
            REQUIRE(direct.size() == names.size());
            REQUIRE(through.size() == names.size());
            for (std::size_t i = 0; i < names.size(); ++i) {
                INFO(op.name << " [" << c->shape() << "] " << names[i]);
                CHECK(bits_equal(through[i], direct[i]));
            }
            ++cases;
        }
    MESSAGE(cases << " backend cases through HostNnBackend");
    for (const auto& name : kAllOps) {
        INFO("NnBackend op not covered by any registry case: " << name);
        CHECK(covered.count(name) == 1);
    }
}

TEST_CASE("ops bench: a backend case's device time counts its own ops, not its transfers") {
    // retro-bench ops --device cuda reports BackendRunnable::op_seconds (ops/ops_bench.cpp)
    const std::vector<nn::OpTiming> t{{"upload", "", 3, 5.0, 0}, {"rmsnorm_forward", "4x3", 1, 1.0, 0},
                                      {"download", "", 3, 7.0, 0}, {"rmsnorm_backward", "4x3", 1, 2.0, 0},
                                      {"zero", "", 1, 11.0, 0}, {"gelu_forward", "", 1, 13.0, 0}};
    CHECK(ops::seconds_in_ops(t, {"rmsnorm_forward", "rmsnorm_backward"}) == 3.0);
    CHECK(ops::seconds_in_ops(t, {}) == 0.0);
    // through the profiler on the host backend: some time, every named op timed
    nn::HostNnBackend host;
    int found = 0;
    for (const auto& op : ops::registry()) {
        if (op.name != "nn.rmsnorm") continue;
        ++found;
        auto c = op.test_case(1);
        auto* r = dynamic_cast<ops::BackendRunnable*>(c.get());
        REQUIRE(r);
        nn::ProfilingNnBackend profiler(host);
        r->run_on(profiler);
        std::set<std::string> timed;
        for (const auto& x : profiler.timings()) timed.insert(x.op);
        for (const auto& name : r->backend_ops()) CHECK(timed.count(name) == 1);
        CHECK(timed.count("upload") == 1);   // what the device rows leave out
        CHECK(r->op_seconds_on(host) > 0.0);
    }
    CHECK(found == 1);
}

TEST_CASE("nn backend: CUDA (cuda_nn_backend) within fp32 bounds of the CPU in double, bit-identical run to run") {
    if (cuda_device_count() == 0) RETRO_SKIP("no CUDA device");
    if constexpr (kCudaBuilt) {
        CudaStreamOwner stream;
        auto be = nn::cuda_nn_backend(stream.get());
        CHECK(be->name() == "cuda");
        check_memory(*be);
        int cases = 0;
        for (const auto& op : ops::registry()) {
            std::vector<std::unique_ptr<ops::Case>> all;
            for (int seed = 1; seed <= op.test_seeds; ++seed) all.push_back(op.test_case(static_cast<std::uint64_t>(seed)));
            if (!dynamic_cast<ops::BackendRunnable*>(all.front().get())) continue;   // not an NnBackend op: skip its
                                                                                     // (large) perf case unbuilt
            if (!all.front()->supports(ops::Backend::CUDA, ops::DType::F32)) continue;   // BF16 only (nn.ff_bf16)
            all.push_back(op.perf_case(ops::Backend::CUDA));   // large: many blocks and strided loops
            for (auto& c : all) {
                auto* r = dynamic_cast<ops::BackendRunnable*>(c.get());
                if (!r) continue;
                const auto ref = c->reference(ops::DType::F32);
                const auto got = r->run_on(*be);
                const auto again = r->run_on(*be);
                const auto names = c->outputs();
                REQUIRE(got.size() == names.size());
                REQUIRE(ref.size() == names.size());
                for (std::size_t i = 0; i < names.size(); ++i) {
                    const double ratio = ops::rms_ratio(got[i], ref[i]);
                    INFO(op.name << " [" << c->shape() << "] " << names[i] << ": rms ratio " << ratio << " bound "
                                 << op.bound_f32);
                    CHECK(ratio <= op.bound_f32);
                    CHECK(bits_equal(got[i], again[i]));
                }
                ++cases;
            }
        }
        MESSAGE(cases << " backend cases through cuda_nn_backend");
    }
}

TEST_CASE("nn backend: RETRO_UNFUSE names the fused ops to run as the ops they stand for") {
    using nn::FusedOp;
    const auto bit = [](FusedOp op) { return 1u << static_cast<unsigned>(op); };
    CHECK(nn::unfused_ops_requested(nullptr) == 0u);
    CHECK(nn::unfused_ops_requested("") == 0u);
    CHECK(nn::unfused_ops_requested("gelu_linear_backward") == bit(FusedOp::gelu_linear_backward));
    CHECK(nn::unfused_ops_requested("linear_forward_shared,,rmsnorm_backward_one_pass,") ==
          (bit(FusedOp::linear_forward_shared) | bit(FusedOp::rmsnorm_backward_one_pass)));
    CHECK(nn::unfused_ops_requested(" feed_forward_bf16 , linear_backward_dy_copy") ==
          (bit(FusedOp::feed_forward_bf16) | bit(FusedOp::linear_backward_dy_copy)));
    const unsigned all = nn::unfused_ops_requested("all");
    for (unsigned i = 0; i < static_cast<unsigned>(FusedOp::count); ++i) {
        const auto op = static_cast<FusedOp>(i);
        INFO(nn::fused_op_name(op));
        CHECK((all & bit(op)) != 0u);
        CHECK(nn::unfused_ops_requested(std::string(nn::fused_op_name(op)).c_str()) == bit(op));
    }
    CHECK((all >> static_cast<unsigned>(FusedOp::count)) == 0u);
    std::string message;
    try {
        nn::unfused_ops_requested("linear_forward_shared,gelu");
    } catch (const UserError& e) {
        message = e.what();
    }
    CHECK(message.find("'gelu' is not one of") != std::string::npos);
    CHECK(message.find("cross_entropy_linear_backward") != std::string::npos);
}

TEST_CASE("nn backend: CUDA with RETRO_UNFUSE=all, the fused ops' cases within fp32 bounds of the CPU in double") {
    if (cuda_device_count() == 0) RETRO_SKIP("no CUDA device");
    if constexpr (kCudaBuilt) {
        CudaStreamOwner stream;
        std::unique_ptr<nn::NnBackend> be;
        {   // set for the backend's constructor only, restored whatever happens
            test::ScopedEnv unfuse("RETRO_UNFUSE", "all");
            be = nn::cuda_nn_backend(stream.get());
        }
        int cases = 0;
        for (const auto& op : ops::registry()) {
            // the ops RETRO_UNFUSE reaches: the decoder's fused GEMV forms, the shared and fused-gradient linears,
            // the rmsnorm backward
            static const std::set<std::string> kFused = {"nn.norm_linear", "nn.linear_residual", "nn.linear_rotary",
                                                         "nn.embedding_position", "nn.linear_shared",
                                                         "nn.gelu_linear_backward", "nn.cross_entropy_linear",
                                                         "nn.rmsnorm", "nn.residual_rmsnorm"};
            if (!kFused.count(op.name)) continue;
            for (int seed = 1; seed <= op.test_seeds; ++seed) {
                auto c = op.test_case(static_cast<std::uint64_t>(seed));
                auto* r = dynamic_cast<ops::BackendRunnable*>(c.get());
                REQUIRE(r);
                const auto ref = c->reference(ops::DType::F32);
                const auto got = r->run_on(*be);
                const auto names = c->outputs();
                for (std::size_t i = 0; i < names.size(); ++i) {
                    const double ratio = ops::rms_ratio(got[i], ref[i]);
                    INFO(op.name << " [" << c->shape() << "] " << names[i] << ": rms ratio " << ratio);
                    CHECK(ratio <= op.bound_f32);
                }
                ++cases;
            }
        }
        CHECK(cases >= 9);
        MESSAGE(cases << " fused-op cases through cuda_nn_backend with RETRO_UNFUSE=all");
    }
}

namespace {

// embedding_backward of N ids on a backend: dtable starts at `start` and takes two calls (so the adds land on
// non-zero values, as gradient accumulation does); returns dtable.
std::vector<float> embedding_backward_on(nn::NnBackend& be, const std::vector<std::int32_t>& ids,
                                         const std::vector<float>& dout, const std::vector<float>& start, std::int64_t C) {
    const auto N = static_cast<std::int64_t>(ids.size());
    void* d_ids = be.alloc(ids.size() * sizeof(std::int32_t));
    void* d_dout = be.alloc(dout.size() * sizeof(float));
    void* d_table = be.alloc(start.size() * sizeof(float));
    be.upload(d_ids, ids.data(), ids.size() * sizeof(std::int32_t));
    be.upload(d_dout, dout.data(), dout.size() * sizeof(float));
    be.upload(d_table, start.data(), start.size() * sizeof(float));
    for (int call = 0; call < 2; ++call)
        be.embedding_backward(static_cast<float*>(d_table), static_cast<const float*>(d_dout),
                              static_cast<const std::int32_t*>(d_ids), N, C);
    std::vector<float> out(start.size());
    be.download(out.data(), d_table, out.size() * sizeof(float));
    be.synchronize();
    for (void* p : {d_ids, d_dout, d_table}) be.release(p);
    return out;
}

}  // namespace

TEST_CASE("nn backend: CUDA embedding backward (sorted on the device) gives the CPU's float bits") {
    // kernels/nn_embedding_cuda.cu adds each id's rows in ascending n, as nn/embedding.cpp does: the same float
    // sums, so the same bits, at a 172M step's size (41k ids) with a skewed id distribution (one id in a quarter of
    // the rows, as frequent tokens are) and ids beyond 2^16 (the radix sort's upper digits)
    if (cuda_device_count() == 0) RETRO_SKIP("no CUDA device");
    if constexpr (kCudaBuilt) {
        const std::int64_t N = 41000, V = 70000, C = 96;
        std::mt19937 rng(7);
        std::vector<std::int32_t> ids(static_cast<std::size_t>(N));
        for (auto& id : ids) {
            const unsigned u = rng() % 100;
            id = u < 25 ? 3 : u < 60 ? static_cast<std::int32_t>(rng() % 50) : static_cast<std::int32_t>(rng() % V);
        }
        std::normal_distribution<float> nd(0.0f, 1.0f);
        std::vector<float> dout(static_cast<std::size_t>(N * C)), start(static_cast<std::size_t>(V * C));
        for (auto& x : dout) x = nd(rng);
        for (auto& x : start) x = nd(rng);
        nn::HostNnBackend host;
        const auto want = embedding_backward_on(host, ids, dout, start, C);
        CudaStreamOwner stream;
        auto be = nn::cuda_nn_backend(stream.get());
        const auto got = embedding_backward_on(*be, ids, dout, start, C);
        REQUIRE(got.size() == want.size());
        std::size_t differ = 0;
        for (std::size_t i = 0; i < got.size(); ++i) differ += std::memcmp(&got[i], &want[i], sizeof(float)) != 0;
        INFO(differ << " of " << got.size() << " dtable elements differ from the CPU's bits");
        CHECK(differ == 0);
    }
}

TEST_CASE("nn backend: bf16 GEMM inputs on the host are the double reference on bf16-rounded inputs") {
    // NnBackend::GemmInputs::bf16 on HostNnBackend (the CPU's emulation of the GPU's tensor-core mode) equals the
    // linear op in double on x, W, dy rounded to bf16 up to fp32 accumulation; db comes from dy unrounded
    const auto* op = ops::find("nn.linear");
    REQUIRE(op != nullptr);
    for (std::uint64_t seed : {1, 2}) {
        auto c = op->test_case(seed);
        auto* runnable = dynamic_cast<ops::BackendRunnable*>(c.get());
        REQUIRE(runnable != nullptr);
        CHECK(c->supports(ops::Backend::CUDA, ops::DType::BF16));
        nn::HostNnBackend host;
        host.set_gemm_inputs(nn::NnBackend::GemmInputs::bf16);
        const auto got = runnable->run_on(host);
        const auto ref = c->reference(ops::DType::BF16);
        const auto fp32 = c->reference(ops::DType::F32);
        const auto names = c->outputs();
        REQUIRE(got.size() == ref.size());
        for (std::size_t i = 0; i < ref.size(); ++i) {
            INFO(names[i]);
            if (names[i] == "db") continue;   // from dy itself, not the rounded dy of the reference
            if (names[i] != "y") CHECK(ops::rms_ratio(got[i], ref[i]) <= 1e-6);   // y: the bias is not rounded
            CHECK(ops::rms_ratio(got[i], ref[i]) <= op->bound_bf16);
            CHECK(ops::rms_ratio(got[i], fp32[i]) > 1e-5);   // the rounding is really there
        }
    }
}

TEST_CASE("nn backend: CUDA element-wise maps (float4 where aligned) at odd lengths and misaligned pointers") {
    // kernels/nn_backend_common.cuh map_elements: the float4 path, its n % 4 tail and the one-float path for pointers
    // off 16 bytes. The sums and products are IEEE-exact against the host backend; gelu within float rounding.
    if (cuda_device_count() == 0) RETRO_SKIP("no CUDA device");
    if constexpr (kCudaBuilt) {
        CudaStreamOwner stream;
        auto be = nn::cuda_nn_backend(stream.get());
        nn::HostNnBackend host;
        std::mt19937 rng(11);
        std::normal_distribution<float> nd(0.0f, 2.0f);
        for (const std::int64_t n : {std::int64_t{1}, std::int64_t{3}, std::int64_t{4}, std::int64_t{1027},
                                     std::int64_t{70001}}) {
            for (const std::int64_t shift : {std::int64_t{0}, std::int64_t{1}, std::int64_t{2}}) {
                CAPTURE(n);
                CAPTURE(shift);
                std::vector<float> a(static_cast<std::size_t>(n + shift)), b(a.size());
                for (auto& x : a) x = nd(rng);
                for (auto& x : b) x = nd(rng);
                // each op on both backends, on buffers `shift` floats into an allocation (b's pointer stays aligned)
                const auto run = [&](nn::NnBackend& bk, int op) {
                    const std::size_t bytes = a.size() * sizeof(float);
                    float* da = static_cast<float*>(bk.alloc(bytes));
                    float* db = static_cast<float*>(bk.alloc(bytes));
                    float* dout = static_cast<float*>(bk.alloc(bytes));
                    bk.upload(da, a.data(), bytes);
                    bk.upload(db, b.data(), bytes);
                    bk.zero(dout, bytes);
                    float *x = da + shift, *y = db, *o = dout + shift;
                    if (op == 0) bk.residual_sum(o, x, y, n);
                    if (op == 1) bk.residual_add(x, y, n), o = x;
                    if (op == 2) bk.scale(x, 0.37f, n), o = x;
                    if (op == 3) bk.gelu_forward(o, x, n);
                    if (op == 4) bk.gelu_backward(o, y, x, n);
                    std::vector<float> out(static_cast<std::size_t>(n));
                    bk.download(out.data(), o, static_cast<std::size_t>(n) * sizeof(float));
                    bk.synchronize();
                    bk.release(da);
                    bk.release(db);
                    bk.release(dout);
                    return out;
                };
                for (int op = 0; op < 5; ++op) {
                    CAPTURE(op);
                    const auto got = run(*be, op), want = run(host, op);
                    std::size_t off = 0;
                    for (std::size_t i = 0; i < got.size(); ++i) {
                        const float tol = op < 3 ? 0.0f : 2e-6f * std::max(1.0f, std::abs(want[i]));
                        off += !(std::abs(got[i] - want[i]) <= tol);
                    }
                    CHECK(off == 0);
                }
            }
        }
    }
}

namespace {

// Captures y = gelu(x) + x (three ops on fixed buffers), then replays it on new uploaded inputs: the replay must
// equal the ops run directly, and the calls a graph cannot hold must be refused while capturing.
void check_graph_replay(nn::NnBackend& be) {
    const std::int64_t n = 1000;
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> u(-2, 2);
    nn::BackendBuffer x(be, n * sizeof(float)), g(be, n * sizeof(float)), y(be, n * sizeof(float));
    auto body = [&] {
        be.gelu_forward(g.f(), x.f(), n);
        be.residual_sum(y.f(), g.f(), x.f(), n);
        be.scale(y.f(), 0.5f, n);
    };
    std::vector<float> in(n), direct(n), replayed(n);
    for (auto& e : in) e = u(rng);
    be.upload(x.f(), in.data(), n * sizeof(float));
    be.begin_capture();   // a capture given up part way (an op failed): ended without a word, the next one works
    be.gelu_forward(g.f(), x.f(), n);
    be.abort_capture();
    CHECK_FALSE(be.capturing());
    be.abort_capture();   // (and again: nothing to end)
    be.begin_capture();
    CHECK(be.capturing());
    CHECK_THROWS_AS(be.upload(x.f(), in.data(), n * sizeof(float)), InternalError);
    CHECK_THROWS_AS(be.download(direct.data(), y.f(), n * sizeof(float)), InternalError);
    CHECK_THROWS_AS(be.synchronize(), InternalError);
    CHECK_THROWS_AS(be.alloc(16), InternalError);
    CHECK_THROWS_AS(be.sum_squares(x.f(), n), InternalError);
    body();
    auto graph = be.end_capture();
    CHECK_FALSE(be.capturing());
    for (int round = 0; round < 3; round++) {   // new inputs each round, in the same buffer
        for (auto& e : in) e = u(rng);
        be.upload(x.f(), in.data(), n * sizeof(float));
        body();
        be.download(direct.data(), y.f(), n * sizeof(float));
        be.zero(y.f(), n * sizeof(float));
        be.launch_graph(*graph);
        be.download(replayed.data(), y.f(), n * sizeof(float));
        CHECK(std::memcmp(direct.data(), replayed.data(), n * sizeof(float)) == 0);
    }
}

}  // namespace

TEST_CASE("nn backend: graphs - a captured sequence of ops replays on new inputs, memory calls refused while capturing") {
    nn::HostNnBackend host;
    check_graph_replay(host);
}

TEST_CASE("nn backend: CUDA graphs - a captured sequence of ops replays on new inputs, memory calls refused while capturing") {
    if (cuda_device_count() == 0) RETRO_SKIP("no CUDA device");
    if constexpr (kCudaBuilt) {
        CudaStreamOwner stream;
        auto be = nn::cuda_nn_backend(stream.get());
        check_graph_replay(*be);
    }
}
