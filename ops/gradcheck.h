// The one central-difference gradient checker in double (the op registry, the nn and retention
// tests, the model): issue 6's acceptance is rel. err <= 1e-6. The error of a tensor is
// max_i |analytic_i - numeric_i| / max_i |numeric_i| (normalised by the tensor's largest gradient,
// so that entries that are zero or tiny do not turn round-off of order 1e-11 into a large relative
// error).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace retro::ops {

inline std::vector<double> random_doubles(std::size_t n, std::mt19937& rng, double amp = 1.0) {
    std::uniform_real_distribution<double> u(-amp, amp);
    std::vector<double> v(n);
    for (auto& e : v) e = u(rng);
    return v;
}

inline double dot(const std::vector<double>& a, const double* b) {
    double s = 0;
    for (std::size_t i = 0; i < a.size(); i++) s += a[i] * b[i];
    return s;
}

struct GradResult {
    double rel_err = 0;       // max |a - n| / max(max |n|, max |a|)
    double max_numeric = 0;   // max |n|
    double max_analytic = 0;  // max |a|
};

// Perturbs x[i] for each i in `idx` and compares the central difference of `loss` with analytic[i].
inline GradResult grad_check_at(const std::function<double()>& loss, double* x, const double* analytic,
                                const std::vector<std::size_t>& idx, double eps = 1e-5) {
    double max_diff = 0, max_num = 0, max_an = 0;
    for (std::size_t i : idx) {
        const double keep = x[i];
        x[i] = keep + eps;
        const double lp = loss();
        x[i] = keep - eps;
        const double lm = loss();
        x[i] = keep;
        const double num = (lp - lm) / (2 * eps);
        max_diff = std::max(max_diff, std::abs(num - analytic[i]));
        max_num = std::max(max_num, std::abs(num));
        max_an = std::max(max_an, std::abs(analytic[i]));
    }
    GradResult r;
    r.max_numeric = max_num;
    r.max_analytic = max_an;
    const double denom = std::max(max_num, max_an);
    r.rel_err = denom > 0 ? max_diff / denom : 0.0;
    return r;
}

// The same over all n entries, or `max_entries` of them spread over the tensor.
inline GradResult grad_check(const std::function<double()>& loss, double* x, const double* analytic, std::size_t n,
                             std::size_t max_entries = 0, double eps = 1e-5) {
    std::vector<std::size_t> idx;
    if (max_entries == 0 || max_entries >= n) {
        for (std::size_t i = 0; i < n; i++) idx.push_back(i);
    } else {
        std::mt19937 rng(static_cast<unsigned>(n * 7919 + max_entries));
        for (std::size_t i = 0; i < max_entries; i++) idx.push_back(rng() % n);
    }
    return grad_check_at(loss, x, analytic, idx, eps);
}

}  // namespace retro::ops
