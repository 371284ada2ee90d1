// PackedLinear: an inference-only fp32 linear layer for the CPU BERT embedder,
//   y[rows, out] = epilogue(x[rows, in] · W^T + b)        (torch's nn.Linear layout, W [out, in])
// with an optional GELU (erf form) epilogue.
//
// Why not cblas_sgemm: OpenBLAS packs both operands on every call and the bias needs its own pass
// over y (together ~12 % of a 1-thread MiniLM forward). Here W is packed once, at construction, into
// 48-column panels, and an AVX-512 kernel keeps an 8-row x 48-column tile of y in 24 zmm
// accumulators that start from the bias; GELU runs on the tile while it is in L1. Only x is packed
// per call. Blocking (BLIS order, packed_linear.cpp): the packed x strip of a tile (K block x 8)
// stays in L1 while the kernel walks the W panels of a ~576 KiB block held in L2.
//
// Each output is bias + Σ_k x[r,k]·W[o,k], one FMA per term in k order, whatever the row blocking or
// thread count. Without AVX-512F at run time (or with `allow_avx512 = false`) it calls
// cblas_sgemm on the weights as given: the same values up to float rounding.
#pragma once
#include <cstdint>
#include <memory>

namespace retro::nn {

enum class LinearEpilogue { NONE, GELU_ERF };

class PackedLinear {
public:
    PackedLinear() = default;
    // w: [out, in] row-major, b: [out] or null (zero bias). Copies what it needs.
    PackedLinear(const float* w, const float* b, int out, int in, bool allow_avx512 = true);

    // Single-threaded (OpenBLAS must be set to one thread by the caller on the fallback path); call
    // it from each thread on its own rows. x [rows, in] and y [rows, out] must not overlap.
    void apply(const float* x, std::int64_t rows, float* y, LinearEpilogue epilogue = LinearEpilogue::NONE) const;

    int in() const { return in_; }
    int out() const { return out_; }
    bool uses_avx512() const { return avx512_; }
    // Whether this CPU (and build) can run the packed kernel.
    static bool avx512_supported();
    // Test hook: false makes the layers built after it take the cblas_sgemm path, a CPU without AVX-512's (default
    // true). A model packs its layers on its first forward.
    static void set_avx512_allowed(bool allowed);

private:
    struct Free {
        void operator()(float* p) const;
    };
    void apply_packed(const float* x, std::int64_t rows, float* y, bool gelu) const;
    int out_ = 0, in_ = 0;
    bool avx512_ = false;
    std::unique_ptr<float[], Free> w_;   // packed panels [out/48][in][48] (AVX-512) or [out, in] as given
    std::unique_ptr<float[], Free> b_;   // bias, zero-padded to whole panels
};

// 0.5·x·(1 + erf(x/√2)) in place over n floats (fast_erf, max abs error 4.2e-7; vectorised).
void gelu_erf_inplace(float* x, std::int64_t n);

}  // namespace retro::nn
