// The doctest face of ops/gradcheck.h (the one gradient checker): RETRO_GRAD_CHECK(name, loss, x,
// analytic, n[, max_entries, eps]) checks rel. err <= 1e-6 and a non-zero gradient.
#pragma once
#include <doctest/doctest.h>

#include "gradcheck.h"

namespace retro::test {
using ops::dot;
using ops::grad_check;
using ops::GradResult;
using ops::random_doubles;
}  // namespace retro::test

#define RETRO_GRAD_CHECK(name, loss, x, analytic, n, ...)                                          \
    do {                                                                                           \
        auto gr_ = ::retro::ops::grad_check(loss, x, analytic, n, ##__VA_ARGS__);                  \
        INFO(name << ": rel err " << gr_.rel_err << " (max |grad| " << gr_.max_numeric << ")");    \
        CHECK(gr_.max_numeric > 0);                                                                \
        CHECK(gr_.rel_err <= 1e-6);                                                                \
    } while (0)
