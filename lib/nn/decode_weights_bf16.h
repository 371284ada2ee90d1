// bf16 copies of fp32 weight matrices for the CPU decode step (retro-generate --dtype bf16): a KV-cached token reads
// every linear weight once, so half the bytes is close to half the time (docs/generate.md). The table holds
// round-to-nearest-even copies of registered tensors; while a DecodeWeightsScope installs it, linear_forward's
// few-row path (1-8 rows, nn/linear.h) reads the bf16 copy of any W that lies in a registered tensor, widened to
// fp32 exactly inside the GEMV (nn/gemv_avx512.h), and fp32 activations throughout; so does its every-row path
// (nn::LinearSums::row_invariant, the decode rows of more than 8 sequences). GEMMs (a prompt of more than 8 tokens,
// the encoder) keep the fp32 weights. Needs AVX-512 (F, BW, VL) or AVX2 and FMA (nn/gemv_avx512.h's kernels): callers check
// bf16_decode_available().
#pragma once
#include <cstdint>
#include <map>
#include <vector>

namespace retro::nn {

bool bf16_decode_available();

class DecodeWeightsBf16 {
public:
    // Copies w[0, numel) rounded to bf16; `w` is the key (a pointer into it finds the copy at the same offset).
    void add(const float* w, std::int64_t numel);
    // The bf16 element for fp32 weight pointer `w` (inside a registered tensor, with `count` elements from there),
    // or null when `w` is not registered.
    const std::uint16_t* find(const float* w, std::int64_t count) const;
    std::int64_t bytes() const { return bytes_; }

private:
    struct Tensor {
        std::int64_t numel = 0;
        std::vector<std::uint16_t> bf16;
    };
    std::map<const float*, Tensor> tensors_;   // by the fp32 tensor's first element
    std::int64_t bytes_ = 0;
};

// Installs `table` for linear_forward for the scope's lifetime (and restores the previous one). Made and destroyed
// outside parallel regions; the table must outlive the scope. Process-wide (the GEMV runs on OpenMP's threads, so
// a thread-local one would not reach them): two threads decoding at once must not install tables of their own
// (the tools decode on one thread; a library user running decoders on several threads keeps --dtype fp32).
class DecodeWeightsScope {
public:
    explicit DecodeWeightsScope(const DecodeWeightsBf16* table);
    ~DecodeWeightsScope();
    DecodeWeightsScope(const DecodeWeightsScope&) = delete;
    DecodeWeightsScope& operator=(const DecodeWeightsScope&) = delete;

private:
    const DecodeWeightsBf16* previous_;
};

// The table installed now, or null.
const DecodeWeightsBf16* decode_weights_bf16();

}  // namespace retro::nn
