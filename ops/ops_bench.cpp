// Implementation of ops_bench.h.
#include "ops_bench.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "bench/bench_util.h"
#include "core/atomic_file.h"
#include "core/cuda_device.h"
#include "core/error.h"
#include "core/log.h"
#include "backend_case.h"
#include "op_registry.h"

namespace retro::ops {

namespace {

// The median over `repeats` runs (after one warm-up) of the milliseconds a BackendCase spends inside its own ops.
double median_op_ms(BackendRunnable& c, DType d, int repeats) {
    c.op_seconds(d);
    std::vector<double> ms;
    for (int i = 0; i < repeats; ++i) ms.push_back(c.op_seconds(d) * 1e3);
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
}

}  // namespace

void run_ops_bench(const OpsBenchOptions& o, const std::string& command_line) {
    if (o.device != "cpu" && o.device != "cuda") user_error_in("--device", "expected cpu or cuda, got '" + o.device + "'");
    if (o.repeats < 1) user_error_in("--repeats", "must be at least 1");
    const Backend backend = o.device == "cuda" ? Backend::CUDA : Backend::CPU;
    if (backend == Backend::CUDA) cuda_require("--device cuda", "retro-bench", "run the CPU rows (--device cpu)");
    std::vector<const OpInfo*> chosen;
    for (const auto& op : registry()) {
        bool take = o.ops.empty();
        for (const auto& want : o.ops) take = take || op.name.rfind(want, 0) == 0;
        if (take) chosen.push_back(&op);
    }
    for (const auto& want : o.ops) {   // each item names an op or a prefix of some (a misspelt one was dropped silently)
        bool found = false;
        for (const auto& op : registry()) found = found || op.name.rfind(want, 0) == 0;
        if (!found) user_error_in("--ops", "'" + want + "' names no registered op", "see retro-bench ops --list");
    }
    if (chosen.empty()) user_error_in("--ops", "names no registered op", "see retro-bench ops --list");
    nlohmann::json result = bench::stamp("retro-bench ops", command_line);
    result["machine"] = {{"cpu", bench::cpu_model()}, {"device", o.device}};
    nlohmann::json rows = nlohmann::json::array();
    std::vector<std::vector<std::string>> table{{"op", "shape", "dtype", "ms", "GFLOP/s", "GB/s", "timed"}};
    for (const OpInfo* op : chosen) {
        auto c = op->perf_case(backend);
        for (DType d : {DType::F64, DType::F32, DType::BF16}) {
            if (!c->supports(backend, d) || (backend == Backend::CPU && d == DType::F64)) continue;   // the CPU: fp32
            log_info(op->name + " " + dtype_name(d) + " [" + c->shape() + "]");
            // a device row times the op's own kernels (each op between synchronizes), not the case's uploads,
            // allocations and downloads, which took ~130 ms of the fused attention's row before 2026-11-27
            auto* ops_only = backend == Backend::CUDA ? dynamic_cast<BackendRunnable*>(c.get()) : nullptr;
            const double ms = ops_only ? median_op_ms(*ops_only, d, o.repeats)
                                       : bench::median_ms([&] { c->run(backend, d); }, o.repeats);
            const double gflops = c->flops() / (ms * 1e6), gbs = c->bytes() / (ms * 1e6);
            const char* timed = ops_only ? "ops" : "case";
            table.push_back({op->name, c->shape(), dtype_name(d), bench::format_fixed(ms, 3), bench::format_fixed(gflops, 1),
                             bench::format_fixed(gbs, 1), timed});
            rows.push_back({{"op", op->name}, {"shape", c->shape()}, {"backend", backend_name(backend)}, {"dtype", dtype_name(d)},
                            {"ms", ms}, {"timed", timed}, {"gflops", gflops}, {"gb_per_s", gbs}, {"flops", c->flops()}, {"bytes", c->bytes()},
                            {"cpu_reference", op->cpu}, {"cuda_kernel", op->cuda}});
        }
    }
    result["rows"] = rows;
    std::printf("%s", bench::format_table(table).c_str());
    std::printf("timed: case = the whole case (inputs prepared, op run, outputs read back); ops = only the op's own "
                "backend calls, each between two synchronizes\n");
    if (!o.json.empty()) bench::bench_json_write(o.json, result, "retro-bench ops", command_line);
}

}  // namespace retro::ops
