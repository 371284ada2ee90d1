// Implementation of op_registry.h: the registry assembled from each area, and the shared helpers.
#include "op_registry.h"

#include <algorithm>
#include <cmath>

namespace retro::ops {

const char* backend_name(Backend b) { return b == Backend::CPU ? "cpu" : "cuda"; }
const char* dtype_name(DType d) { return d == DType::F64 ? "f64" : d == DType::F32 ? "f32" : "bf16"; }

const std::vector<OpInfo>& registry() {
    static const std::vector<OpInfo> all = [] {
        std::vector<OpInfo> r;
        register_nn(r);
        register_retention(r);
        register_index(r);
        register_embed(r);
        return r;
    }();
    return all;
}

const OpInfo* find(const std::string& name) {
    for (const auto& op : registry())
        if (op.name == name) return &op;
    return nullptr;
}

double rms_ratio(const std::vector<double>& a, const std::vector<double>& b) {
    double num = 0, den = 0;
    for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
        const double d = a[i] - b[i];
        num += d * d;
        den += b[i] * b[i];
    }
    if (a.size() != b.size() || !std::isfinite(num)) return INFINITY;
    return std::sqrt(num / std::max(den, 1e-300));
}

}  // namespace retro::ops
