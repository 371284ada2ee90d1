// Implementation of ops_bench.h.
#include "ops_bench.h"

#include <cstdio>

#include "bench/bench_util.h"
#include "core/atomic_file.h"
#include "core/cuda_device.h"
#include "core/error.h"
#include "core/log.h"
#include "op_registry.h"

namespace retro::ops {

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
    if (chosen.empty()) user_error_in("--ops", "names no registered op", "see retro-bench ops --list");
    nlohmann::json result = bench::stamp("retro-bench ops", command_line);
    result["machine"] = {{"cpu", bench::cpu_model()}, {"device", o.device}};
    nlohmann::json rows = nlohmann::json::array();
    std::vector<std::vector<std::string>> table{{"op", "shape", "dtype", "ms", "GFLOP/s", "GB/s"}};
    for (const OpInfo* op : chosen) {
        auto c = op->perf_case(backend);
        for (DType d : {DType::F64, DType::F32, DType::BF16}) {
            if (!c->supports(backend, d) || (backend == Backend::CPU && d == DType::F64)) continue;   // the CPU: fp32
            log_info(op->name + " " + dtype_name(d) + " [" + c->shape() + "]");
            const double ms = bench::median_ms([&] { c->run(backend, d); }, o.repeats);
            const double gflops = c->flops() / (ms * 1e6), gbs = c->bytes() / (ms * 1e6);
            table.push_back({op->name, c->shape(), dtype_name(d), bench::format_fixed(ms, 3), bench::format_fixed(gflops, 1),
                             bench::format_fixed(gbs, 1)});
            rows.push_back({{"op", op->name}, {"shape", c->shape()}, {"backend", backend_name(backend)}, {"dtype", dtype_name(d)},
                            {"ms", ms}, {"gflops", gflops}, {"gb_per_s", gbs}, {"flops", c->flops()}, {"bytes", c->bytes()},
                            {"cpu_reference", op->cpu}, {"cuda_kernel", op->cuda}});
        }
    }
    result["rows"] = rows;
    std::printf("%s", bench::format_table(table).c_str());
    if (!o.json.empty()) write_file_atomic(o.json, result.dump(2) + "\n");
}

}  // namespace retro::ops
