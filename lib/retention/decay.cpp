// The shared decay function of all retention modes (decay.h): gamma in fp32 as fla computes it,
// and gamma^d evaluated as exp(d * log gamma) with d >= 0 only (RETENTION.md §1).
#include "retention/decay.h"

#include <cmath>

#include "core/error.h"

namespace retro::retention {

std::vector<double> fla_log_gamma(std::int64_t H) {
    std::vector<double> out(static_cast<std::size_t>(H));
    for (std::int64_t h = 0; h < H; ++h) {
        float gamma = 1.0f - std::exp2(static_cast<float>(-5 - h));   // fp32, as fla
        out[static_cast<std::size_t>(h)] = static_cast<double>(std::log(gamma));   // logf
    }
    return out;
}

Resolved resolve(const Shape& s, const Options& opt) {
    if (s.B < 1 || s.T < 1 || s.H < 1 || s.K < 1 || s.V < 1)
        user_error("retention: every dimension must be >= 1 (got B=", s.B, " T=", s.T, " H=", s.H,
                   " K=", s.K, " V=", s.V, ")");
    if (opt.chunk_size < 1) user_error("retention: chunk size must be >= 1 (got ", opt.chunk_size, ")");
    if (!(opt.scale >= 0.0) || !std::isfinite(opt.scale))
        user_error("retention: scale must be finite and >= 0 (0 = K^-1/2), got ", opt.scale);
    Resolved r;
    r.scale = opt.scale > 0.0 ? opt.scale : 1.0 / std::sqrt(static_cast<double>(s.K));
    r.log_gamma = opt.log_gamma.empty() ? fla_log_gamma(s.H) : opt.log_gamma;
    if (static_cast<std::int64_t>(r.log_gamma.size()) != s.H)
        user_error("retention: log_gamma has ", r.log_gamma.size(), " entries, expected H=", s.H);
    for (double g : r.log_gamma)
        if (!(g <= 0.0) || !std::isfinite(g))
            user_error("retention: log gamma must be finite and <= 0 (gamma in (0,1]), got ", g);
    return r;
}

template <typename F>
F decay_pow(double log_gamma, std::int64_t d) {
    RETRO_CHECK(d >= 0, "decay exponent must be >= 0, got ", d);
    return static_cast<F>(std::exp(log_gamma * static_cast<double>(d)));
}

template <typename F>
void decay_table(double log_gamma, std::int64_t n, F* out) {
    for (std::int64_t i = 0; i < n; ++i) out[i] = static_cast<F>(std::exp(log_gamma * static_cast<double>(i)));
}

template float decay_pow<float>(double, std::int64_t);
template double decay_pow<double>(double, std::int64_t);
template void decay_table<float>(double, std::int64_t, float*);
template void decay_table<double>(double, std::int64_t, double*);

}  // namespace retro::retention
