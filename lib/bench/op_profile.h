// The op-by-op profile that retro-bench train/generate --profile print (nn/nn_backend_profiler.h's timings): a table
// of the ops by time and the same as JSON.
// provides: OpProfile, op_profile
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "nn/nn_backend_profiler.h"

namespace retro::bench {

struct OpProfile {
    std::string table;     // op, shape, calls and ms per unit, share of the time inside ops, TFLOP/s (top rows)
    nlohmann::json json;   // {"ms_per_<unit>_in_ops", "ops": [every op]}
    double ms_in_ops = 0;  // per unit
};

// `units` = how many steps (or tokens) the timings cover; `unit` names them ("step", "token").
OpProfile op_profile(const std::vector<nn::OpTiming>& timings, double units, const std::string& unit,
                     std::size_t top_rows = 25);

}  // namespace retro::bench
