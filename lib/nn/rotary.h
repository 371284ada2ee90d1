// Partial rotary position embedding as RETRO-pytorch applies it (RotaryEmbedding + apply_rotary_pos_emb):
// only the first R = min(dim_head, 32) dims of each head rotate, the rest pass through.
//   inv_freq[j] = 1 / 10000^(2j/R), j < R/2;   angle[p] = [pos_p * inv_freq, pos_p * inv_freq]  (halves)
//   y = x * cos(angle) + rotate_half(x) * sin(angle),  rotate_half([x1, x2]) = [-x2, x1]  (NeoX pairs i, i+R/2)
// x is [B, N, H*D] (heads interleaved as torch's 'b n (h d)'); the table has N rows, one per position.
// backward: dx = dy * cos + rotate_half^T(dy * sin),  rotate_half^T([g1, g2]) = [g2, -g1]  (=, in place ok)
// A row with position 0 is the identity (RP's zero-padded query table in CCA relies on it, RETRO.md B.6.6).
#pragma once
#include <cstdint>
#include <vector>

namespace retro::nn {

template <typename T>
struct RotaryTable {
    std::int64_t rows = 0, rot_dim = 0;
    std::vector<T> cos, sin;   // [rows, rot_dim]
};

// Builds the table for the given positions (angles computed in T, as torch computes them in fp32).
template <typename T>
RotaryTable<T> rotary_table(const std::vector<std::int64_t>& positions, std::int64_t rot_dim);
// The table of positions 0..n-1.
template <typename T>
RotaryTable<T> rotary_table_range(std::int64_t n, std::int64_t rot_dim);

template <typename T>
void rotary_forward(T* y, const T* x, const RotaryTable<T>& table, std::int64_t B, std::int64_t N, std::int64_t H,
                    std::int64_t D);
template <typename T>
void rotary_backward(T* dx, const T* dy, const RotaryTable<T>& table, std::int64_t B, std::int64_t N, std::int64_t H,
                     std::int64_t D);
// The same over a table given as cos / sin [N, rot_dim] pointers (nn/nn_backend.h's RotaryView).
template <typename T>
void rotary_forward(T* y, const T* x, const T* cos, const T* sin, std::int64_t rot_dim, std::int64_t B, std::int64_t N,
                    std::int64_t H, std::int64_t D);
template <typename T>
void rotary_backward(T* dx, const T* dy, const T* cos, const T* sin, std::int64_t rot_dim, std::int64_t B,
                     std::int64_t N, std::int64_t H, std::int64_t D);

}  // namespace retro::nn
