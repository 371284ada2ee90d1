// The next token of each listed sequence after a decoder's step, for the generator and retro-bench generate alike:
// drawn where the decoder's logits are (BackendDecoder::sample_last: on the GPU only the ids come back), or on the
// host from logits() (CachedDecoder). Either way the uniforms come from the caller's streams in seqs order, one per
// sequence unless greedy, and the arithmetic is nn/sampling.h's sample_row.
// provides: next_tokens
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

#include "generate/sampler.h"

namespace retro {

// ids[j] = the next token of sequence seqs[j] (each advanced in dec's last step) among ids [0, vocab) of the logits'
// V (vocab <= V: a tokenizer smaller than the model's vocabulary); uniform(s) gives its draw's u. On the host, a row
// with a logit that is not finite gives -1 (the caller names the weights: a draw over NaN or infinite logits, or a
// greedy pick among them, means nothing).
template <typename Decoder, typename Uniform>
void next_tokens(Decoder& dec, std::int64_t V, std::int64_t vocab, const SamplerOptions& o,
                 const std::vector<std::int64_t>& seqs, Uniform&& uniform, std::vector<std::int32_t>& ids) {
    std::vector<double> u(o.greedy ? 0 : seqs.size());
    for (std::size_t j = 0; j < u.size(); j++) u[j] = uniform(seqs[j]);
    if constexpr (requires { dec.sample_last(o, seqs, u, ids, vocab); }) {
        dec.sample_last(o, seqs, u, ids, vocab);
    } else {
        ids.assign(seqs.size(), -1);
        for (std::size_t j = 0; j < seqs.size(); j++) {
            const float* row = dec.logits().data() + dec.last_row(seqs[j]) * V;
            bool finite = true;
            for (std::int64_t i = 0; i < vocab; i++) finite = finite && std::isfinite(row[i]);
            ids[j] = finite ? nn::sample_row(row, vocab, o, o.greedy ? 0.0 : u[j]) : -1;
        }
    }
}

}  // namespace retro
