// Central-difference gradient checking in double for the nn ops and the model (issue 6 acceptance:
// rel. err <= 1e-6). The error of a tensor is max_i |analytic_i - numeric_i| / max_i |numeric_i|
// (normalised by the tensor's largest gradient, so that entries that are zero or tiny do not turn
// round-off of order 1e-11 into a large relative error).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace retro::test {

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
    double rel_err = 0;     // max |a - n| / max |n|
    double max_numeric = 0; // max |n|
};

// Perturbs `x[i]` for the checked entries (all, or `max_entries` spread over the tensor) and compares
// the central difference of `loss` with `analytic`.
inline GradResult grad_check(const std::function<double()>& loss, double* x, const double* analytic, std::size_t n,
                             std::size_t max_entries = 0, double eps = 1e-5) {
    std::vector<std::size_t> idx;
    if (max_entries == 0 || max_entries >= n) {
        for (std::size_t i = 0; i < n; i++) idx.push_back(i);
    } else {
        std::mt19937 rng(static_cast<unsigned>(n * 7919 + max_entries));
        for (std::size_t i = 0; i < max_entries; i++) idx.push_back(rng() % n);
    }
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
    const double denom = std::max(max_num, max_an);
    r.rel_err = denom > 0 ? max_diff / denom : 0.0;
    return r;
}

}  // namespace retro::test

#define RETRO_GRAD_CHECK(name, loss, x, analytic, n, ...)                                          \
    do {                                                                                           \
        auto gr_ = ::retro::test::grad_check(loss, x, analytic, n, ##__VA_ARGS__);                 \
        INFO(name << ": rel err " << gr_.rel_err << " (max |grad| " << gr_.max_numeric << ")");    \
        CHECK(gr_.max_numeric > 0);                                                                \
        CHECK(gr_.rel_err <= 1e-6);                                                                \
    } while (0)
