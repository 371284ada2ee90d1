// Embedding lookup (RP's token_emb / pos_emb, torch.nn.Embedding without padding_idx: the pad row
// is an ordinary row and receives gradient).
//   forward:   out[N, C] = table[ids[n], :]                      ids in [0, V)
//   backward:  dtable[ids[n], :] += dout[n, :]                   (parameters: +=)
//   positions: out[B, T, C] += pos[t, :];  dpos[t, :] += sum_b dout[b, t, :]
//   positions of single rows (KV-cached decoding): out[n, :] += pos[positions[n], :]
#pragma once
#include <cstdint>

namespace retro::nn {

template <typename T>
void embedding_forward(T* out, const std::int32_t* ids, const T* table, std::int64_t N, std::int64_t V, std::int64_t C);
template <typename T>
void embedding_backward(T* dtable, const T* dout, const std::int32_t* ids, std::int64_t N, std::int64_t C);

template <typename T>
void position_add_forward(T* out, const T* pos, std::int64_t B, std::int64_t Tn, std::int64_t C);
template <typename T>
void position_rows_add_forward(T* out, const T* pos, const std::int64_t* positions, std::int64_t N, std::int64_t C);
template <typename T>
void position_add_backward(T* dpos, const T* dout, std::int64_t B, std::int64_t Tn, std::int64_t C);

}  // namespace retro::nn
