// Implementation of train_bench.h: the FLOP formula, random batches, timed steps at each thread count,
// the peer (tests/peers/rp_train.py via popen) and the table / JSON.
#include "bench/train_bench.h"

#include "bench/side_by_side.h"

#include <cblas.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <random>

#include "bench/bench_util.h"
#include "bench/op_profile.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/heap.h"
#include "core/shipped_data.h"
#include "core/log.h"
#include "core/shell_quote.h"
#include "core/threads.h"
#include "core/cuda_device.h"
#include "model/backend_model.h"
#include "model/params.h"
#include "model/retro.h"
#include "nn/nn_backend_cuda.h"
#include "nn/nn_backend_host.h"
#include "nn/nn_backend_profiler.h"
#include "train/adamw.h"
#include "core/memory_budget.h"
#include "train/train_memory.h"

namespace retro::bench {

namespace fs = std::filesystem;

RetroConfig train_bench_demo_config() {
    static const char* demo = R"({"num_tokens": 8000, "max_seq_len": 256, "enc_dim": 128, "enc_depth": 2,
        "enc_cross_attn_layers": [1], "dec_dim": 128, "dec_depth": 4, "dec_cross_attn_layers": [2, 4], "heads": 8,
        "dim_head": 32, "chunk_size": 32, "pad_id": 0, "num_neighbours": 2})";
    return RetroConfig::from_json(nlohmann::json::parse(demo), "built-in demo config");
}

// Random ids in [1, V): no pad, so every label counts and no neighbour is masked.
RetroBatch train_bench_random_batch(const RetroConfig& c, std::int64_t B, std::int64_t n, bool retrieval,
                                    std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<std::int32_t> id(1, static_cast<std::int32_t>(c.num_tokens - 1));
    RetroBatch b;
    b.B = B;
    b.n = n;
    b.seq.resize(static_cast<std::size_t>(B * (n + 1)));
    for (auto& t : b.seq) t = id(rng);
    if (retrieval) {
        b.k = c.num_neighbours;
        b.r = c.retrieved_len();
        b.retrieved.resize(static_cast<std::size_t>(B * (n / c.chunk_size) * b.k * b.r));
        for (auto& t : b.retrieved) t = id(rng);
    }
    return b;
}

RetroConfig train_bench_config(const TrainBenchOptions& o, std::int64_t& n) {
    const RetroConfig c = o.config.empty() ? train_bench_demo_config() : RetroConfig::load(o.config);
    c.validate(o.config.empty() ? "built-in demo config" : o.config);
    n = o.seq_len > 0 ? o.seq_len : c.max_seq_len;
    if (n > c.max_seq_len)
        user_error_in("--seq-len", cat(n, " exceeds the config's max_seq_len ", c.max_seq_len));
    if (o.seq_len < 0 || n % c.chunk_size != 0)
        user_error_in("--seq-len", cat(o.seq_len, " is not a positive multiple of the config's chunk_size ", c.chunk_size),
                      "give 0 for the config's max_seq_len");
    if (o.batch < 1) user_error_in("--batch", cat(o.batch, " is not a number of sequences"), "give 1 or more");
    if (o.steps < 1) user_error_in("--steps", cat(o.steps, " is not a number of timed steps"), "give 1 or more");
    if (o.warmup < 0) user_error_in("--warmup", cat(o.warmup, " is not a number of steps"), "give 0 for none");
    return c;
}

namespace {

double cpu_seconds() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

std::string fmt(double v, const char* f = "%.1f") {
    char buf[64];
    std::snprintf(buf, sizeof buf, f, v);
    return buf;
}

// RetroKit at `threads`: median wall and CPU seconds of `steps` timed steps after `warmup` untimed ones.
nlohmann::json time_retrokit(const RetroConfig& c, const RetroBatch& batch, const TrainBenchOptions& o) {
    RetroModel<float> model(c);
    params_init(model.params(), model.layout(), o.seed);
    AdamW<float> opt(model.layout(), AdamWConfig{});
    std::vector<double> losses, wall, cpu;
    auto step = [&] {
        model.zero_grad();
        losses.push_back(static_cast<double>(model.forward(batch)));
        model.backward();
        opt.step(model.params(), model.grads(), opt.config().lr);
    };
    for (int i = 0; i < o.warmup; i++) step();
    for (int i = 0; i < o.steps; i++) {
        const double c0 = cpu_seconds();
        const auto t0 = std::chrono::steady_clock::now();
        step();
        wall.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        cpu.push_back(cpu_seconds() - c0);
    }
    const double tokens = double(batch.B * batch.n), secs = median(wall), cpu_secs = median(cpu);
    return {{"impl", "retrokit"},           {"threads", thread_count()},      {"parameters", model.layout().total()},
            {"steps", o.steps},             {"step_seconds", secs},           {"step_seconds_all", wall},
            {"cpu_seconds", cpu_secs},      {"tokens_per_s", tokens / secs},  {"tokens_per_cpu_s", tokens / cpu_secs},
            {"loss_first", losses.front()}, {"loss_last", losses.back()}};
}

// The peer from the working directory's tests/peers/ (a checkout), else the shipped one (core/shipped_data.h).
std::string default_peer_script() {
    const fs::path rel = fs::path("tests") / "peers" / "rp_train.py";
    if (fs::exists(rel)) return rel.string();
    const std::string shipped = shipped_file(ShippedData::kPeers, "rp_train.py", "");
    return shipped.empty() ? rel.string() : shipped;
}

// The peer's JSON line, or {"skipped": reason}.
nlohmann::json run_peer(const TrainBenchOptions& o, const std::string& script, const std::string& config_path,
                        std::int64_t n, int threads, const std::string& extra = "") {
    const std::string cmd = shell_quote(o.python) + " " + shell_quote(script) + " --config " +
                            shell_quote(config_path) + " --batch " + std::to_string(o.batch) + " --seq-len " +
                            std::to_string(n) + " --threads " + std::to_string(threads) + " --steps " +
                            std::to_string(o.steps) + " --warmup " + std::to_string(o.warmup) + " --seed " +
                            std::to_string(o.seed) + (o.no_retrieval ? " --no-retrieval" : "") + extra;
    log_info("peer: " + cmd);
    nlohmann::json r = run_json_command(cmd);
    if (r.is_null())
        return {{"skipped", "the peer printed no JSON result (run it by hand: " + cmd + ")"}};
    return r;
}

// The GPU path (model/backend_model.h on `be`): median wall seconds of `steps` steps (zero_grad, forward, backward,
// AdamW on the backend), each ended by a synchronize, after `warmup` untimed ones.
nlohmann::json time_backend(const RetroConfig& c, const RetroBatch& batch, const TrainBenchOptions& o,
                            nn::NnBackend& be, const std::string& dtype,
                            const std::function<void()>& after_warmup = {}) {
    // bf16 as retro-train's (GEMMs on bf16 inputs + the fused attention), bf16-unfused without the fused kernels,
    // which only the CUDA backend has (the host backend ignores the switch: its row says so)
    const bool bf16 = dtype != "fp32", fused = dtype == "bf16" && be.name() == "cuda";
    be.set_gemm_inputs(bf16 ? nn::NnBackend::GemmInputs::bf16 : nn::NnBackend::GemmInputs::fp32);
    be.set_fused_attention(fused);
    BackendRetroModel model(c, be);
    const std::int64_t P = model.layout().total();
    std::vector<float> host(static_cast<std::size_t>(P));
    params_init(host, model.layout(), o.seed);
    model.upload_params(host);
    AdamW<float> opt(model.layout(), AdamWConfig{});
    nn::BackendBuffer m(be, static_cast<std::size_t>(P) * 4), v(be, static_cast<std::size_t>(P) * 4),
        decay(be, static_cast<std::size_t>(P));
    be.zero(m.get(), static_cast<std::size_t>(P) * 4);
    be.zero(v.get(), static_cast<std::size_t>(P) * 4);
    be.upload(decay.get(), opt.decay_flags().data(), static_cast<std::size_t>(P));
    std::vector<double> losses, wall;
    auto step = [&] {
        model.zero_grad();
        losses.push_back(static_cast<double>(model.forward(batch)));
        model.backward();
        be.adamw_update(model.params(), model.grads(), m.f(), v.f(), static_cast<const std::uint8_t*>(decay.get()), P,
                        opt.next_step_scalars(opt.config().lr));
        be.synchronize();
    };
    for (int i = 0; i < o.warmup; i++) step();
    if (after_warmup) after_warmup();
    for (int i = 0; i < o.steps; i++) {
        const auto t0 = std::chrono::steady_clock::now();
        step();
        wall.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    const double tokens = double(batch.B * batch.n), secs = median(wall);
    be.set_fused_attention(false);
    return {{"impl", "retrokit " + be.name() + (fused ? " bf16 GEMMs + fused attention" : bf16 ? " bf16 GEMMs" : " fp32")},
            {"dtype", dtype},
            {"parameters", P},                           {"steps", o.steps},
            {"step_seconds", secs},                      {"step_seconds_all", wall}, {"tokens_per_s", tokens / secs},
            {"loss_first", losses.front()},              {"loss_last", losses.back()},
            {"arena_bytes", model.arena_bytes()}};
}

// --profile N: N more steps through nn::ProfilingNnBackend (each op between two synchronizes), after one warm-up
// step; prints the ops by time per step and returns them for the JSON.
nlohmann::json profile_backend(const RetroConfig& c, const RetroBatch& batch, const TrainBenchOptions& o,
                               nn::NnBackend& be, const std::string& dtype) {
    nn::ProfilingNnBackend prof(be);
    TrainBenchOptions po = o;
    po.warmup = 1;
    po.steps = o.profile_steps;
    const nlohmann::json row = time_backend(c, batch, po, prof, dtype, [&] { prof.reset(); });
    const OpProfile p = op_profile(prof.timings(), o.profile_steps, "step");
    std::printf("profile, %s: %d steps with each op between two synchronizes: %.1f ms per step inside the ops, "
                "%.1f ms per profiled step (plain steps: the table at the end)\n%s",
                dtype.c_str(), o.profile_steps, p.ms_in_ops, 1e3 * row["step_seconds"].get<double>(), p.table.c_str());
    nlohmann::json out = p.json;
    out["steps"] = o.profile_steps;
    return out;
}

// retro-bench train --device cuda (or host-backend): one RetroKit row on the device, then RETRO-pytorch on the same
// device in fp32 eager mode and under bf16 autocast (--peer), side by side.
nlohmann::json run_train_bench_device(const TrainBenchOptions& o, const std::string& command_line) {
    std::int64_t n = 0;
    const RetroConfig c = train_bench_config(o, n);
    const bool retrieval = !o.no_retrieval && c.first_cca_layer() > 0 && n / c.chunk_size > 0;
    const TrainFlops flops = train_step_flops(c, o.batch, n, retrieval);
    const RetroBatch batch = train_bench_random_batch(c, o.batch, n, retrieval, o.seed);
    if (o.dtypes.empty()) user_error_in("--dtype", "no dtype given", "use fp32, bf16, bf16-unfused or a list of them");
    for (const auto& d : o.dtypes)
        if (d != "fp32" && d != "bf16" && d != "bf16-unfused")
            user_error_in("--dtype", "\"" + d + "\" is not fp32, bf16 or bf16-unfused");
    std::unique_ptr<CudaStreamOwner> stream;
    std::unique_ptr<nn::NnBackend> be;
    std::string device;
    double ref_gflops = 0, peak = 0;   // the device's fp32 GEMM rate (cuBLAS sgemm, no TF32), its dense bf16 peak
    if (o.device == "cuda") {
        cuda_require("--device", "retro-bench train");
        if constexpr (kCudaBuilt) {
            stream = std::make_unique<CudaStreamOwner>();
            be = nn::cuda_nn_backend(stream->get());
            device = cuda_device_name();
            ref_gflops = cuda_sgemm_gflops(4096, 4096, 4096, stream->get());
            peak = cuda_dense_bf16_peak_flops(device);
            // every row's memory before the first runs (as retro-train checks its run's): a row the GPU cannot hold
            // is refused in one line rather than met by an allocation failure halfway through the table
            const std::int64_t P = ParamLayout(c).total();
            for (const auto& d : o.dtypes) {
                be->set_gemm_inputs(d != "fp32" ? nn::NnBackend::GemmInputs::bf16 : nn::NnBackend::GemmInputs::fp32);
                be->set_fused_attention(d == "bf16");
                const auto need = train_device_bytes(c, o.batch, n, batch.k, batch.r, retrieval, 1, P, d != "fp32",
                                                     be.get());
                device_memory_require("--batch", need, cuda_free_bytes(),
                                      "the " + d + " row at " + std::to_string(o.batch) + " x " + std::to_string(n) +
                                          " tokens",
                                      "a smaller --batch, or leave " + d + " out of --dtype");
            }
            be->set_fused_attention(false);
        }
    } else if (o.device == "host-backend") {
        be = std::make_unique<nn::HostNnBackend>();
        device = cpu_model() + " (host backend)";
        ref_gflops = sgemm_gflops();
    } else {
        user_error_in("--device", "\"" + o.device + "\" is not a device", "use cpu or cuda");
    }
    log_info("device " + device + ": sgemm " + fmt(ref_gflops) + " GFLOP/s; timing RetroKit");
    std::vector<nlohmann::json> rows;   // RetroKit's rows (one per dtype), then the peer's
    for (const auto& d : o.dtypes) rows.push_back(time_backend(c, batch, o, *be, d));
    const std::size_t ours = rows.size();
    nlohmann::json profile = nlohmann::json::object();
    if (o.profile_steps > 0)
        for (const auto& d : o.dtypes) profile[d] = profile_backend(c, batch, o, *be, d);
    std::string skipped;
    ScratchPath scratch;   // the config for the peer, in a folder removed even after a Ctrl-C
    if (o.peer) {
        const std::string script = o.peer_script.empty() ? default_peer_script() : o.peer_script;
        scratch.make("train", ".json");
        write_file_atomic(scratch.path(), c.to_json().dump(2) + "\n");
        const std::string dev = o.device == "cuda" ? " --device cuda" : " --device cpu";
        for (const char* autocast : {"none", "bf16"}) {
            nlohmann::json p = run_peer(o, script, scratch.path(), n, thread_count(),
                                        dev + " --autocast " + std::string(autocast));
            if (p.contains("skipped")) {
                skipped = p["skipped"].get<std::string>();
                break;
            }
            rows.push_back(p);
        }
    }
    std::vector<std::vector<std::string>> table{
        {"impl", "step s", "tokens/s", "GFLOP/s", "vs sgemm", "MFU (bf16 peak)", "loss", "note"}};
    nlohmann::json ratios = nlohmann::json::array();
    for (auto& r : rows) {
        const double secs = r["step_seconds"].get<double>(), g = flops.step() / secs / 1e9;
        r["gflops"] = g;
        r["ratio_to_sgemm"] = g / ref_gflops;
        if (peak > 0) r["mfu"] = g * 1e9 / peak;
        std::string note;   // a peer's row: each RetroKit row's tokens/s over the peer's
        for (std::size_t i = 0; &r - rows.data() >= static_cast<std::ptrdiff_t>(ours) && i < ours; i++) {
            const double ratio = rows[i]["tokens_per_s"].get<double>() / r["tokens_per_s"].get<double>();
            note += (note.empty() ? "retrokit/this: " : ", ") + rows[i]["dtype"].get<std::string>() + " " +
                    fmt(ratio, "%.2f") + "x";
            ratios.push_back({{"peer", r["impl"]}, {"retrokit", rows[i]["impl"]}, {"retrokit_dtype", rows[i]["dtype"]},
                              {"tokens_per_s", ratio}});
        }
        table.push_back({r["impl"].get<std::string>(), fmt(secs, "%.4f"), fmt(r["tokens_per_s"].get<double>()), fmt(g),
                         fmt(g / ref_gflops, "%.2f"), peak > 0 ? fmt(100 * g * 1e9 / peak, "%.1f%%") : "n/a",
                         fmt(r["loss_first"].get<double>(), "%.3f"), note});
    }
    nlohmann::json result = {{"stamp", stamp("retro-bench train", command_line)},
                             {"device", {{"name", device}, {"sgemm_gflops", ref_gflops}, {"bf16_peak_flops", peak}}},
                             {"config", c.to_json()},
                             {"config_path", o.config.empty() ? "built-in demo (examples/configs/demo.json)" : o.config},
                             {"shape", {{"batch", o.batch}, {"seq_len", n}, {"tokens_per_step", o.batch * n},
                                        {"retrieval", retrieval}}},
                             {"dtypes", o.dtypes},
                             {"flops", {{"forward", flops.forward()}, {"step", flops.step()}}},
                             {"rows", rows},
                             {"ratios", ratios}};
    if (!skipped.empty()) result["peer_skipped"] = skipped;
    if (!profile.empty()) result["profile"] = profile;
    std::printf("retro-bench train --device %s: %s, %s, %lld parameters, batch %lld x %lld tokens, retrieval %s, "
                "%.2f GFLOP per step\n",
                o.device.c_str(), device.c_str(), result["config_path"].get<std::string>().c_str(),
                static_cast<long long>(rows[0]["parameters"].get<std::int64_t>()), static_cast<long long>(o.batch),
                static_cast<long long>(n), retrieval ? "on" : "off", flops.step() / 1e9);
    std::printf("%s", format_table(table).c_str());
    if (!skipped.empty()) std::printf("peer skipped: %s\n", skipped.c_str());
    std::fflush(stdout);
    if (!o.json.empty()) bench_json_write(o.json, result, "retro-bench train", command_line);
    return result;
}

}  // namespace

nlohmann::json run_train_bench(const TrainBenchOptions& o, const std::string& command_line) {
    heap_keep_freed_memory();   // as retro-train does (core/heap.h)
    bench_refuse_outputs_over_inputs({{"--json", o.json}}, {{"--config", o.config}, {"--peer-script", o.peer_script}});
    if (o.device != "cpu") return run_train_bench_device(o, command_line);
    if (o.dtypes != std::vector<std::string>{"fp32"}) user_error_in("--dtype", "bf16 needs --device cuda");
    if (o.profile_steps > 0) user_error_in("--profile", "times the GPU path's ops", "use it with --device cuda");
    std::int64_t n = 0;
    const RetroConfig c = train_bench_config(o, n);
    const bool retrieval = !o.no_retrieval && c.first_cca_layer() > 0 && n / c.chunk_size > 0;
    // as retro-train refuses a batch that does not fit: before allocating, in one line (not the OOM killer)
    memory_require("--batch", train_memory_bytes(c, o.batch, n, retrieval),
                   cat("training steps of ", o.batch, " sequences of ", n, " tokens"), "a smaller --batch or --seq-len");
    const TrainFlops flops = train_step_flops(c, o.batch, n, retrieval);
    const RetroBatch batch = train_bench_random_batch(c, o.batch, n, retrieval, o.seed);
    std::vector<int> threads = o.threads.empty() ? std::vector<int>{1, hardware_threads()} : o.threads;
    threads.erase(std::unique(threads.begin(), threads.end()), threads.end());

    std::string script, config_path;
    ScratchPath scratch;   // the config for the peer, in a folder removed even after a Ctrl-C
    if (o.peer) {
        script = o.peer_script.empty() ? default_peer_script() : o.peer_script;
        config_path = scratch.make("train", ".json");
        write_file_atomic(config_path, c.to_json().dump(2) + "\n");
    }

    nlohmann::json result = {{"stamp", stamp("retro-bench train", command_line)},
                             {"machine", {{"cpu", cpu_model()}, {"hardware_threads", hardware_threads()}}},
                             {"config", c.to_json()},
                             {"config_path", o.config.empty() ? "built-in demo (examples/configs/demo.json)" : o.config},
                             {"shape",
                              {{"batch", o.batch},
                               {"seq_len", n},
                               {"tokens_per_step", o.batch * n},
                               {"retrieval", retrieval},
                               {"chunks", retrieval ? n / c.chunk_size : 0},
                               {"neighbours", retrieval ? c.num_neighbours : 0},
                               {"retrieved_len", retrieval ? c.retrieved_len() : 0}}},
                             {"dtype", "fp32"},
                             {"flops",
                              {{"linear_forward", flops.linear},
                               {"attention_forward", flops.attention},
                               {"forward", flops.forward()},
                               {"step", flops.step()},
                               {"formula", "step = 3 * forward matmul FLOPs (lib/bench/train_bench.h)"}}}};
    std::vector<std::vector<std::string>> table{
        {"threads", "impl", "step s", "tokens/s", "tokens/cpu-s", "GFLOP/s", "vs sgemm", "loss", "note"}};
    nlohmann::json rows = nlohmann::json::array(), ratios = nlohmann::json::array();
    std::string skipped;
    for (int t : threads) {
        set_thread_count(t);
        openblas_set_num_threads(t);
        const double sg = sgemm_gflops();
        log_info("threads " + std::to_string(t) + ": sgemm " + fmt(sg) + " GFLOP/s; timing RetroKit");
        std::vector<nlohmann::json> row_set{time_retrokit(c, batch, o)};
        if (o.peer && skipped.empty()) {
            nlohmann::json p = run_peer(o, script, config_path, n, t);
            if (p.contains("skipped"))
                skipped = p["skipped"].get<std::string>();
            else
                row_set.push_back(p);
        }
        for (auto& r : row_set) {
            const double secs = r["step_seconds"].get<double>(), g = flops.step() / secs / 1e9;
            r["threads"] = t;
            r["gflops"] = g;
            r["sgemm_gflops"] = sg;
            r["ratio_to_sgemm"] = g / sg;
            table.push_back({std::to_string(t), r["impl"].get<std::string>(), fmt(secs, "%.3f"),
                             fmt(r["tokens_per_s"].get<double>()), fmt(r["tokens_per_cpu_s"].get<double>()), fmt(g),
                             fmt(g / sg, "%.2f"), fmt(r["loss_first"].get<double>(), "%.3f"), ""});
            rows.push_back(r);
        }
        if (row_set.size() == 2) {
            const auto &a = row_set[0], &b = row_set[1];
            const double ratio = a["tokens_per_s"].get<double>() / b["tokens_per_s"].get<double>();
            const double cpu_ratio = a["tokens_per_cpu_s"].get<double>() / b["tokens_per_cpu_s"].get<double>();
            table.back()[8] = "retrokit/peer = " + fmt(ratio, "%.2f") + "x";
            ratios.push_back({{"threads", t}, {"tokens_per_s", ratio}, {"tokens_per_cpu_s", cpu_ratio}});
            if (b.value("parameters", std::int64_t(0)) != a["parameters"].get<std::int64_t>())
                log_warn(cat("the peer's model has ", b.value("parameters", std::int64_t(0)),
                             " parameters, RetroKit's ", a["parameters"].get<std::int64_t>(), ": not the same model"));
        }
    }
    result["rows"] = rows;
    if (o.peer) {
        if (!skipped.empty()) result["peer_skipped"] = skipped;
        result["ratios"] = ratios;
    }
    const std::string retrieval_note =
        retrieval ? cat("on (k ", c.num_neighbours, ", r ", c.retrieved_len(), ")") : std::string("off");
    std::printf("retro-bench train: %s, %s, %lld parameters, batch %lld x %lld tokens, retrieval %s, %.2f GFLOP "
                "per step\n",
                cpu_model().c_str(), result["config_path"].get<std::string>().c_str(),
                static_cast<long long>(rows[0]["parameters"].get<std::int64_t>()), static_cast<long long>(o.batch),
                static_cast<long long>(n), retrieval_note.c_str(), flops.step() / 1e9);
    std::printf("%s", format_table(table).c_str());
    for (const auto& r : ratios)
        std::printf("retrokit / RETRO-pytorch at %d thread(s): %.2fx tokens/s (wall), %.2fx per CPU-second\n",
                    r["threads"].get<int>(), r["tokens_per_s"].get<double>(), r["tokens_per_cpu_s"].get<double>());
    if (!skipped.empty()) std::printf("peer skipped: %s\n", skipped.c_str());
    std::fflush(stdout);
    if (!o.json.empty()) bench_json_write(o.json, result, "retro-bench train", command_line);
    return result;
}

}  // namespace retro::bench
