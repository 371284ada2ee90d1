// KV-cached RETRO inference (ARCHITECTURE.md Decision 6, RETRO.md B.6-B.7, C.2): the arithmetic of
// RetroModel::forward restricted to the new positions of each sequence, so logits equal a full
// recompute (tests/test_generate.cpp holds it to 1e-5 relative in fp32).
//   self-attention  keys/values of every earlier position are kept per layer, keys already rotated at
//                   their position; a new row at position p attends keys 0..p.
//   encoder         runs once per finished chunk u, inside the step that feeds its last token
//                   (position u*cs + cs - 1): its context is the first CCA layer's residual stream x1 at
//                   positions u*cs .. u*cs + cs - 1 (kept per sequence), its input chunk u's k neighbours
//                   (+ continuations) given by add_neighbours. E_u never changes afterwards.
//   CCA             every CCA layer projects E_u to keys (rotated at 0..r-1 per neighbour) and values once
//                   and keeps them; a row at p >= cs - 1 reads chunk u(p) = floor((p + 1)/cs) - 1 with the
//                   learned null key/value and the pad mask; its query is rotated at 2cs - 2 when
//                   p = u*cs + cs - 1, else at 0 (RP's quirk, B.6.6). Rows p < cs - 1 get 0.
// Several sequences advance together: the rows of all sequences share each linear's GEMM, attention
// runs per (sequence, head). Without retrieval the model is a plain decoder (CCA skipped), as RP's
// forward without neighbours.
#pragma once
#include <cstdint>
#include <vector>

#include "model/layer_params.h"
#include "model/retro.h"
#include "nn/rotary.h"

namespace retro {

template <typename T>
class CachedDecoder {
public:
    // `model` must outlive the decoder (its parameters are read in place).
    CachedDecoder(const RetroModel<T>& model, std::int64_t sequences, bool retrieval);

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
    // then in logits(): all of them when all_logits, else only each advancing sequence's last row.
    void step(const std::vector<std::vector<std::int32_t>>& tokens, bool all_logits = false);
    const std::vector<T>& logits() const { return logits_; }       // [rows, num_tokens]
    // Row in logits() of sequence s's last new position after step(), or -1 when s did not advance.
    std::int64_t last_row(std::int64_t s) const { return last_row_[static_cast<std::size_t>(s)]; }

private:
    struct Sequence {
        std::int64_t n = 0;                      // positions fed so far
        std::vector<std::vector<T>> k, v;        // per decoder layer: [n, HD] (k rotated)
        std::vector<T> ctx;                      // first CCA layer's x1 rows [n, Cd] (encoder context)
        std::vector<std::int32_t> retrieved;     // [chunks, k, r]
        std::vector<std::vector<T>> ck, cv;      // per decoder layer: [encoded chunks, k*r, HD] CCA keys/values
        std::vector<std::uint8_t> mask;          // [encoded chunks, k*r]
        std::int64_t encoded = 0;                // chunks whose E_u is in ck/cv
    };
    struct Row {
        std::int64_t seq, pos;
    };
    void self_attention(const DecoderLayerParams<T>& L, const std::vector<T>& xn, std::vector<T>& y);
    void encode_finished_chunks();
    void chunked_cross_attention(const DecoderLayerParams<T>& L, const std::vector<T>& xn, std::vector<T>& y,
                                 std::vector<std::uint8_t>& touched);

    const RetroModel<T>& model_;
    RetroConfig c_;
    std::vector<DecoderLayerParams<T>> dec_;
    std::vector<EncoderLayerParams<T>> enc_;
    bool retrieval_ = false;
    std::int64_t k_ = 0, r_ = 0, first_cca_ = -1;   // first_cca_: 0-based layer index, -1 = none
    std::vector<Sequence> seqs_;
    std::vector<Row> rows_;                        // the rows of the current step
    std::vector<std::int64_t> row_begin_;          // first row of each sequence in rows_ (size S + 1)
    nn::RotaryTable<T> rot_rows_, rot_enc_, rot_enc_ctx_, rot_cca_k_;
    std::vector<T> logits_;
    std::vector<std::int64_t> last_row_;
};

}  // namespace retro
