// Shared pieces of every retention mode: shapes, options, and the one decay function.
// gamma_h = 1 - 2^(-5-h) in fp32, log taken in fp32 (RETENTION.md §1); decay gamma^d = exp(d*log gamma)
// is only ever evaluated for d >= 0, i.e. exponents <= 0, so it cannot overflow (docs/retention.md).
#pragma once
#include <cstdint>
#include <vector>

namespace retro::retention {

// q, k: [B,T,H,K]; v, o: [B,T,H,V]; states h0, ht: [B,H,K,V]; all row-major (C order).
struct Shape {
    std::int64_t B = 1, T = 1, H = 1, K = 1, V = 1;
};

struct Options {
    double scale = 0.0;              // multiplies q; 0 = K^-1/2 (fla's default)
    std::vector<double> log_gamma;   // natural log of gamma per head; empty = fla_log_gamma(H)
    std::int64_t chunk_size = 64;    // chunkwise only; any size >= 1
};

// fla's decay: gamma_h = 1 - 2^(-5-h) and log(gamma_h), both in fp32, widened to double.
std::vector<double> fla_log_gamma(std::int64_t H);

// Validates the shape/options (UserError on bad ones) and fills in the defaults.
struct Resolved {
    double scale;
    std::vector<double> log_gamma;   // H entries, each <= 0
};
Resolved resolve(const Shape& s, const Options& opt);

// gamma^d for d >= 0 (the exponent d*log_gamma is <= 0, so the result is in [0, 1]).
template <typename F>
F decay_pow(double log_gamma, std::int64_t d);

// out[i] = gamma^i for i in [0, n).
template <typename F>
void decay_table(double log_gamma, std::int64_t n, F* out);

// Offsets of row (b, t, h) in a [B,T,H,D] tensor and of head (b, h) in a [B,H,K,V] state.
inline std::int64_t row_offset(const Shape& s, std::int64_t b, std::int64_t t, std::int64_t h,
                               std::int64_t D) {
    return ((b * s.T + t) * s.H + h) * D;
}
inline std::int64_t state_offset(const Shape& s, std::int64_t b, std::int64_t h) {
    return (b * s.H + h) * s.K * s.V;
}

}  // namespace retro::retention
