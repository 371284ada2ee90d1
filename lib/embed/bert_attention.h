// Self-attention of one (sequence, head) for the CPU BERT and T5 encoders (bert_model.cpp, t5_model.cpp):
//   ctx[i, :] = Σ_j softmax_j(scale · q_i·k_j + bias[len-1 + j-i]) · v_j[:]        for i, j < len
// where `bias` (2·len-1 floats, or null for none) is a relative-position bias (T5's with scale 1, MPNet's with
// scale 1/√d: relative_position.h).
// over the sequence's real tokens only (what HF's padding mask gives). q, k, v point at the head's
// first row in the packed QKV buffer (row stride ld); ctx rows are written at stride ldc.
//
// With AVX-512F and a head size of at most 64 it runs fused kernels (bert_attention.cpp): K is
// transposed once into scratch, scores come from a 12-row x 32-key register tile, the softmax is
// left unnormalised (exp(scale·(s - max))) and each output row is divided by its sum at the end,
// so the scores are read and written twice instead of six times through two sgemm calls.
// Otherwise: two cblas_sgemm calls around a row softmax.
// Both take the query rows a block at a time (bert_attention.cpp), so the scratch holds a block's scores, not the
// sequence's len x len matrix: at most bert_attention_scratch_floats(len, d) floats.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace retro {

// Per-thread scratch, grown on demand.
struct AttentionScratch {
    std::vector<float> kt, p, sum;
};

void bert_attention_head(const float* q, const float* k, const float* v, std::int64_t ld, int len, int d, float scale,
                         float* ctx, std::int64_t ldc, AttentionScratch& scratch, const float* bias = nullptr);

// The floats an AttentionScratch grows to for one head of len tokens and head size d (either path): what a forward's
// memory check counts a thread.
std::size_t bert_attention_scratch_floats(int len, int d);

// Test hook: false forces the cblas path (both paths are compared against a double reference).
void bert_attention_set_fused(bool enabled);
bool bert_attention_fused_available(int d);

}  // namespace retro
