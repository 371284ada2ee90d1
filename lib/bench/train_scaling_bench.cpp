// Implementation of train_scaling_bench.h: the parent (one launch per rank count, the table, the all-reduce
// model fit) and the worker (timed data-parallel steps and an all-reduce sweep on every rank).
#include "bench/train_scaling_bench.h"

#include <cblas.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "bench/bench_util.h"
#include "core/atomic_file.h"
#include "core/distributed.h"
#include "core/error.h"
#include "core/log.h"
#include "core/scratch_dir.h"
#include "core/shell_quote.h"
#include "core/threads.h"
#include "model/params.h"
#include "train/adamw.h"

namespace retro::bench {

namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;


double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
}

std::string fmt(double v, const char* f = "%.3f") {
    char buf[64];
    std::snprintf(buf, sizeof buf, f, v);
    return buf;
}

// The slowest rank's value (what the step waits for): the maximum over ranks.
double max_over_ranks(Distributed& d, double v) {
    const auto all = d.allgather(std::vector<double>{v});
    return *std::max_element(all.begin(), all.end());
}

void reduce(Distributed& d, const std::string& mode, std::vector<float>& g) {
    if (mode == "deterministic")
        d.ordered_sum({g.data()}, g.data(), static_cast<std::int64_t>(g.size()));
    else
        d.allreduce_sum(g.data(), static_cast<std::int64_t>(g.size()));
}

// Median seconds of the all-reduce of `floats` elements, max over ranks, at sizes 4^k * 256 up to the gradient.
nlohmann::json allreduce_sweep(Distributed& d, const std::string& mode, std::int64_t gradient_floats) {
    nlohmann::json rows = nlohmann::json::array();
    std::vector<std::int64_t> sizes;
    for (std::int64_t f = 256; f < gradient_floats; f *= 4) sizes.push_back(f);
    sizes.push_back(gradient_floats);
    for (std::int64_t f : sizes) {
        std::vector<float> buf(static_cast<std::size_t>(f), 1.0f);
        std::vector<double> t;
        const int repeats = f < (1 << 20) ? 20 : 5;
        reduce(d, mode, buf);   // warm-up
        for (int r = 0; r < repeats; r++) {
            d.barrier();
            const auto t0 = Clock::now();
            reduce(d, mode, buf);
            t.push_back(max_over_ranks(d, seconds_since(t0)));
        }
        rows.push_back({{"bytes", f * 4}, {"seconds", median(t)}});
    }
    return rows;
}

std::string self_exe() {
    std::error_code ec;
    const fs::path p = fs::read_symlink("/proc/self/exe", ec);
    if (ec) user_error_in("retro-bench", "cannot find its own executable (/proc/self/exe) to relaunch under the launcher");
    return p.string();
}

std::string worker_command(const TrainScalingOptions& o, int n, int threads, const std::string& out) {
    std::string launcher = o.launcher;
    const auto at = launcher.find("{n}");
    if (at == std::string::npos) user_error_in("--launcher", "'" + o.launcher + "' has no {n} for the rank count");
    launcher.replace(at, 3, std::to_string(n));
    const TrainBenchOptions& s = o.step;
    std::string cmd = launcher + " " + shell_quote(self_exe()) + " train --rank-worker " + shell_quote(out) +
                      " --batch " + std::to_string(s.batch) + " --seq-len " + std::to_string(s.seq_len) + " --steps " +
                      std::to_string(s.steps) + " --warmup " + std::to_string(s.warmup) + " --seed " +
                      std::to_string(s.seed) + " --threads-per-rank " + std::to_string(threads) + " --reduce " + o.reduce;
    if (!s.config.empty()) cmd += " --config " + shell_quote(s.config);
    if (s.no_retrieval) cmd += " --no-retrieval";
    return cmd;
}

}  // namespace

// alpha from the smallest message (latency-bound), bw from the largest (bandwidth-bound): a least-squares fit over
// all sizes is dominated by the largest ones and gives a meaningless alpha.
nlohmann::json fit_ring_model(const nlohmann::json& sweep, int ranks) {
    if (ranks < 2 || sweep.size() < 2) return nullptr;
    const double s = 2.0 * (ranks - 1) / ranks;
    const double alpha = sweep.front()["seconds"].get<double>();
    const double x = s * sweep.back()["bytes"].get<double>(), t = sweep.back()["seconds"].get<double>();
    // t <= alpha: the largest message took no longer than the smallest (noise of oversubscribed ranks, or a sweep
    // too small to leave the latency), so the sweep cannot part alpha from bw; t = alpha + x / bw with alpha >= 0
    // still gives bw >= x / t
    const bool fits = t > alpha;
    return {{"alpha_seconds", alpha},
            {"bandwidth_bytes_per_s", fits ? x / (t - alpha) : t > 0 ? x / t : 0.0},
            {"bandwidth_is_lower_bound", !fits},
            {"formula", "t = alpha + 2 (N-1)/N * bytes / bandwidth (alpha: smallest size, bandwidth: largest; where the "
                        "largest took no longer than the smallest, bandwidth >= 2 (N-1)/N * bytes / t)"}};
}

void run_train_rank_worker(const TrainScalingOptions& o, const std::string& out) {
    Distributed& d = distributed("retro-bench");
    if (!d.root()) log_set_level(LogLevel::LOG_ERROR);
    const int threads = o.threads_per_rank > 0 ? o.threads_per_rank : 1;
    set_thread_count(threads);
    openblas_set_num_threads(threads);
    std::int64_t n = 0;
    const RetroConfig c = train_bench_config(o.step, n);
    const bool retrieval = !o.step.no_retrieval && c.first_cca_layer() > 0 && n / c.chunk_size > 0;
    const RetroBatch batch = train_bench_random_batch(c, o.step.batch, n, retrieval, o.step.seed + 1000 * d.rank());
    RetroModel<float> model(c);
    params_init(model.params(), model.layout(), o.step.seed);
    AdamW<float> opt(model.layout(), AdamWConfig{});
    std::vector<double> step_s, reduce_s;
    for (int i = 0; i < o.step.warmup + o.step.steps; i++) {
        d.barrier();
        const auto t0 = Clock::now();
        model.zero_grad();
        model.forward(batch);
        model.backward();
        const auto t1 = Clock::now();
        reduce(d, o.reduce, model.grads());
        const double r = seconds_since(t1);
        opt.step(model.params(), model.grads(), opt.config().lr);
        const double s = max_over_ranks(d, seconds_since(t0));
        if (i >= o.step.warmup) {
            step_s.push_back(s);
            reduce_s.push_back(max_over_ranks(d, r));
        }
    }
    const std::int64_t P = model.layout().total();
    const nlohmann::json sweep = d.active() ? allreduce_sweep(d, o.reduce, P) : nlohmann::json::array();
    if (!d.root()) return;
    const double secs = median(step_s);
    const nlohmann::json r = {{"ranks", d.size()},
                              {"threads_per_rank", threads},
                              {"parameters", P},
                              {"gradient_bytes", P * 4},
                              {"step_seconds", secs},
                              {"step_seconds_all", step_s},
                              {"allreduce_seconds", median(reduce_s)},
                              {"tokens_per_s", double(d.size()) * double(o.step.batch * n) / secs},
                              {"allreduce_sweep", sweep},
                              {"allreduce_model", fit_ring_model(sweep, d.size())},
                              {"launcher_env", d.source()}};
    write_file_atomic(out, r.dump(2) + "\n");
}

nlohmann::json run_train_scaling(const TrainScalingOptions& o, const std::string& command_line) {
    if (!kMpiBuilt) user_error_in("--ranks", "retro-bench was built without MPI", "install libopenmpi-dev and rebuild");
    std::vector<int> ranks = o.ranks;
    std::sort(ranks.begin(), ranks.end());
    ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
    if (ranks.empty() || ranks.front() < 1) user_error_in("--ranks", "give rank counts >= 1, e.g. 1,2");
    if (o.reduce != "fast" && o.reduce != "deterministic")
        user_error_in("--reduce", "'" + o.reduce + "' is not fast or deterministic");
    std::int64_t n = 0;
    const RetroConfig c = train_bench_config(o.step, n);
    const int threads = o.threads_per_rank > 0 ? o.threads_per_rank : std::max(1, hardware_threads() / ranks.back());
    if (geteuid() == 0) {   // Open MPI refuses root unless told (containers, CI)
        setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
        setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
    }
    const ScratchDir scratch_dir("retro-bench-ranks");   // removed at the end, on an error and on Ctrl-C
    const fs::path scratch(scratch_dir.path());
    nlohmann::json rows = nlohmann::json::array();
    std::vector<std::vector<std::string>> table{
        {"ranks", "threads/rank", "step s", "all-reduce s", "share", "tokens/s", "efficiency"}};
    double base_tps = 0;
    int base_ranks = 0;
    for (int r : ranks) {
        const std::string out = (scratch / ("ranks" + std::to_string(r) + ".json")).string();
        const std::string cmd = worker_command(o, r, threads, out);
        log_info("ranks " + std::to_string(r) + ": " + cmd);
        const int rc = run_shell(cmd);   // (a Ctrl-C stops the bench, not "the launch failed")
        if (rc != 0 || !fs::exists(out)) {
            user_error_in("--ranks", cat("the launch of ", r, " ranks failed (", cmd, ")"),
                          "check that the launcher runs here (--launcher; e.g. srun -n {n} under Slurm)");
        }
        std::ifstream in(out);
        nlohmann::json row = nlohmann::json::parse(in);
        const double tps = row["tokens_per_s"].get<double>();
        if (base_ranks == 0) base_tps = tps, base_ranks = r;
        const double eff = tps / (base_tps * double(r) / double(base_ranks));
        row["efficiency"] = eff;
        const double step = row["step_seconds"].get<double>(), red = row["allreduce_seconds"].get<double>();
        table.push_back({std::to_string(r), std::to_string(threads), fmt(step), fmt(red, "%.4f"),
                         fmt(100 * red / step, "%.1f%%"), fmt(tps, "%.1f"), fmt(eff, "%.2f")});
        rows.push_back(row);
    }
    const nlohmann::json result = {{"stamp", stamp("retro-bench train --ranks", command_line)},
                                   {"machine", {{"cpu", cpu_model()}, {"hardware_threads", hardware_threads()}}},
                                   {"config", c.to_json()},
                                   {"batch_per_rank", o.step.batch},
                                   {"seq_len", n},
                                   {"reduce", o.reduce},
                                   {"launcher", o.launcher},
                                   {"efficiency", "tokens/s(N) / (N / N0 * tokens/s(N0)), N0 the first rank count given; every rank the same batch and threads"},
                                   {"rows", rows}};
    std::printf("retro-bench train --ranks: %s, %lld parameters, %lld x %lld tokens per rank, --reduce %s\n",
                cpu_model().c_str(), static_cast<long long>(rows[0]["parameters"].get<std::int64_t>()),
                static_cast<long long>(o.step.batch), static_cast<long long>(n), o.reduce.c_str());
    std::printf("%s", format_table(table).c_str());
    for (const auto& r : rows)
        if (!r["allreduce_model"].is_null())
            std::printf("all-reduce at %d ranks: t = %.1f us + 2(N-1)/N * bytes / %s%.2f GB/s (fit over %zu sizes up to %.1f MB%s)\n",
                        r["ranks"].get<int>(), 1e6 * r["allreduce_model"]["alpha_seconds"].get<double>(),
                        r["allreduce_model"]["bandwidth_is_lower_bound"].get<bool>() ? ">= " : "",
                        r["allreduce_model"]["bandwidth_bytes_per_s"].get<double>() / 1e9, r["allreduce_sweep"].size(),
                        r["gradient_bytes"].get<double>() / 1e6,
                        r["allreduce_model"]["bandwidth_is_lower_bound"].get<bool>()
                            ? "; the largest took no longer than the smallest: a lower bound"
                            : "");
    std::fflush(stdout);
    if (!o.step.json.empty()) bench_json_write(o.step.json, result, "retro-bench train --ranks", command_line);
    return result;
}

}  // namespace retro::bench
