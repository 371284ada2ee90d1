#include "nn/embedding.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "nn/parallel.h"

namespace retro::nn {

template <typename T>
void embedding_forward(T* out, const std::int32_t* ids, const T* table, std::int64_t N, std::int64_t V, std::int64_t C) {
    for (std::int64_t n = 0; n < N; n++)
        RETRO_CHECK(ids[n] >= 0 && ids[n] < V, "token id ", ids[n], " outside [0, ", V, ")");
    ranges(N, N * C, [&](std::int64_t b, std::int64_t e, int) {
        for (std::int64_t n = b; n < e; n++) std::memcpy(out + n * C, table + ids[n] * C, sizeof(T) * C);
    });
}

// Parallel over column ranges so that repeated ids never race and the sum order is fixed.
template <typename T>
void embedding_backward(T* dtable, const T* dout, const std::int32_t* ids, std::int64_t N, std::int64_t C) {
    ranges(C, N * C, [&](std::int64_t c0, std::int64_t c1, int) {
        for (std::int64_t n = 0; n < N; n++) {
            T* d = dtable + ids[n] * C;
            const T* g = dout + n * C;
            for (std::int64_t c = c0; c < c1; c++) d[c] += g[c];
        }
    });
}

template <typename T>
void position_add_forward(T* out, const T* pos, std::int64_t B, std::int64_t Tn, std::int64_t C) {
    ranges(B * Tn, B * Tn * C, [&](std::int64_t b, std::int64_t e, int) {
        for (std::int64_t r = b; r < e; r++) {
            const T* p = pos + (r % Tn) * C;
            T* o = out + r * C;
            for (std::int64_t c = 0; c < C; c++) o[c] += p[c];
        }
    });
}

template <typename T>
void position_rows_add_forward(T* out, const T* pos, const std::int64_t* positions, std::int64_t N, std::int64_t C) {
    ranges(N, N * C, [&](std::int64_t b, std::int64_t e, int) {
        for (std::int64_t r = b; r < e; r++) {
            const T* p = pos + positions[r] * C;
            T* o = out + r * C;
            for (std::int64_t c = 0; c < C; c++) o[c] += p[c];
        }
    });
}

template <typename T>
void position_add_backward(T* dpos, const T* dout, std::int64_t B, std::int64_t Tn, std::int64_t C) {
    ranges(Tn, B * Tn * C, [&](std::int64_t t0, std::int64_t t1, int) {
        for (std::int64_t t = t0; t < t1; t++)
            for (std::int64_t b = 0; b < B; b++) {
                const T* g = dout + (b * Tn + t) * C;
                for (std::int64_t c = 0; c < C; c++) dpos[t * C + c] += g[c];
            }
    });
}

#define RETRO_INSTANTIATE(T)                                                                                       \
    template void embedding_forward<T>(T*, const std::int32_t*, const T*, std::int64_t, std::int64_t, std::int64_t); \
    template void embedding_backward<T>(T*, const T*, const std::int32_t*, std::int64_t, std::int64_t);            \
    template void position_add_forward<T>(T*, const T*, std::int64_t, std::int64_t, std::int64_t);                 \
    template void position_rows_add_forward<T>(T*, const T*, const std::int64_t*, std::int64_t, std::int64_t);      \
    template void position_add_backward<T>(T*, const T*, std::int64_t, std::int64_t, std::int64_t);
RETRO_INSTANTIATE(float)
RETRO_INSTANTIATE(double)
#undef RETRO_INSTANTIATE

}  // namespace retro::nn
