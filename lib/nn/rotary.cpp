#include "nn/rotary.h"

#include <cmath>
#include <type_traits>

#include "core/error.h"
#include "nn/fast_math.h"
#include "nn/parallel.h"

namespace retro::nn {

template <typename T>
RotaryTable<T> rotary_table(const std::vector<std::int64_t>& positions, std::int64_t rot_dim) {
    RETRO_CHECK(rot_dim > 0 && rot_dim % 2 == 0, "rotary dim must be even, got ", rot_dim);
    RotaryTable<T> t;
    t.rows = static_cast<std::int64_t>(positions.size());
    t.rot_dim = rot_dim;
    t.cos.resize(static_cast<std::size_t>(t.rows * rot_dim));
    t.sin.resize(t.cos.size());
    const std::int64_t half = rot_dim / 2;
    std::vector<T> inv_freq(static_cast<std::size_t>(half));
    for (std::int64_t j = 0; j < half; j++)
        inv_freq[j] = T(1) / std::pow(T(10000), static_cast<T>(2 * j) / static_cast<T>(rot_dim));
    for (std::int64_t r = 0; r < t.rows; r++)
        for (std::int64_t j = 0; j < rot_dim; j++) {
            const T a = static_cast<T>(positions[r]) * inv_freq[j % half];
            t.cos[r * rot_dim + j] = std::cos(a);
            t.sin[r * rot_dim + j] = std::sin(a);
        }
    return t;
}

template <typename T>
RotaryTable<T> rotary_table_range(std::int64_t n, std::int64_t rot_dim) {
    std::vector<std::int64_t> positions(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; i++) positions[static_cast<std::size_t>(i)] = i;
    return rotary_table<T>(positions, rot_dim);
}

namespace {
RETRO_FAST_MATH_BEGIN
// Rows [r0, r1) of x [B*N, H*D]: each head's first R dims rotate (pairs j, j + R/2), the rest are copied.
template <typename T, bool BACKWARD>
RETRO_ALWAYS_INLINE void apply_rows(T* y, const T* x, const T* cos, const T* sin, std::int64_t r0, std::int64_t r1,
                                    std::int64_t N, std::int64_t H, std::int64_t D, std::int64_t R) {
    const std::int64_t half = R / 2, HD = H * D;
    for (std::int64_t row = r0; row < r1; row++) {
        const T* c = cos + (row % N) * R;
        const T* s = sin + (row % N) * R;
        for (std::int64_t h = 0; h < H; h++) {
            const T* xi = x + row * HD + h * D;
            T* yo = y + row * HD + h * D;
#pragma omp simd
            for (std::int64_t j = 0; j < half; j++) {
                const T x1 = xi[j], x2 = xi[j + half];
                if (!BACKWARD) {
                    yo[j] = x1 * c[j] - x2 * s[j];
                    yo[j + half] = x2 * c[j + half] + x1 * s[j + half];
                } else {
                    yo[j] = x1 * c[j] + x2 * s[j + half];
                    yo[j + half] = x2 * c[j + half] - x1 * s[j];
                }
            }
            if (yo != xi)
                for (std::int64_t j = R; j < D; j++) yo[j] = xi[j];
        }
    }
}
RETRO_SIMD_CLONES void forward_rows_f32(float* y, const float* x, const float* cos, const float* sin, std::int64_t r0,
                                        std::int64_t r1, std::int64_t N, std::int64_t H, std::int64_t D,
                                        std::int64_t R) {
    apply_rows<float, false>(y, x, cos, sin, r0, r1, N, H, D, R);
}
RETRO_SIMD_CLONES void backward_rows_f32(float* y, const float* x, const float* cos, const float* sin, std::int64_t r0,
                                         std::int64_t r1, std::int64_t N, std::int64_t H, std::int64_t D,
                                         std::int64_t R) {
    apply_rows<float, true>(y, x, cos, sin, r0, r1, N, H, D, R);
}
RETRO_FAST_MATH_END

template <typename T, bool BACKWARD>
void rotary_apply(T* y, const T* x, const T* cos, const T* sin, std::int64_t R, std::int64_t B, std::int64_t N,
                  std::int64_t H, std::int64_t D) {
    RETRO_CHECK(R <= D, "rotary dim ", R, " > head dim ", D);
    ranges(B * N, B * N * H * R * 3, [&](std::int64_t r0, std::int64_t r1, int) {
        if constexpr (std::is_same_v<T, float>) {
            if (BACKWARD) backward_rows_f32(y, x, cos, sin, r0, r1, N, H, D, R);
            else forward_rows_f32(y, x, cos, sin, r0, r1, N, H, D, R);
        } else {
            apply_rows<T, BACKWARD>(y, x, cos, sin, r0, r1, N, H, D, R);
        }
    });
}
}  // namespace

template <typename T>
void rotary_forward(T* y, const T* x, const RotaryTable<T>& table, std::int64_t B, std::int64_t N, std::int64_t H,
                    std::int64_t D) {
    RETRO_CHECK(table.rows == N, "rotary table has ", table.rows, " rows for ", N, " positions");
    rotary_apply<T, false>(y, x, table.cos.data(), table.sin.data(), table.rot_dim, B, N, H, D);
}
template <typename T>
void rotary_backward(T* dx, const T* dy, const RotaryTable<T>& table, std::int64_t B, std::int64_t N, std::int64_t H,
                     std::int64_t D) {
    RETRO_CHECK(table.rows == N, "rotary table has ", table.rows, " rows for ", N, " positions");
    rotary_apply<T, true>(dx, dy, table.cos.data(), table.sin.data(), table.rot_dim, B, N, H, D);
}
template <typename T>
void rotary_forward(T* y, const T* x, const T* cos, const T* sin, std::int64_t rot_dim, std::int64_t B, std::int64_t N,
                    std::int64_t H, std::int64_t D) {
    rotary_apply<T, false>(y, x, cos, sin, rot_dim, B, N, H, D);
}
template <typename T>
void rotary_backward(T* dx, const T* dy, const T* cos, const T* sin, std::int64_t rot_dim, std::int64_t B,
                     std::int64_t N, std::int64_t H, std::int64_t D) {
    rotary_apply<T, true>(dx, dy, cos, sin, rot_dim, B, N, H, D);
}

#define RETRO_INSTANTIATE(T)                                                                                 \
    template RotaryTable<T> rotary_table<T>(const std::vector<std::int64_t>&, std::int64_t);                 \
    template RotaryTable<T> rotary_table_range<T>(std::int64_t, std::int64_t);                               \
    template void rotary_forward<T>(T*, const T*, const RotaryTable<T>&, std::int64_t, std::int64_t,         \
                                    std::int64_t, std::int64_t);                                             \
    template void rotary_backward<T>(T*, const T*, const RotaryTable<T>&, std::int64_t, std::int64_t,        \
                                     std::int64_t, std::int64_t);                                             \
    template void rotary_forward<T>(T*, const T*, const T*, const T*, std::int64_t, std::int64_t, std::int64_t, \
                                    std::int64_t, std::int64_t);                                             \
    template void rotary_backward<T>(T*, const T*, const T*, const T*, std::int64_t, std::int64_t, std::int64_t, \
                                     std::int64_t, std::int64_t);
RETRO_INSTANTIATE(float)
RETRO_INSTANTIATE(double)
#undef RETRO_INSTANTIATE

}  // namespace retro::nn
