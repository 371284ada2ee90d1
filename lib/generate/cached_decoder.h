// KV-cached RETRO inference (ARCHITECTURE.md Decision 6, RETRO.md B.6-B.7, C.2): RetroModel::forward restricted
// to the new positions of each sequence, so logits equal a full recompute (tests/test_generate.cpp holds it
// to 1e-5 relative in fp32). It runs the model's own code on the new rows: the encoder of model/encoder.h,
// self-attention and CCA through their row-incremental entry points (nn/attention_kv_cache.h,
// nn/chunked_cross_attention.h: cca_context_forward + cca_rows_forward), the shapes of model/layer_shapes.h.
//   self-attention  keys/values of every earlier position are kept per layer and sequence, keys already
//                   rotated at their position; a new row at position p attends keys 0..p.
//   encoder         runs once per finished chunk u, inside the step that feeds its last token
//                   (position u*cs + cs - 1): its context is the first CCA layer's residual stream x1 at
//                   positions u*cs .. u*cs + cs - 1 (kept per sequence), its input chunk u's k neighbours
//                   (+ continuations) given by add_neighbours. E_u never changes afterwards.
//   CCA             every CCA layer projects E_u to keys and values once and keeps them with the pad mask; a
//                   row at p >= cs - 1 reads chunk u(p) = floor((p + 1)/cs) - 1; rows p < cs - 1 get 0.
//   copy head       (config copy_head, nn/copy_head.h) each output row's gates, from the sequence's ids so far
//                   and chunk u(p)'s neighbours, as RetroModel::forward computes them.
// Several sequences advance together, batch- and thread-invariantly in fp32 (a sequence's logits are the bits it gets
// decoded alone, at any thread count: docs/generate.md; the double decoder, a test reference, is thread- but not
// batch-invariant): the sequences that feed one token go through a step together, their
// linears row by row (nn::LinearSums::row_invariant: the few-row GEMV in groups of 8, never sgemm, whose sums for a
// row depend on the rows beside it); a sequence that feeds more (its prompt) goes through the step alone; the encoder
// runs a sequence at a time; those GEMMs over tiles fixed by their shapes (nn::LinearSums::thread_invariant);
// attention runs per (sequence, head). Without retrieval the model is a plain decoder (CCA skipped), as RP's forward
// without neighbours.
// bf16 weights (retro-generate --dtype bf16): given a table of the model's linear weights in bf16
// (linear_weights_bf16 below), the decode rows' linears (and a prompt of at most 8 tokens) read those
// (nn/decode_weights_bf16.h): half the bytes, fp32 activations and sums; the GEMMs (a longer prompt, the encoder
// over k neighbours x 2 cs tokens) keep the fp32 weights.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "model/encoder.h"
#include "model/layer_params.h"
#include "model/retro.h"
#include "nn/attention_kv_cache.h"
#include "nn/chunked_cross_attention.h"
#include "nn/decode_weights_bf16.h"
#include "nn/rotary.h"

namespace retro {

template <typename T>
class CachedDecoder {
public:
    // `model` must outlive the decoder (its parameters are read in place), and `bf16_weights` (optional) too.
    CachedDecoder(const RetroModel<T>& model, std::int64_t sequences, bool retrieval,
                  const nn::DecodeWeightsBf16* bf16_weights = nullptr);

    std::int64_t sequences() const { return static_cast<std::int64_t>(seqs_.size()); }
    bool retrieval() const { return retrieval_; }
    std::int64_t length(std::int64_t s) const { return seqs_[static_cast<std::size_t>(s)].n; }
    // Chunks of sequence s that have neighbours so far (the next add_neighbours gives chunk `this`).
    std::int64_t neighbour_chunks(std::int64_t s) const {
        return static_cast<std::int64_t>(seqs_[static_cast<std::size_t>(s)].retrieved.size()) / (k_ * r_);
    }
    // Neighbour + continuation ids of the next chunk of sequence s: [k, r] (r = 2 cs), pad = masked.
    // Needed for chunk u before a step feeds position u*cs + cs - 1.
    void add_neighbours(std::int64_t s, const std::int32_t* retrieved);
    // Forgets sequence s (length 0, no neighbours), keeping its buffers for reuse.
    void reset(std::int64_t s);

    // Feeds tokens[s] (possibly none) to each sequence s. Logits of the new rows, in sequence order, are
    // then in logits(): all of them when all_logits, else only each advancing sequence's last row. Each sequence
    // that feeds more than one token goes through the layers alone (batch invariance, above).
    void step(const std::vector<std::vector<std::int32_t>>& tokens, bool all_logits = false);
    const std::vector<T>& logits() const { return logits_; }       // [rows, num_tokens]
    // Row in logits() of sequence s's last new position after step(), or -1 when s did not advance.
    std::int64_t last_row(std::int64_t s) const { return last_row_[static_cast<std::size_t>(s)]; }

private:
    struct Sequence {
        std::int64_t n = 0;                      // positions fed so far
        std::vector<T> ctx;                      // first CCA layer's x1 rows [n, Cd] (encoder context)
        std::vector<std::int32_t> retrieved;     // [chunks, k, r]
        std::vector<std::int32_t> tokens;        // the ids fed so far (the copy head's history)
        std::int64_t encoded = 0;                // chunks whose E_u is in the CCA caches
    };
    // step() for one group of sequences (the others feed nothing)
    void step_group(const std::vector<std::vector<std::int32_t>>& tokens, bool all_logits);
    void encode_finished_chunks();
    // E_u of sequence s's chunks u0 .. u0 + J - 1 (one encoder batch), into each CCA layer's cache
    void encode_chunks(std::int64_t s, std::int64_t u0, std::int64_t J);
    // config copy_head: adds the gates of rows `src` (indices into this step's rows) to logits_ (xn: their
    // normalised final states).
    void add_copy_head(const std::vector<std::int64_t>& src, const std::vector<T>& xn);

    const RetroParams<T>& p_;
    RetroConfig c_;
    const nn::DecodeWeightsBf16* bf16_ = nullptr;
    bool retrieval_ = false;
    std::int64_t k_ = 0, r_ = 0, first_cca_ = -1;   // first_cca_: 0-based layer index, -1 = none
    std::vector<Sequence> seqs_;
    std::vector<std::vector<nn::KvCache<T>>> kv_;     // [decoder layer][sequence] self-attention keys/values
    std::vector<std::vector<nn::CcaKvCache<T>>> cca_kv_;   // [decoder layer][sequence] CCA keys/values (CCA layers)
    EncoderCache<T> encoder_;
    std::vector<std::int64_t> row_seq_, row_pos_;   // the rows of the current step: sequence, position
    std::vector<std::int64_t> row_begin_;          // first row of each sequence (size S + 1)
    std::vector<T> logits_;
    std::vector<std::int64_t> last_row_;
};

// bf16 copies of every linear weight of `model` (the tensors ParamLayout initialises as linear weights), for
// CachedDecoder's bf16 decode step. Needs nn::bf16_decode_available().
std::unique_ptr<nn::DecodeWeightsBf16> linear_weights_bf16(const RetroModel<float>& model);

}  // namespace retro
