// retro-bench retention (retention_bench.h). For every dtype × shape × T × mode: median forward and
// forward+backward ms, peak extra memory, non-finite outputs (naive's NaN is reported, never hidden),
// chunkwise forward GFLOP/s vs this run's sgemm and against the bandwidth bound (q, k, v, o at the copy bandwidth
// measured in the same run); then decode-step latency, the fastest mode at each T and the chunkwise/parallel crossover.
#include "bench/retention_bench.h"

#include "core/atomic_file.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "bench/bench_util.h"
#include "core/cuda_device.h"
#include "core/error.h"
#include "core/log.h"
#include "core/memory_budget.h"
#include "core/threads.h"
#include "retention/retention.h"
#include "retention/retention_cuda.h"
#include "retrokit/version.h"

namespace retro::bench {
namespace rr = retro::retention;
using nlohmann::json;

namespace {

struct Row {
    std::string mode, dtype;
    rr::Shape s;
    double fwd_ms = NAN, fwdbwd_ms = NAN, gflops = NAN, ratio = NAN;
    double bound_ms = NAN, of_bound = NAN;   // chunkwise: q, k, v read and o written at the copy bandwidth
    std::int64_t buffer_bytes = 0, peak_extra_bytes = -1, nonfinite = 0;
};

// Bytes a forward must move at least: q, k read (K each), v read and o written (V each), per token and head.
double qkvo_bytes(const rr::Shape& s, const std::string& dtype) {
    const double elem = dtype == "bf16" ? 2 : dtype == "fp64" ? 8 : 4;
    return elem * static_cast<double>(s.B * s.T * s.H) * static_cast<double>(2 * s.K + 2 * s.V);
}

// FLOPs of the chunkwise forward (docs/retention.md): per (b,h) and chunk of length L,
// 2L^2K (QK^T) + 2L^2V ((·)V) + 2LKV (Q S) + 2LKV (K^T V).
double chunkwise_flops(const rr::Shape& s, std::int64_t C) {
    double f = 0;
    for (std::int64_t t0 = 0; t0 < s.T; t0 += C) {
        const double L = static_cast<double>(std::min(C, s.T - t0));
        f += 2 * L * L * (s.K + s.V) + 4 * L * s.K * s.V;
    }
    return f * s.B * s.H;
}

std::string fmt(double x, int prec = 3) {
    if (std::isnan(x)) return "-";
    std::ostringstream os;
    os.setf(std::ios::fixed);
    os.precision(prec);
    os << x;
    return os.str();
}

template <typename X>
std::int64_t count_nonfinite(const std::vector<X>& x) {
    std::int64_t c = 0;
    for (const auto& e : x) c += std::isfinite(static_cast<double>(e)) ? 0 : 1;
    return c;
}

// N(0, 1) samples, generated in blocks of 2^20 on all threads (the GPU shapes are 0.5G elements per tensor);
// block b draws from its own stream (seed, b), so the result does not depend on the thread count.
std::vector<float> random_floats(std::size_t n, unsigned seed) {
    constexpr std::int64_t kBlock = std::int64_t{1} << 20;
    std::vector<float> x(n);
    const auto blocks = static_cast<std::int64_t>((n + kBlock - 1) / kBlock);
    parallel_ranges(blocks, [&](std::int64_t b0, std::int64_t b1, int) {
        for (std::int64_t b = b0; b < b1; ++b) {
            std::mt19937_64 rng(static_cast<std::uint64_t>(seed) * 0x9E3779B97F4A7C15ull + static_cast<std::uint64_t>(b));
            std::normal_distribution<float> d(0.0f, 1.0f);
            const auto end = std::min(n, static_cast<std::size_t>((b + 1) * kBlock));
            for (auto i = static_cast<std::size_t>(b * kBlock); i < end; ++i) x[i] = d(rng);
        }
    });
    return x;
}

template <typename F>
Row bench_cpu(const std::string& mode, const std::string& dtype, const rr::Shape& s, const RetentionBenchOptions& o) {
    Row r{mode, dtype, s};
    const auto nk = static_cast<std::size_t>(s.B * s.T * s.H * s.K), nv = static_cast<std::size_t>(s.B * s.T * s.H * s.V);
    auto cast = [](std::vector<float> x) { return std::vector<F>(x.begin(), x.end()); };
    std::vector<F> q = cast(random_floats(nk, 1)), k = cast(random_floats(nk, 2)), v = cast(random_floats(nv, 3)),
                   dO = cast(random_floats(nv, 4)), out(nv), dq(nk), dk(nk), dv(nv);
    r.buffer_bytes = static_cast<std::int64_t>((4 * nk + 4 * nv) * sizeof(F));
    rr::Options opt;
    opt.chunk_size = o.chunk_size;
    std::int64_t naive_bad = 0;
    auto fwd = [&] {
        if (mode == "naive") naive_bad = rr::naive_forward<F>(s, opt, q.data(), k.data(), v.data(), nullptr, out.data(), nullptr).nonfinite;
        else if (mode == "parallel") rr::parallel_forward<F>(s, opt, q.data(), k.data(), v.data(), nullptr, out.data(), nullptr);
        else if (mode == "recurrent") rr::recurrent_forward<F>(s, opt, q.data(), k.data(), v.data(), nullptr, out.data(), nullptr);
        else rr::chunkwise_forward<F>(s, opt, q.data(), k.data(), v.data(), nullptr, out.data(), nullptr);
    };
    auto bwd = [&] {
        if (mode == "naive") rr::naive_backward<F>(s, opt, q.data(), k.data(), v.data(), nullptr, dO.data(), nullptr, dq.data(), dk.data(), dv.data(), nullptr);
        else if (mode == "parallel") rr::parallel_backward<F>(s, opt, q.data(), k.data(), v.data(), nullptr, dO.data(), nullptr, dq.data(), dk.data(), dv.data(), nullptr);
        else if (mode == "recurrent") rr::recurrent_backward<F>(s, opt, q.data(), k.data(), v.data(), nullptr, dO.data(), nullptr, dq.data(), dk.data(), dv.data(), nullptr);
        else rr::chunkwise_backward<F>(s, opt, q.data(), k.data(), v.data(), nullptr, dO.data(), nullptr, dq.data(), dk.data(), dv.data(), nullptr);
    };
    r.peak_extra_bytes = peak_extra_rss([&] { fwd(); bwd(); });
    r.nonfinite = std::max(naive_bad, count_nonfinite(out));
    r.fwd_ms = median_ms(fwd, o.repeats);
    r.fwdbwd_ms = median_ms([&] { fwd(); bwd(); }, o.repeats);
    return r;
}

#define RETRO_CUDA_CALL(fn, ...) \
    (mode == "parallel" ? rr::cuda::parallel_##fn(__VA_ARGS__) : mode == "recurrent" ? rr::cuda::recurrent_##fn(__VA_ARGS__) : rr::cuda::chunkwise_##fn(__VA_ARGS__))

// Device copies of host float arrays as X (fp32 or bf16), uploaded on `stream`, freed with the owner.
template <typename X>
struct DeviceArrays {
    CudaBuffers bufs;
    explicit DeviceArrays(CudaStream s) : bufs(s) {}
    X* upload(const std::vector<float>& host) {
        std::vector<X> y(host.size());
        parallel_ranges(static_cast<std::int64_t>(host.size()), [&](std::int64_t b, std::int64_t e, int) {
            for (std::int64_t i = b; i < e; ++i) {
                if constexpr (std::is_same_v<X, float>) y[i] = host[i];
                else y[i] = to_bf16(host[i]);
            }
        });
        X* d = static_cast<X*>(bufs.alloc(std::max<std::size_t>(y.size(), 1) * sizeof(X)));
        cuda_copy_to_device(d, y.data(), y.size() * sizeof(X), bufs.stream());
        return d;
    }
};

template <typename X>
Row bench_cuda(const std::string& mode, const std::string& dtype, const rr::Shape& s, const RetentionBenchOptions& o) {
    Row r{mode, dtype, s};
    const auto nk = static_cast<std::size_t>(s.B * s.T * s.H * s.K), nv = static_cast<std::size_t>(s.B * s.T * s.H * s.V);
    const std::size_t used0 = cuda_used_bytes();
    const CudaStreamOwner stream;
    const CudaStream st = stream.get();
    DeviceArrays<X> dev(st);
    auto upload = [&](const std::vector<float>& host) { return dev.upload(host); };
    X *q = upload(random_floats(nk, 1)), *k = upload(random_floats(nk, 2)), *v = upload(random_floats(nv, 3)),
      *dO = upload(random_floats(nv, 4)), *out = upload(std::vector<float>(nv)), *dq = upload(std::vector<float>(nk)),
      *dk = upload(std::vector<float>(nk)), *dv = upload(std::vector<float>(nv));
    r.buffer_bytes = static_cast<std::int64_t>((4 * nk + 4 * nv) * sizeof(X));
    rr::Options opt;
    opt.chunk_size = o.chunk_size;
    auto fwd = [&] { RETRO_CUDA_CALL(forward, s, opt, q, k, v, nullptr, out, nullptr, st); cuda_stream_synchronize(st); };
    auto fb = [&] {
        RETRO_CUDA_CALL(forward, s, opt, q, k, v, nullptr, out, nullptr, st);
        RETRO_CUDA_CALL(backward, s, opt, q, k, v, nullptr, dO, nullptr, dq, dk, dv, nullptr, st);
        cuda_stream_synchronize(st);
    };
    r.fwd_ms = median_ms(fwd, o.repeats);
    r.fwdbwd_ms = median_ms(fb, o.repeats);
    r.peak_extra_bytes = static_cast<std::int64_t>(cuda_used_bytes() - used0) - r.buffer_bytes;
    std::vector<X> host(nv);
    cuda_copy_to_host(host.data(), out, nv * sizeof(X), st);
    for (const auto& e : host) {
        float f;
        if constexpr (std::is_same_v<X, float>) f = e;
        else f = from_bf16(e);
        r.nonfinite += std::isfinite(f) ? 0 : 1;
    }
    return r;
}

// One decode step's shapes: a single token (T = 1) of s0, its q/k and v sizes, and the state size.
struct DecodeSizes {
    rr::Shape one;
    std::size_t nk1, nv1, ns;
    explicit DecodeSizes(const rr::Shape& s0)
        : one{s0.B, 1, s0.H, s0.K, s0.V},
          nk1(static_cast<std::size_t>(s0.B * s0.H * s0.K)),
          nv1(static_cast<std::size_t>(s0.B * s0.H * s0.V)),
          ns(static_cast<std::size_t>(s0.B * s0.H * s0.K * s0.V)) {}
};

// The GPU twin of decode_cpu: one recurrent step (T = 1 from a state) vs parallel_forward over the whole prefix
// (as fla's peer times parallel_retention and keeps the last row); the latter only up to kDecodeParallelMaxT,
// since the CUDA parallel mode is O(T^2) (null above it). Timed with CUDA events as fla's peer times its rows
// (cuda_event_median_ms: the device's time, without the host's launch and wake-up latency of a few µs, which a
// host timer around launch + synchronize adds to a kernel of a few µs). Two more views of the recurrent step:
// chained, kDecodeChain steps back to back (the state passed from one to the next, as a decode loop does), per step;
// and sync, the host's wall time of one launch + synchronize (what a loop that needs each step's output on the
// host waits).
constexpr std::int64_t kDecodeParallelMaxT = 4096;
constexpr int kDecodeChain = 64;
template <typename X>
json decode_cuda(const rr::Shape& s0, int repeats) {
    const DecodeSizes z(s0);
    const rr::Shape& one = z.one;
    const std::size_t nk1 = z.nk1, nv1 = z.nv1, ns = z.ns;
    rr::Options opt;
    const CudaStreamOwner stream;
    const CudaStream st = stream.get();
    DeviceArrays<X> dev(st);
    DeviceArrays<float> states(st);
    X *q1 = dev.upload(random_floats(nk1, 5)), *k1 = dev.upload(random_floats(nk1, 6)), *v1 = dev.upload(random_floats(nv1, 7)),
      *o1 = dev.upload(std::vector<float>(nv1));
    // the state decays (gamma < 1) and takes bounded k v^T terms: random inputs stay finite over any chain
    float *h = states.upload(random_floats(ns, 8)), *h2 = states.upload(std::vector<float>(ns));
    auto step = [&](const float* from, float* to) { rr::cuda::recurrent_forward<X>(one, opt, q1, k1, v1, from, o1, to, st); };
    const double rec = cuda_event_median_ms([&] { step(h, h2); }, st, repeats * 5);
    const double chained = cuda_event_median_ms([&] {
        for (int i = 0; i < kDecodeChain; i += 2) {
            step(h, h2);
            step(h2, h);
        }
    }, st, repeats) / kDecodeChain;
    const double sync = median_ms([&] {
        step(h, h2);
        cuda_stream_synchronize(st);
    }, repeats * 5);
    json par = nullptr;
    if (s0.T <= kDecodeParallelMaxT) {
        const auto nk = nk1 * static_cast<std::size_t>(s0.T), nv = nv1 * static_cast<std::size_t>(s0.T);
        X *qp = dev.upload(random_floats(nk, 9)), *kp = dev.upload(random_floats(nk, 10)), *vp = dev.upload(random_floats(nv, 11)),
          *op = dev.upload(std::vector<float>(nv));
        par = cuda_event_median_ms([&] { rr::cuda::parallel_forward<X>(s0, opt, qp, kp, vp, nullptr, op, nullptr, st); }, st,
                                   repeats);
    }
    return {{"T", s0.T}, {"recurrent_step_ms", rec}, {"recurrent_step_chained_ms", chained},
            {"recurrent_step_sync_ms", sync}, {"parallel_prefix_ms", par}};
}

// One decode step after a prefix of T tokens: recurrent (state update) vs parallel (attend over the prefix).
template <typename F>
json decode_cpu(const rr::Shape& s0, int repeats) {
    const DecodeSizes z(s0);
    const rr::Shape& one = z.one;
    const std::size_t nk1 = z.nk1, nv1 = z.nv1, ns = z.ns;
    std::vector<F> q1(nk1, F(0.1)), k1(nk1, F(0.1)), v1(nv1, F(0.1)), o1(nv1), h(ns, F(0.01)), h2(ns);
    std::vector<F> K(static_cast<std::size_t>(s0.T) * nk1, F(0.1)), Vv(static_cast<std::size_t>(s0.T) * nv1, F(0.1));
    rr::Options opt;
    const double rec = median_ms([&] { rr::recurrent_forward<F>(one, opt, q1.data(), k1.data(), v1.data(), h.data(), o1.data(), h2.data()); }, repeats * 5);
    const double par = median_ms([&] { rr::parallel_last_row<F>(s0, opt, q1.data(), K.data(), Vv.data(), nullptr, o1.data()); }, repeats * 5);
    return {{"T", s0.T}, {"recurrent_step_ms", rec}, {"parallel_prefix_ms", par}};
}

json row_json(const Row& r, const std::string& device, std::int64_t C) {
    auto num = [](double x) { return std::isnan(x) ? json(nullptr) : json(x); };
    return {{"mode", r.mode}, {"device", device}, {"dtype", r.dtype}, {"B", r.s.B}, {"T", r.s.T}, {"H", r.s.H},
            {"K", r.s.K}, {"V", r.s.V}, {"chunk_size", r.mode == "chunkwise" ? json(C) : json(nullptr)},
            {"fwd_ms", num(r.fwd_ms)}, {"fwdbwd_ms", num(r.fwdbwd_ms)}, {"buffer_bytes", r.buffer_bytes},
            {"peak_extra_bytes", r.peak_extra_bytes}, {"nonfinite", r.nonfinite}, {"finite", r.nonfinite == 0},
            {"gflops", num(r.gflops)}, {"sgemm_ratio", num(r.ratio)}, {"bandwidth_bound_ms", num(r.bound_ms)},
            {"of_bandwidth_bound", num(r.of_bound)}};
}

}  // namespace

void run_retention_bench(const RetentionBenchOptions& o, const std::string& command_line) {
    const bool gpu = o.device == "cuda";
    if (!gpu && o.device != "cpu") user_error_in("--device", "expected cpu or cuda, got '" + o.device + "'");
    if (gpu) cuda_require("--device cuda", "retro-bench");   // the CUDA calls below compile away without CUDA
    bench_refuse_outputs_over_inputs({{"--json", o.json}, {"--plot", o.plot}}, {});
    if (!o.plot.empty()) gnuplot_missing_warned(o.plot);   // said before the timing, not only at its end
    for (const auto& m : o.modes)
        if (m != "naive" && m != "parallel" && m != "recurrent" && m != "chunkwise")
            user_error_in("--modes", "unknown mode '" + m + "' (expected naive, parallel, recurrent, chunkwise)");
    if (o.repeats < 1) user_error_in("--repeats", "must be >= 1");
    for (const auto& [name, v] : {std::pair<const char*, std::int64_t>{"--B", o.B}, {"--H", o.H}, {"--K", o.K}, {"--V", o.V}})
        if (v < 0) user_error_in(name, cat(v, " is not a size"), "give 0 for the device's default");
    for (std::int64_t t : o.T)
        if (t < 1) user_error_in("--T", cat(t, " is not a sequence length"));
    if (o.chunk_size < 1) user_error_in("--chunk-size", cat(o.chunk_size, " is not a chunk size"));
    rr::Shape base{o.B ? o.B : (gpu ? 8 : 4), 1, o.H ? o.H : (gpu ? 32 : 8), o.K ? o.K : 128, o.V ? o.V : 128};
    std::vector<std::int64_t> Ts = !o.T.empty() ? o.T
                                   : gpu ? std::vector<std::int64_t>{1024, 2048, 4096, 8192, 16384}
                                         : std::vector<std::int64_t>{256, 512, 1024, 2048, 4096};
    std::vector<std::string> dtypes = !o.dtypes.empty() ? o.dtypes : std::vector<std::string>{gpu ? "bf16" : "fp32"};
    for (const auto& d : dtypes)
        if (gpu ? (d != "fp32" && d != "bf16") : (d != "fp32" && d != "fp64"))
            user_error_in("--dtype", "'" + d + "' is not available on " + o.device + (gpu ? " (fp32, bf16)" : " (fp32, fp64)"),
                          gpu ? "give fp32 or bf16 (fp64 runs on --device cpu)" : "give fp32 or fp64 (bf16 runs on --device cuda)");
    if (!gpu) {   // the largest row's host memory, before anything is allocated: the OOM killer otherwise
        double need = 0;
        std::int64_t worst_T = 0;
        const bool naive = std::find(o.modes.begin(), o.modes.end(), "naive") != o.modes.end();
        for (const auto& d : dtypes)
            for (std::int64_t T : Ts) {
                const double bytes_per = d == "fp64" ? 8.0 : 4.0;
                // q, k, dq, dk (K wide) and v, dO, out, dv (V wide), plus the random fp32 draws being cast
                double bytes = static_cast<double>(base.B) * T * base.H * (base.K + base.V) * (4 * bytes_per + 4.0);
                if (naive && T <= o.naive_max_T)   // naive's backward: D, A, dP (T x T) on every thread at once
                    bytes += 3.0 * bytes_per * static_cast<double>(T) * T * std::min<double>(thread_count(), base.B * base.H);
                if (bytes > need) need = bytes, worst_T = T;
            }
        memory_require("--T, --B, --H, --K and --V", need, cat("T = ", worst_T, " at B = ", base.B, ", H = ", base.H, ", K = ", base.K,
                                                              ", V = ", base.V),
                       "give smaller --T, --B, --H, --K or --V (or a smaller --naive-max-T)");
    }
    if (!gpu && o.T.empty() && !o.B && !o.H)
        log_info("CPU defaults are smaller than fla's GPU shapes (B=8, H=32, T up to 16384): B=4, H=8, K=V=128, T=256..4096");
    const std::string device = gpu ? "cuda: " + cuda_device_name() : "cpu: " + cpu_model() + " (" + std::to_string(thread_count()) + " threads)";
    log_info(gpu ? std::string("measuring cuBLAS sgemm (8192^3, fp32, no TF32)")
                 : "measuring sgemm (2048^3, " + std::to_string(thread_count()) + " threads)");
    double sgemm = 0;
    if (!gpu) sgemm = sgemm_gflops();
    else if constexpr (kCudaBuilt) sgemm = cuda_sgemm_gflops(8192, 8192, 8192, CudaStreamOwner().get());
    log_info("sgemm: " + fmt(sgemm, 1) + " GFLOP/s");

    log_info(gpu ? std::string("measuring the device's copy bandwidth (1 GiB device to device)")
                 : "measuring the copy bandwidth (256 MiB, " + std::to_string(thread_count()) + " threads)");
    double copy_gbps = 0;
    if (!gpu) copy_gbps = memcpy_gbps();
    else if constexpr (kCudaBuilt) copy_gbps = cuda_copy_gbps(std::size_t(1) << 30, CudaStreamOwner().get());
    log_info("copy: " + fmt(copy_gbps, 1) + " GB/s (read + written)");

    std::vector<Row> rows;
    json decode = json::array(), crossover = json::array();
    for (const auto& dtype : dtypes)
        for (std::int64_t T : Ts) {
            rr::Shape s = base;
            s.T = T;
            for (const auto& mode : o.modes) {
                if (mode == "naive" && (gpu || T > o.naive_max_T)) {
                    log_info("naive " + dtype + " T=" + std::to_string(T) + ": skipped (" +
                             (gpu ? "no CUDA naive; naive is the CPU reference" : "T > --naive-max-T " + std::to_string(o.naive_max_T)) + ")");
                    continue;
                }
                log_info(mode + " " + dtype + " T=" + std::to_string(T));
                Row r{mode, dtype, s};
                if (!gpu) r = dtype == "fp64" ? bench_cpu<double>(mode, dtype, s, o) : bench_cpu<float>(mode, dtype, s, o);
                else if constexpr (kCudaBuilt) r = dtype == "bf16" ? bench_cuda<bf16>(mode, dtype, s, o) : bench_cuda<float>(mode, dtype, s, o);
                if (mode == "chunkwise") {
                    r.gflops = chunkwise_flops(s, o.chunk_size) / (r.fwd_ms * 1e6);
                    r.ratio = r.gflops / sgemm;
                    r.bound_ms = qkvo_bytes(s, dtype) / (copy_gbps * 1e9) * 1e3;
                    r.of_bound = r.bound_ms / r.fwd_ms;
                }
                log_info("  " + mode + " " + dtype + " T=" + std::to_string(T) + ": fwd " + fmt(r.fwd_ms, 3) + " ms, fwd+bwd " +
                         fmt(r.fwdbwd_ms, 3) + " ms");
                if (r.nonfinite) log_warn(mode + " T=" + std::to_string(T) + ": output has " + std::to_string(r.nonfinite) + " non-finite values");
                rows.push_back(r);
            }
            if (std::count(o.modes.begin(), o.modes.end(), "recurrent")) {
                if (!gpu) decode.push_back(dtype == "fp64" ? decode_cpu<double>(s, o.repeats) : decode_cpu<float>(s, o.repeats));
                else if constexpr (kCudaBuilt) decode.push_back(dtype == "bf16" ? decode_cuda<bf16>(s, o.repeats) : decode_cuda<float>(s, o.repeats));
                decode.back()["dtype"] = dtype;
            }
        }
    const bool both = std::count(o.modes.begin(), o.modes.end(), "parallel") && std::count(o.modes.begin(), o.modes.end(), "chunkwise");
    for (const auto& dtype : both ? dtypes : std::vector<std::string>{}) {   // first T where chunkwise fwd beats parallel
        json cross = nullptr;
        std::map<std::int64_t, double> par, chk;
        for (const auto& r : rows) {
            if (r.dtype != dtype) continue;
            if (r.mode == "parallel") par[r.s.T] = r.fwd_ms;
            if (r.mode == "chunkwise") chk[r.s.T] = r.fwd_ms;
        }
        for (auto [T, ms] : chk)
            if (par.count(T) && par[T] > 0 && ms < par[T]) { cross = T; break; }
        crossover.push_back({{"dtype", dtype}, {"T", cross}, {"B", base.B}, {"H", base.H}, {"K", base.K}, {"V", base.V}});
    }

    // the fastest mode at each dtype and T, forward and forward + backward (rows with non-finite output excluded)
    json fastest = json::array();
    std::map<std::pair<std::string, std::int64_t>, std::pair<const Row*, const Row*>> best;
    for (const auto& r : rows) {
        if (r.nonfinite) continue;
        auto& [f, fb] = best[{r.dtype, r.s.T}];
        if (!std::isnan(r.fwd_ms) && (!f || r.fwd_ms < f->fwd_ms)) f = &r;
        if (!std::isnan(r.fwdbwd_ms) && (!fb || r.fwdbwd_ms < fb->fwdbwd_ms)) fb = &r;
    }
    for (const auto& [key, b] : best)
        fastest.push_back({{"dtype", key.first}, {"T", key.second},
                           {"fwd_mode", b.first ? json(b.first->mode) : json(nullptr)},
                           {"fwd_ms", b.first ? json(b.first->fwd_ms) : json(nullptr)},
                           {"fwdbwd_mode", b.second ? json(b.second->mode) : json(nullptr)},
                           {"fwdbwd_ms", b.second ? json(b.second->fwdbwd_ms) : json(nullptr)}});

    std::vector<std::vector<std::string>> table{{"mode", "dtype", "B", "T", "H", "K", "V", "fwd_ms", "fwd+bwd_ms", "peak_MiB",
                                                 "output", "GFLOP/s", "vs_sgemm", "of_bw_bound"}};
    for (const auto& r : rows)
        table.push_back({r.mode, r.dtype, std::to_string(r.s.B), std::to_string(r.s.T), std::to_string(r.s.H),
                         std::to_string(r.s.K), std::to_string(r.s.V), fmt(r.fwd_ms), fmt(r.fwdbwd_ms),
                         r.peak_extra_bytes < 0 ? "-" : fmt((r.peak_extra_bytes + r.buffer_bytes) / 1048576.0, 1),
                         r.nonfinite ? "NaN(" + std::to_string(r.nonfinite) + ")" : "ok", fmt(r.gflops, 1), fmt(r.ratio, 2),
                         fmt(r.of_bound, 2)});
    std::cout << "# " << device << ", commit " << RETROKIT_GIT_COMMIT << ", sgemm " << fmt(sgemm, 1) << " GFLOP/s, copy "
              << fmt(copy_gbps, 1) << " GB/s, chunk " << o.chunk_size
              << " (of_bw_bound: q, k, v read and o written at the copy bandwidth / the chunkwise forward)\n"
              << format_table(table);
    if (!fastest.empty()) {
        std::vector<std::vector<std::string>> ft{{"fastest", "dtype", "T", "fwd", "fwd_ms", "fwd+bwd", "fwd+bwd_ms"}};
        for (const auto& f : fastest)
            ft.push_back({"mode", f["dtype"], std::to_string(f["T"].get<std::int64_t>()),
                          f["fwd_mode"].is_null() ? "-" : f["fwd_mode"].get<std::string>(),
                          f["fwd_ms"].is_null() ? "-" : fmt(f["fwd_ms"].get<double>()),
                          f["fwdbwd_mode"].is_null() ? "-" : f["fwdbwd_mode"].get<std::string>(),
                          f["fwdbwd_ms"].is_null() ? "-" : fmt(f["fwdbwd_ms"].get<double>())});
        std::cout << format_table(ft);
    }
    if (!decode.empty()) {
        std::vector<std::vector<std::string>> dt{{"decode", "dtype", "T", "recurrent_step_ms", "chained_ms", "sync_ms",
                                                  "parallel_prefix_ms"}};
        // parallel_prefix_ms is null on the GPU above kDecodeParallelMaxT (the step above failed on it before
        // 2026-11-27); chained and sync exist on the GPU only (decode_cuda)
        auto ms_or_dash = [](const json& d, const char* key) {
            return !d.contains(key) || d[key].is_null() ? std::string("-") : fmt(d[key].get<double>(), 4);
        };
        for (const auto& d : decode)
            dt.push_back({"step", d["dtype"], std::to_string(d["T"].get<std::int64_t>()), ms_or_dash(d, "recurrent_step_ms"),
                          ms_or_dash(d, "recurrent_step_chained_ms"), ms_or_dash(d, "recurrent_step_sync_ms"),
                          ms_or_dash(d, "parallel_prefix_ms")});
        std::cout << format_table(dt);
    }
    for (const auto& c : crossover)
        std::cout << "crossover " << c["dtype"].get<std::string>() << ": chunkwise forward beats parallel from T="
                  << (c["T"].is_null() ? std::string("never (in this T list)") : std::to_string(c["T"].get<std::int64_t>())) << "\n";

    json out = stamp("retro-bench retention", command_line);
    out["device"] = device;
    out["threads"] = thread_count();
    out["sgemm_gflops"] = sgemm;
    out["copy_gbps"] = copy_gbps;
    out["fastest"] = fastest;
    out["chunk_size"] = o.chunk_size;
    out["repeats"] = o.repeats;
    out["rows"] = json::array();
    for (const auto& r : rows) out["rows"].push_back(row_json(r, gpu ? "cuda" : "cpu", o.chunk_size));
    out["decode"] = decode;
    out["crossover"] = crossover;
    if (!o.json.empty()) bench_json_write(o.json, out, "retro-bench retention", command_line);   // checked and whole, or nothing
    if (!o.plot.empty()) {
        std::ostringstream data, script;
        script << "set logscale xy\nset xlabel 'T'\nset ylabel 'forward ms'\nset key left top\nset title '" << device << "'\nplot ";
        int idx = 0;
        for (const auto& dtype : dtypes)
            for (const auto& mode : o.modes) {
                bool any = false;
                for (const auto& r : rows)
                    if (r.mode == mode && r.dtype == dtype && !std::isnan(r.fwd_ms)) {
                        data << r.s.T << " " << r.fwd_ms << "\n";
                        any = true;
                    }
                if (!any) continue;
                data << "\n\n";
                script << (idx ? ", " : "") << "datafile index " << idx << " with linespoints title '" << mode << " " << dtype << "'";
                ++idx;
            }
        script << "\n";
        if (idx && gnuplot_png(o.plot, script.str(), data.str())) log_info("wrote " + o.plot);
    }
}

}  // namespace retro::bench
