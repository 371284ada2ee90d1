#include "nn/rotary.h"

#include <cmath>

#include "core/error.h"
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

namespace {
template <typename T, bool BACKWARD>
void rotary_apply(T* y, const T* x, const RotaryTable<T>& t, std::int64_t B, std::int64_t N, std::int64_t H,
                  std::int64_t D) {
    RETRO_CHECK(t.rows == N, "rotary table has ", t.rows, " rows for ", N, " positions");
    RETRO_CHECK(t.rot_dim <= D, "rotary dim ", t.rot_dim, " > head dim ", D);
    const std::int64_t R = t.rot_dim, half = R / 2, HD = H * D;
    ranges(B * N, B * N * H * R * 3, [&](std::int64_t r0, std::int64_t r1, int) {
        for (std::int64_t row = r0; row < r1; row++) {
            const T* c = t.cos.data() + (row % N) * R;
            const T* s = t.sin.data() + (row % N) * R;
            for (std::int64_t h = 0; h < H; h++) {
                const T* xi = x + row * HD + h * D;
                T* yo = y + row * HD + h * D;
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
    });
}
}  // namespace

template <typename T>
void rotary_forward(T* y, const T* x, const RotaryTable<T>& table, std::int64_t B, std::int64_t N, std::int64_t H,
                    std::int64_t D) {
    rotary_apply<T, false>(y, x, table, B, N, H, D);
}
template <typename T>
void rotary_backward(T* dx, const T* dy, const RotaryTable<T>& table, std::int64_t B, std::int64_t N, std::int64_t H,
                     std::int64_t D) {
    rotary_apply<T, true>(dx, dy, table, B, N, H, D);
}

#define RETRO_INSTANTIATE(T)                                                                                 \
    template RotaryTable<T> rotary_table<T>(const std::vector<std::int64_t>&, std::int64_t);                 \
    template void rotary_forward<T>(T*, const T*, const RotaryTable<T>&, std::int64_t, std::int64_t,         \
                                    std::int64_t, std::int64_t);                                             \
    template void rotary_backward<T>(T*, const T*, const RotaryTable<T>&, std::int64_t, std::int64_t,        \
                                     std::int64_t, std::int64_t);
RETRO_INSTANTIATE(float)
RETRO_INSTANTIATE(double)
#undef RETRO_INSTANTIATE

}  // namespace retro::nn
