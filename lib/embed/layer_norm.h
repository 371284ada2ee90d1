// LayerNorm over rows for the CPU encoders (bert_model.cpp: post-LN with the residual folded in;
// clip_model.cpp: pre-LN into a separate buffer): two-pass mean and variance in fp32, built for
// AVX-512F, AVX2 and baseline x86-64 (nn/fast_math.h).
#pragma once
#include <cstdint>

namespace retro {

// X = LayerNorm(X + Y) row by row (Y may be null): (x - mean) / sqrt(var + eps) · g + b.
void add_layer_norm_rows(float* X, const float* Y, std::int64_t rows, int n, const float* g, const float* b, float eps);
// Y = LayerNorm(X) row by row (X is left as it is; X and Y must not overlap).
void layer_norm_rows(const float* X, float* Y, std::int64_t rows, int n, const float* g, const float* b, float eps);

}  // namespace retro
