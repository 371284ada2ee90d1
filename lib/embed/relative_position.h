// Relative-position attention bias shared by the T5 encoder (t5_model.h) and MPNet (bert_model.h):
// transformers' bidirectional bucket of (key - query) and the per-head bias of every offset a batch needs.
#pragma once
#include <cstdint>
#include <vector>

namespace retro {

// transformers' T5Attention._relative_position_bucket(relative_position = key - query, bidirectional=True,
// num_buckets, max_distance), the log-spaced part computed in float as torch does; MPNetEncoder.relative_position_bucket
// is the same function (its n = -relative_position, the "n < 0" half = key after query).
int relative_position_bucket(int relative_position, int num_buckets, int max_distance);

// bias[h · span + (max_len - 1) + (j - i)] = table[bucket(j - i), h] for every key - query offset of a sequence of
// max_len tokens (span = 2·max_len - 1); a sequence of length len reads its 2·len - 1 offsets from max_len - len on
// (bert_attention_head's `bias` argument). table: [num_buckets, heads] as nn.Embedding(num_buckets, heads) holds it.
std::vector<float> relative_bias_by_offset(const std::vector<float>& table, int heads, int num_buckets, int max_distance,
                                           int max_len);

}  // namespace retro
