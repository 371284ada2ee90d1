// Call-free float erf and exp for element-wise loops that must vectorise (GELU, softmax, cross-entropy),
// and the macros those loops use. The project builds without -march, so a hot float kernel is marked
// RETRO_SIMD_CLONES (AVX-512F, AVX2+FMA and baseline clones, picked at load time by CPU features) and its
// loops `#pragma omp simd`. Helpers called inside must be always_inline: GCC does not inline a
// default-target function into a clone, and a call stops vectorisation. A file defining such kernels
// wraps them in RETRO_FAST_MATH_BEGIN / RETRO_FAST_MATH_END (GCC's no-trapping-math: without it GCC
// will not if-convert a float compare such as the clamps below, and the loop stays scalar; no FP
// exception traps are used anywhere). Double-precision code keeps std::erf / std::exp.
#pragma once
#include <cstdint>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
// The AVX2 clone is x86-64-v3 (AVX2 with FMA, as every AVX2 CPU since Haswell and Zen 1 has): GCC's "avx2" target
// alone leaves FMA out, so that clone did a*b+c as two roundings where the AVX-512 one fuses them (docs/performance.md
// "The AVX2 clone with FMA"). RETRO_SIMD_CLONE_TARGETS replaces the list for A/B timing on one machine, e.g.
// -DRETRO_SIMD_CLONE_TARGETS='"avx2","default"' runs the plain-AVX2 form on an AVX-512 CPU.
#ifndef RETRO_SIMD_CLONE_TARGETS
#define RETRO_SIMD_CLONE_TARGETS "avx512f", "arch=x86-64-v3", "default"
#endif
#define RETRO_SIMD_CLONES __attribute__((target_clones(RETRO_SIMD_CLONE_TARGETS)))
#else
#define RETRO_SIMD_CLONES
#endif
#define RETRO_ALWAYS_INLINE inline __attribute__((always_inline))
#if defined(__GNUC__) && !defined(__clang__)
#define RETRO_FAST_MATH_BEGIN _Pragma("GCC push_options") _Pragma("GCC optimize(\"no-trapping-math\")")
#define RETRO_FAST_MATH_END _Pragma("GCC pop_options")
#else
#define RETRO_FAST_MATH_BEGIN
#define RETRO_FAST_MATH_END
#endif

RETRO_FAST_MATH_BEGIN
namespace retro::nn {

// erf as a rational function of x (Eigen's generic_fast_erf_float, clamped to [-4, 4]): max abs
// error 4.2e-7 against std::erf over [-10, 10].
RETRO_ALWAYS_INLINE float fast_erf(float a) {
    float x = a > 4.0f ? 4.0f : (a < -4.0f ? -4.0f : a);   // no std::min/max: they would not inline here
    float x2 = x * x;
    float p = -2.72614225801306e-10f;
    p = p * x2 + 2.77068142495902e-08f;
    p = p * x2 + -2.10102402082508e-06f;
    p = p * x2 + -5.69250639462346e-05f;
    p = p * x2 + -7.34990630326855e-04f;
    p = p * x2 + -2.95459980854025e-03f;
    p = p * x2 + -1.60960333262415e-02f;
    p *= x;
    float q = -1.45660718464996e-05f;
    q = q * x2 + -2.13374055278905e-04f;
    q = q * x2 + -1.68282697438203e-03f;
    q = q * x2 + -7.37332916720468e-03f;
    q = q * x2 + -1.42647390514189e-02f;
    return p / q;
}

// exp(x) for x <= 0 (after subtracting a row max): 2^n * poly(r), r = x - n ln2, |r| <= ln2/2, degree-6
// Taylor (relative error < 2e-7); x below -87 is clamped there (exp = 1.6e-38, not 0).
RETRO_ALWAYS_INLINE float fast_exp_neg(float x) {
    x = x < -87.0f ? -87.0f : x;
    int n = static_cast<int>(x * 1.4426950408889634f - 0.5f);   // round half down (x <= 0)
    float fn = static_cast<float>(n);
    float r = x - fn * 0.693145751953125f - fn * 1.428606765330187e-06f;
    float p = 1.0f / 720;
    p = p * r + 1.0f / 120;
    p = p * r + 1.0f / 24;
    p = p * r + 1.0f / 6;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    return p * __builtin_bit_cast(float, (n + 127) << 23);
}

}  // namespace retro::nn
RETRO_FAST_MATH_END
