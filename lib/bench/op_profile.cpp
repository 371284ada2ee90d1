// op_profile (bench/op_profile.h).
#include "bench/op_profile.h"

#include "bench/bench_util.h"

namespace retro::bench {

OpProfile op_profile(const std::vector<nn::OpTiming>& timings, double units, const std::string& unit,
                     std::size_t top_rows) {
    double total = 0;
    for (const auto& t : timings) total += t.seconds;
    std::vector<std::vector<std::string>> table{{"op", "shape", "calls/" + unit, "ms/" + unit, "share", "TFLOP/s"}};
    nlohmann::json ops = nlohmann::json::array();
    for (const auto& t : timings) {
        ops.push_back({{"op", t.op}, {"shape", t.shape}, {"calls_per_" + unit, double(t.calls) / units},
                       {"ms_per_" + unit, 1e3 * t.seconds / units}, {"flops_per_" + unit, t.flops / units}});
        if (table.size() <= top_rows)
            table.push_back({t.op, t.shape, format_fixed(double(t.calls) / units, 1), format_fixed(1e3 * t.seconds / units, 3),
                             format_fixed(total > 0 ? 100 * t.seconds / total : 0.0, 1) + "%",
                             t.flops > 0 && t.seconds > 0 ? format_fixed(t.flops / t.seconds / 1e12, 1) : ""});
    }
    OpProfile p;
    p.ms_in_ops = 1e3 * total / units;
    p.table = format_table(table);
    p.json = {{"ms_per_" + unit + "_in_ops", p.ms_in_ops}, {"ops", ops}};
    return p;
}

}  // namespace retro::bench
