#include "model/model_flops.h"

namespace retro {

TrainFlops train_step_flops(const RetroConfig& c, std::int64_t B, std::int64_t n, bool retrieval) {
    const double Ce = double(c.enc_dim), Cd = double(c.dec_dim), V = double(c.num_tokens), H = double(c.heads),
                 D = double(c.dim_head), HD = double(c.inner_dim()), cs = double(c.chunk_size),
                 k = double(c.num_neighbours), r = double(c.retrieved_len());
    const std::int64_t chunks = n / c.chunk_size;
    retrieval = retrieval && c.first_cca_layer() > 0 && chunks > 0;
    const double N = double(B) * double(n), l = double(chunks), Q = double(B) * l * cs, M = double(B) * l * k,
                 R = M * r;
    TrainFlops f;
    if (c.enc_dim != c.dec_dim) f.linear += 2 * N * Ce * Cd;
    for (std::int64_t i = 1; i <= c.dec_depth; i++) {
        f.linear += 2 * N * Cd * HD * 4 + 2 * N * Cd * 4 * Cd * 2;
        f.attention += 4 * H * D * double(B) * double(n) * double(n);
        if (retrieval && c.dec_has_cross(i)) {
            f.linear += 2 * Q * Cd * HD * 2 + 2 * R * Cd * HD * 2;
            f.attention += 4 * H * D * double(B) * l * cs * (k * r + 1);
        }
    }
    if (retrieval) {
        for (std::int64_t j = 1; j <= c.enc_depth; j++) {
            f.linear += 2 * R * Ce * HD * 4 + 2 * R * Ce * 4 * Ce * 2;
            f.attention += 4 * H * D * M * r * r;
            if (c.enc_has_cross(j)) {
                f.linear += 2 * R * Ce * HD * 2 + 2 * M * cs * Cd * HD * 2;
                f.attention += 4 * H * D * M * r * cs;
            }
        }
        f.linear += 2 * R * Ce * Cd;
    }
    f.linear += 2 * N * Cd * V;
    return f;
}

}  // namespace retro
