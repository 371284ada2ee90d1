// The copy head (config "copy_head", docs/model.md, docs/retrieval.md section 17): an opt-in departure from
// RETRO-pytorch that lets the model copy from the text CCA reads. For decoder position p (which reads chunk
// u(p) = floor((p + 1)/cs) - 1, as CCA does) and each of that chunk's k neighbours N [r tokens]:
//   L(j)   = the number of consecutive tokens ending at p that match N ending at j:  x[p - t] == N[j - t] for
//            t = 0 .. L-1 (pads never match; at most kCopyMaxMatch), for j = 0 .. r-2
//   j*     = the j of the longest L (the last such j on a tie); no candidate when L(j*) = 0 or N[j*+1] is a pad
//   cand   = N[j* + 1], the token that followed the match in the neighbour; bucket b = copy_bucket(L(j*))
//   logits[p, cand] += kCopyBiasScale * bias[b] + weight[b] . xn[p]          (xn: the normalised final state)
// i.e. a per-token gate on "copy what followed the longest match", the pointer that section 7's copy mixture
// showed the neighbours hold (0.08 nats a token on the demo's validation split over a 1,000-step twin). The
// parameters (copy_head.bias [kCopyBuckets], copy_head.weight [kCopyBuckets, dec_dim]) start at zero, so a
// fresh model computes the plain RETRO's logits; without neighbours there are no candidates and the head adds
// nothing. kCopyBiasScale multiplies the bias in the forward: under Adam that is the bias's learning rate x 16
// (the offsets the gate needs are a few nats; at lr 2e-3 a plain bias would move at most ~1 in 1,000 steps).
// Two neighbours proposing the same token both add (their evidence sums).
// backward: dxn[p] += dlogits[p, cand] weight[b]; dbias[b] += kCopyBiasScale dlogits[p, cand];
//           dweight[b] += dlogits[p, cand] xn[p]   (all +=; the logits' own gradient passes through unchanged).
#pragma once
#include <cstdint>
#include <vector>

namespace retro::nn {

inline constexpr std::int64_t kCopyBuckets = 12;
inline constexpr std::int64_t kCopyMaxMatch = 64;
inline constexpr double kCopyBiasScale = 16.0;

// Match length L >= 1 -> bucket: 1, 2, 3, 4, 5-6, 7-8, 9-12, 13-16, 17-24, 25-32, 33-48, 49-64.
std::int64_t copy_bucket(std::int64_t match_length);

struct CopyCandidate {
    std::int32_t token = -1;    // -1: none
    std::int32_t bucket = -1;
    std::int32_t length = 0;    // the match length L(j*)
};

// The candidates of position p of `history` (tokens history[0..p] known) against neighbours [k, r]: out[k].
void copy_candidates(CopyCandidate* out, const std::int32_t* history, std::int64_t p, const std::int32_t* neighbours,
                     std::int64_t k, std::int64_t r, std::int32_t pad_id);

// Every position of a training batch: inputs [B, n], retrieved [B, l, k, r] (l = n / cs) -> out [B, n, k]
// (positions p < cs - 1 and p past the last retrieved chunk's readers get none).
void copy_candidates_batch(std::vector<CopyCandidate>& out, const std::int32_t* inputs, std::int64_t B,
                           std::int64_t n, const std::int32_t* retrieved, std::int64_t l, std::int64_t k,
                           std::int64_t r, std::int64_t cs, std::int32_t pad_id);

// logits [rows, V] += the gates of cand [rows, k]; xn [rows, C]; bias [kCopyBuckets], weight [kCopyBuckets, C].
template <typename T>
void copy_head_forward(T* logits, const T* xn, const CopyCandidate* cand, std::int64_t rows, std::int64_t k,
                       std::int64_t V, std::int64_t C, const T* bias, const T* weight);
// dxn, dbias, dweight +=  (any may be null: not wanted).
template <typename T>
void copy_head_backward(T* dxn, T* dbias, T* dweight, const T* dlogits, const T* xn, const CopyCandidate* cand,
                        std::int64_t rows, std::int64_t k, std::int64_t V, std::int64_t C, const T* weight);

}  // namespace retro::nn
