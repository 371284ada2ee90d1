// The nn ops in the registry (lib/nn): each as a CpuCase body running forward and backward in
// float or double. Test shapes are small and hit the edges (masks, null keys, partial chunks); perf
// shapes are the demo model's (dim 128, 8 heads of 32, 256 tokens, batch 8). The ops of nn/nn_backend.h
// (linear, rmsnorm, gelu, rotary, attention, cross-entropy, the copy head) are BackendCases (ops/backend_case.h): the same op
// also through an NnBackend, so they run on CUDA (kernels/nn_*.cu); the backend-only ops are in
// ops_nn_backend.cpp.
#include <cstdint>
#include <memory>
#include <random>

#include "backend_case.h"
#include "cpu_case.h"
#include "nn/attention.h"
#include "nn/attention_layer.h"
#include "nn/chunked_cross_attention.h"
#include "nn/copy_head.h"
#include "nn/cross_entropy.h"
#include "nn/feed_forward.h"
#include "nn/gelu.h"
#include "nn/linear.h"
#include "nn/rmsnorm.h"
#include "nn/rotary.h"

namespace retro::ops {
namespace {

using std::int64_t;
template <typename T>
using V = std::vector<std::vector<T>>;

template <typename Body>
std::unique_ptr<Case> make(typename CpuCase<Body>::Spec spec, Tensors in, Body body) {
    return std::make_unique<CpuCase<Body>>(std::move(spec), std::move(in), std::move(body));
}

std::string dims(std::initializer_list<std::pair<const char*, int64_t>> d) {
    std::string s;
    for (const auto& [k, v] : d) {   // appended piece by piece (GCC 12 warns on a "+" chain here)
        if (!s.empty()) s += ' ';
        s += k;
        s += std::to_string(v);
    }
    return s;
}

// y = x W^T + b. Seed 3: no bias and no dx (null b, null dx: dx and db stay 0); seed 4: no dW (nor db).
std::unique_ptr<Case> linear_case(int64_t N, int64_t I, int64_t O, std::uint64_t seed) {
    std::mt19937 rng(static_cast<unsigned>(seed));
    Tensors in{random_tensor(N * I, rng), random_tensor(O * I, rng), random_tensor(O, rng), random_tensor(N * O, rng)};
    const bool bias = seed != 3, want_dx = seed != 3, want_dw = seed != 4;
    auto body = [=]<typename T>(const V<T>& x, bool bwd) -> V<T> {
        V<T> out{std::vector<T>(N * O)};
        nn::linear_forward(out[0].data(), x[0].data(), x[1].data(), bias ? x[2].data() : nullptr, N, I, O);
        if (!bwd) return out;
        out.push_back(std::vector<T>(N * I, T(0)));
        out.push_back(std::vector<T>(O * I, T(0)));
        out.push_back(std::vector<T>(O, T(0)));
        nn::linear_backward(want_dx ? out[1].data() : nullptr, want_dw ? out[2].data() : nullptr,
                            bias ? out[3].data() : nullptr, x[3].data(), x[0].data(), x[1].data(), N, I, O);
        return out;
    };
    auto device = [=](nn::NnBackend& be, const F32Tensors& x) -> F32Tensors {
        BackendArena a(be);
        const float *X = a.up(x[0]), *W = a.up(x[1]), *b = bias ? a.up(x[2]) : nullptr, *dy = a.up(x[3]);
        float* y = a.alloc<float>(N * O);
        float *dx = a.zeros<float>(N * I), *dW = a.zeros<float>(O * I), *db = a.zeros<float>(O);
        be.linear_forward(y, X, W, b, N, I, O);
        be.linear_backward(want_dx ? dx : nullptr, want_dw ? dW : nullptr, bias ? db : nullptr, dy, X, W, N, I, O);
        return {a.down(y, N * O), a.down(dx, N * I), a.down(dW, O * I), a.down(db, O)};
    };
    const double f = 2.0 * N * I * O;
    auto c = std::make_unique<BackendCase<decltype(body)>>(
        typename BackendCase<decltype(body)>::Spec{dims({{"N", N}, {"I", I}, {"O", O}}) + (bias ? "" : " no-bias no-dx") +
                                                       (want_dw ? "" : " no-dW"),
                                                   3 * f, 4.0 * (2 * N * I + 2 * O * I + 2 * N * O), {"x", "W", "b", "dy"},
                                                   {true, true, true, false}, {"y", "dx", "dW", "db"}},
        std::move(in), body, device, std::vector<std::string>{"linear_forward", "linear_backward"});
    c->set_bf16_gemm();   // CUDA BF16: the GemmInputs::bf16 mode (tensor-core GEMMs on bf16-rounded inputs)
    return c;
}

std::unique_ptr<Case> rmsnorm_case(int64_t N, int64_t C, std::uint64_t seed) {
    std::mt19937 rng(static_cast<unsigned>(seed));
    Tensors in{random_tensor(N * C, rng), random_tensor(C, rng), random_tensor(N * C, rng)};
    auto body = [=]<typename T>(const V<T>& x, bool bwd) -> V<T> {
        V<T> out{std::vector<T>(N * C)};
        std::vector<T> norm(N);
        nn::rmsnorm_forward(out[0].data(), norm.data(), x[0].data(), x[1].data(), N, C);
        if (!bwd) return out;
        out.push_back(std::vector<T>(N * C));
        out.push_back(std::vector<T>(C, T(0)));
        nn::rmsnorm_backward(out[1].data(), out[2].data(), x[2].data(), x[0].data(), x[1].data(), norm.data(), N, C);
        return out;
    };
    auto device = [=](nn::NnBackend& be, const F32Tensors& x) -> F32Tensors {
        BackendArena a(be);
        const float *X = a.up(x[0]), *gamma = a.up(x[1]), *dy = a.up(x[2]);
        float *y = a.alloc<float>(N * C), *norm = a.alloc<float>(N), *dx = a.alloc<float>(N * C);
        float* dgamma = a.zeros<float>(C);
        be.rmsnorm_forward(y, norm, X, gamma, N, C);
        be.rmsnorm_backward(dx, dgamma, dy, X, gamma, norm, N, C);
        return {a.down(y, N * C), a.down(dx, N * C), a.down(dgamma, C)};
    };
    return make_backend_case<decltype(body)>({dims({{"N", N}, {"C", C}}), 12.0 * N * C, 4.0 * 5 * N * C,
                                              {"x", "gamma", "dy"}, {true, true, false}, {"y", "dx", "dgamma"}},
                                             std::move(in), body, device, {"rmsnorm_forward", "rmsnorm_backward"});
}

std::unique_ptr<Case> gelu_case(int64_t N, std::uint64_t seed) {
    std::mt19937 rng(static_cast<unsigned>(seed));
    Tensors in{random_tensor(N, rng, 4.0), random_tensor(N, rng)};
    auto body = [=]<typename T>(const V<T>& x, bool bwd) -> V<T> {
        V<T> out{std::vector<T>(N)};
        nn::gelu_forward(out[0].data(), x[0].data(), N);
        if (!bwd) return out;
        out.push_back(std::vector<T>(N));
        nn::gelu_backward(out[1].data(), x[1].data(), x[0].data(), N);
        return out;
    };
    auto device = [=](nn::NnBackend& be, const F32Tensors& x) -> F32Tensors {
        BackendArena a(be);
        const float *X = a.up(x[0]), *dy = a.up(x[1]);
        float *y = a.alloc<float>(N), *dx = a.alloc<float>(N);
        be.gelu_forward(y, X, N);
        be.gelu_backward(dx, dy, X, N);
        return {a.down(y, N), a.down(dx, N)};
    };
    return make_backend_case<decltype(body)>({dims({{"N", N}}), 30.0 * N, 4.0 * 4 * N, {"x", "dy"}, {true, false}, {"y", "dx"}},
                                             std::move(in), body, device, {"gelu_forward", "gelu_backward"});
}

std::unique_ptr<Case> rotary_case(int64_t B, int64_t N, int64_t H, int64_t D, int64_t R, std::uint64_t seed) {
    std::mt19937 rng(static_cast<unsigned>(seed));
    const int64_t n = B * N * H * D;
    Tensors in{random_tensor(n, rng), random_tensor(n, rng)};
    auto body = [=]<typename T>(const V<T>& x, bool bwd) -> V<T> {
        const auto table = nn::rotary_table_range<T>(N, R);
        V<T> out{std::vector<T>(n)};
        nn::rotary_forward(out[0].data(), x[0].data(), table, B, N, H, D);
        if (!bwd) return out;
        out.push_back(std::vector<T>(n));
        nn::rotary_backward(out[1].data(), x[1].data(), table, B, N, H, D);
        return out;
    };
    auto device = [=](nn::NnBackend& be, const F32Tensors& x) -> F32Tensors {   // backward in place (dx == dy)
        const auto table = nn::rotary_table_range<float>(N, R);
        BackendArena a(be);
        const nn::RotaryView view{a.up(table.cos), a.up(table.sin), N, R};
        const float* X = a.up(x[0]);
        float *y = a.alloc<float>(n), *g = a.up(x[1]);
        be.rotary_forward(y, X, view, B, N, H, D);
        be.rotary_backward(g, g, view, B, N, H, D);
        return {a.down(y, n), a.down(g, n)};
    };
    return make_backend_case<decltype(body)>({dims({{"B", B}, {"N", N}, {"H", H}, {"D", D}, {"R", R}}), 6.0 * B * N * H * R,
                                              4.0 * 4 * n, {"x", "dy"}, {true, false}, {"y", "dx"}},
                                             std::move(in), body, device, {"rotary_forward", "rotary_backward"});
}

// softmax(q k^T / sqrt(D) + mask) v, with the null key/value column and a pad mask when asked; `fused`: a case of
// the fused bf16 kernels (CUDA BF16 with set_fused_attention; not gradient-checked: nn.attention checks the math)
std::unique_ptr<Case> attention_case(nn::AttentionShape s, bool masked, std::uint64_t seed, bool fused = false) {
    std::mt19937 rng(static_cast<unsigned>(seed));
    const int64_t HD = s.H * s.D, nq = s.B * s.Nq * HD, nk = s.B * s.Nk * HD;
    Tensors in{random_tensor(nq, rng), random_tensor(nk, rng), random_tensor(nk, rng), random_tensor(HD, rng),
               random_tensor(HD, rng), random_tensor(nq, rng)};
    std::vector<std::uint8_t> mask;
    if (masked) {
        for (int64_t i = 0; i < s.B * s.Nk; ++i) mask.push_back(rng() % 3 != 0);
        for (int64_t j = 0; j < s.Nk; ++j) mask[static_cast<std::size_t>(j)] = 0;   // item 0 fully masked
    }
    auto body = [=]<typename T>(const V<T>& x, bool bwd) -> V<T> {
        const std::uint8_t* m = mask.empty() ? nullptr : mask.data();
        const T* nkp = s.null_kv ? x[3].data() : nullptr;
        const T* nvp = s.null_kv ? x[4].data() : nullptr;
        V<T> out{std::vector<T>(nq)};
        std::vector<T> probs(static_cast<std::size_t>(s.B * s.H * s.Nq * s.keys()));
        nn::attention_forward(out[0].data(), probs.data(), x[0].data(), x[1].data(), x[2].data(), nkp, nvp, m, s);
        if (!bwd) return out;
        for (std::size_t i : {std::size_t(nq), std::size_t(nk), std::size_t(nk), std::size_t(HD), std::size_t(HD)})
            out.push_back(std::vector<T>(i, T(0)));
        nn::attention_backward(out[1].data(), out[2].data(), out[3].data(), s.null_kv ? out[4].data() : nullptr,
                               s.null_kv ? out[5].data() : nullptr, x[5].data(), probs.data(), x[0].data(), x[1].data(),
                               x[2].data(), nkp, nvp, m, s);
        return out;
    };
    auto device = [=](nn::NnBackend& be, const F32Tensors& x) -> F32Tensors {
        BackendArena a(be);
        const float *q = a.up(x[0]), *k = a.up(x[1]), *v = a.up(x[2]), *dy = a.up(x[5]);
        const float* nkp = s.null_kv ? a.up(x[3]) : nullptr;
        const float* nvp = s.null_kv ? a.up(x[4]) : nullptr;
        const std::uint8_t* m = mask.empty() ? nullptr : a.up(mask);
        // probs as the model's arena sizes it (the fused stash may be larger than the probabilities: out_lo_at)
        float *out = a.alloc<float>(nq), *probs = a.alloc<float>(be.attention_saved_floats(s, !mask.empty()));
        float *dq = a.zeros<float>(nq), *dk = a.zeros<float>(nk), *dv = a.zeros<float>(nk);
        float *dnk = a.zeros<float>(HD), *dnv = a.zeros<float>(HD);
        be.attention_forward(out, probs, q, k, v, nkp, nvp, m, s);
        be.attention_backward(dq, dk, dv, s.null_kv ? dnk : nullptr, s.null_kv ? dnv : nullptr, dy, probs, q, k, v, nkp,
                              nvp, m, s);
        return {a.down(out, nq), a.down(dq, nq), a.down(dk, nk), a.down(dv, nk), a.down(dnk, HD), a.down(dnv, HD)};
    };
    const double f = 4.0 * s.B * s.H * s.Nq * s.keys() * s.D;
    auto c = std::make_unique<BackendCase<decltype(body)>>(
        typename BackendCase<decltype(body)>::Spec{
            dims({{"B", s.B}, {"Nq", s.Nq}, {"Nk", s.Nk}, {"H", s.H}, {"D", s.D}}) + (s.causal ? " causal" : "") +
                (s.null_kv ? " null_kv" : "") + (masked ? " masked" : "") + (fused ? " fused" : ""),
            3 * f, 4.0 * (3 * nq + 4 * nk), {"q", "k", "v", "null_k", "null_v", "dy"},
            {!fused, !fused, !fused, s.null_kv && !fused, s.null_kv && !fused, false},
            {"out", "dq", "dk", "dv", "dnull_k", "dnull_v"}},
        std::move(in), body, device, std::vector<std::string>{"attention_forward", "attention_backward"});
    if (fused) c->set_fused_attention();
    return c;
}

std::unique_ptr<Case> feed_forward_case(int64_t N, int64_t dim, std::uint64_t seed) {
    std::mt19937 rng(static_cast<unsigned>(seed));
    const int64_t inner = 4 * dim;
    Tensors in{random_tensor(N * dim, rng), random_tensor(inner * dim, rng), random_tensor(inner, rng),
               random_tensor(dim * inner, rng), random_tensor(dim, rng), random_tensor(N * dim, rng)};
    auto body = [=]<typename T>(const V<T>& x, bool bwd) -> V<T> {
        auto w = [&](std::size_t i) { return const_cast<T*>(x[i].data()); };   // the params struct is not const-qualified
        nn::FeedForwardParams<T> p{w(1), w(2), w(3), w(4)};
        nn::FeedForwardCache<T> cache;
        V<T> out{std::vector<T>(N * dim)};
        nn::feed_forward_forward(out[0].data(), cache, x[0].data(), p, N, dim, inner);
        if (!bwd) return out;
        out.push_back(std::vector<T>(N * dim));
        for (std::size_t i : {std::size_t(inner * dim), std::size_t(inner), std::size_t(dim * inner), std::size_t(dim)})
            out.push_back(std::vector<T>(i, T(0)));
        nn::FeedForwardParams<T> g{out[2].data(), out[3].data(), out[4].data(), out[5].data()};
        nn::feed_forward_backward(out[1].data(), g, x[5].data(), cache, p, N, dim, inner);
        return out;
    };
    const double f = 4.0 * N * dim * inner;
    return make<decltype(body)>({dims({{"N", N}, {"dim", dim}}), 3 * f, 4.0 * (4 * N * dim + 4 * dim * inner),
                                 {"x", "w1", "b1", "w2", "b2", "dy"}, {true, true, true, true, true, false},
                                 {"y", "dx", "dw1", "db1", "dw2", "db2"}},
                                std::move(in), body);
}

// mean over non-ignored rows of logsumexp(logits) - logits[target]; output 0 is the loss itself
std::unique_ptr<Case> cross_entropy_case(int64_t N, int64_t Vn, std::uint64_t seed) {
    std::mt19937 rng(static_cast<unsigned>(seed));
    std::vector<std::int32_t> t(static_cast<std::size_t>(N));
    for (auto& e : t) e = static_cast<std::int32_t>(rng() % Vn);   // some 0s: ignored
    Tensors in{random_tensor(N * Vn, rng, 3.0), {1.0}};
    auto body = [=]<typename T>(const V<T>& x, bool bwd) -> V<T> {
        std::vector<T> lse(N);
        std::int64_t valid = 0;
        V<T> out{{nn::cross_entropy_forward(lse.data(), &valid, x[0].data(), t.data(), N, Vn, 0)}};
        if (!bwd) return out;
        out.push_back(std::vector<T>(N * Vn));
        nn::cross_entropy_backward(out[1].data(), x[1][0], x[0].data(), lse.data(), t.data(), N, Vn, 0, valid);
        return out;
    };
    auto device = [=](nn::NnBackend& be, const F32Tensors& x) -> F32Tensors {
        BackendArena a(be);
        const float* logits = a.up(x[0]);
        const std::int32_t* targets = a.up(t);
        float *lse = a.alloc<float>(N), *dlogits = a.alloc<float>(N * Vn);
        std::int64_t valid = 0;
        const float loss = be.cross_entropy_forward(lse, &valid, logits, targets, N, Vn, 0);
        be.cross_entropy_backward(dlogits, x[1][0], logits, lse, targets, N, Vn, 0, valid);
        return {{loss}, a.down(dlogits, N * Vn)};
    };
    return make_backend_case<decltype(body)>({dims({{"N", N}, {"V", Vn}}), 8.0 * N * Vn, 4.0 * 3 * N * Vn,
                                              {"logits", "dy"}, {true, false}, {"loss", "dlogits"}},
                                             std::move(in), body, device,
                                             {"cross_entropy_forward", "cross_entropy_backward"});
}

// the copy head over a batch of B sequences of n tokens from a 5-token vocabulary (0 = pad: some neighbour tokens
// are pads), chunk cs, k neighbours of r tokens: candidates from nn::copy_candidates_batch, then the gates
std::unique_ptr<Case> copy_head_case(int64_t B, int64_t n, int64_t cs, int64_t k, int64_t r, int64_t C,
                                     std::uint64_t seed) {
    std::mt19937 rng(static_cast<unsigned>(seed));
    const int64_t Vn = 5, l = n / cs, rows = B * n, nb = nn::kCopyBuckets;
    std::vector<std::int32_t> inputs(static_cast<std::size_t>(B * n)), retrieved(static_cast<std::size_t>(B * l * k * r));
    for (auto& e : inputs) e = static_cast<std::int32_t>(1 + rng() % (Vn - 1));
    for (auto& e : retrieved) e = static_cast<std::int32_t>(rng() % Vn);
    std::vector<nn::CopyCandidate> cand;
    nn::copy_candidates_batch(cand, inputs.data(), B, n, retrieved.data(), l, k, r, cs, 0);
    Tensors in{random_tensor(rows * Vn, rng), random_tensor(rows * C, rng), random_tensor(nb, rng, 0.1),
               random_tensor(nb * C, rng), random_tensor(rows * Vn, rng)};
    auto body = [=]<typename T>(const V<T>& x, bool bwd) -> V<T> {
        V<T> out{x[0]};
        nn::copy_head_forward(out[0].data(), x[1].data(), cand.data(), rows, k, Vn, C, x[2].data(), x[3].data());
        if (!bwd) return out;
        out.push_back(x[4]);   // dlogits: the gates add to the logits, whose gradient passes through
        out.push_back(std::vector<T>(rows * C, T(0)));
        out.push_back(std::vector<T>(nb, T(0)));
        out.push_back(std::vector<T>(nb * C, T(0)));
        nn::copy_head_backward(out[2].data(), out[3].data(), out[4].data(), x[4].data(), x[1].data(), cand.data(), rows,
                               k, Vn, C, x[3].data());
        return out;
    };
    auto device = [=](nn::NnBackend& be, const F32Tensors& x) -> F32Tensors {
        BackendArena a(be);
        const nn::CopyCandidate* dcand = a.up(cand);
        float *y = a.up(x[0]), *dxn = a.zeros<float>(rows * C), *dbias = a.zeros<float>(nb),
              *dweight = a.zeros<float>(nb * C);
        const float *xn = a.up(x[1]), *bias = a.up(x[2]), *weight = a.up(x[3]), *dy = a.up(x[4]);
        be.copy_head_forward(y, xn, dcand, rows, k, Vn, C, bias, weight);
        be.copy_head_backward(dxn, dbias, dweight, dy, xn, dcand, rows, k, Vn, C, weight);
        return {a.down(y, rows * Vn), x[4], a.down(dxn, rows * C), a.down(dbias, nb), a.down(dweight, nb * C)};
    };
    return make_backend_case<decltype(body)>({dims({{"B", B}, {"n", n}, {"cs", cs}, {"k", k}, {"r", r}, {"C", C}}),
                                              6.0 * rows * k * C, 4.0 * (2 * rows * Vn + rows * C + nb * C),
                                              {"logits", "xn", "bias", "weight", "dy"}, {true, true, true, true, false},
                                              {"y", "dlogits", "dxn", "dbias", "dweight"}},
                                             std::move(in), body, device, {"copy_head_forward", "copy_head_backward"});
}

// chunked cross-attention over k neighbours of r tokens per chunk (null key/value, a missing neighbour)
std::unique_ptr<Case> cca_case(int64_t B, int64_t n, int64_t cs, int64_t k, int64_t r, int64_t dim, int64_t H, int64_t Dh,
                               std::uint64_t seed) {
    std::mt19937 rng(static_cast<unsigned>(seed));
    nn::CcaShape s;
    s.B = B, s.n = n, s.chunk = cs, s.chunks = n / cs, s.neighbours = k, s.retrieved = r, s.dim = dim, s.heads = H,
    s.dim_head = Dh, s.rot_dim = Dh < 32 ? Dh : 32;
    s.aligned_queries = seed % 2 == 0;   // even seeds: "cca_query_positions": "aligned"; odd: RP's quirk
    const int64_t HD = H * Dh, l = s.chunks, KR = k * r;
    Tensors in{random_tensor(B * n * dim, rng), random_tensor(B * l * KR * dim, rng), random_tensor(HD * dim, rng),
               random_tensor(HD * dim, rng), random_tensor(HD * dim, rng), random_tensor(dim * HD, rng),
               random_tensor(dim, rng), random_tensor(HD, rng), random_tensor(HD, rng), random_tensor(B * n * dim, rng)};
    std::vector<std::uint8_t> mask(static_cast<std::size_t>(B * l * KR), 1);
    if (l > 0)
        for (int64_t j = 0; j < r; ++j) mask[static_cast<std::size_t>(j)] = 0;   // the first neighbour is -1
    auto body = [=]<typename T>(const V<T>& x, bool bwd) -> V<T> {
        auto w = [&](std::size_t i) { return const_cast<T*>(x[i].data()); };   // the params struct is not const-qualified
        nn::AttentionParams<T> p{w(2), w(3), w(4), w(5), w(6), w(7), w(8)};
        nn::CcaCache<T> cache;
        V<T> out{std::vector<T>(B * n * dim)};
        nn::cca_forward(out[0].data(), cache, x[0].data(), x[1].data(), mask.data(), p, s);
        if (!bwd) return out;
        out.push_back(std::vector<T>(x[0].size()));
        out.push_back(std::vector<T>(x[1].size()));
        for (int i = 2; i <= 8; ++i) out.push_back(std::vector<T>(x[static_cast<std::size_t>(i)].size(), T(0)));
        nn::AttentionParams<T> g{out[3].data(), out[4].data(), out[5].data(), out[6].data(), out[7].data(), out[8].data(),
                                 out[9].data()};
        nn::cca_backward(out[1].data(), out[2].data(), g, x[9].data(), cache, p, s);
        return out;
    };
    const double f = 2.0 * B * n * dim * HD * 2 + 2.0 * B * l * KR * dim * HD * 2 + 4.0 * B * H * n * (KR + 1) * Dh;
    return make<decltype(body)>({dims({{"B", B}, {"n", n}, {"cs", cs}, {"k", k}, {"r", r}, {"dim", dim}, {"H", H}, {"Dh", Dh}}),
                                 3 * f, 4.0 * (3 * B * n * dim + 2 * B * l * KR * dim + 8 * HD * dim),
                                 {"x", "E", "to_q", "to_k", "to_v", "to_out.weight", "to_out.bias", "null_k", "null_v", "dy"},
                                 {true, true, true, true, true, true, true, true, true, false},
                                 {"y", "dx", "dE", "dto_q", "dto_k", "dto_v", "dto_out.weight", "dto_out.bias", "dnull_k", "dnull_v"}},
                                std::move(in), body);
}

}  // namespace

void register_nn(std::vector<OpInfo>& out) {
    auto add = [&](std::string name, std::string cpu, std::vector<std::string> tests, auto test_case, auto perf_case,
                   std::string cuda = "", int test_seeds = 1) {
        OpInfo op;
        op.name = std::move(name);
        op.cpu = std::move(cpu);
        op.cuda = std::move(cuda);
        op.tests = std::move(tests);
        op.test_seeds = test_seeds;
        op.test_case = test_case;
        op.perf_case = [perf_case](Backend) { return perf_case(); };
        out.push_back(std::move(op));
    };
    const std::string nn_tests = "tests/test_nn_ops.cpp: ";
    const std::string backend_test = "tests/test_nn_backend.cpp: " + std::string(kNnBackendTestCase);
    const std::string cuda_nn = "kernels/nn_backend_cuda.cu", cuda_attention = "kernels/nn_attention_cuda.cu",
                      cuda_loss = "kernels/nn_loss_cuda.cu";
    // nn.linear's seeds 3 and 4 pass null b / dx / dW (compared across backends, not gradient-checked); the CUDA
    // forward of at most 8 rows is its own kernel: seed 5 (8 rows, I % 4 == 0: float4 loads, wider than a warp's
    // lanes) and 6 (1 row, odd I) cover it beside the small seeds; the perf case runs cuBLAS
    add("nn.linear", "lib/nn/linear.h", {nn_tests + "nn: linear gradient with and without bias", backend_test},
        [](std::uint64_t s) {
            if (s == 5) return linear_case(8, 700, 300, s);
            if (s == 6) return linear_case(1, 37, 41, s);
            return linear_case(5, 7, 3, s);
        },
        [] { return linear_case(2048, 128, 512, 1); }, cuda_nn, 6);
    // CUDA: kernels/nn_rows.cuh (a warp per row), also run on the host through the block emulator
    add("nn.rmsnorm", "lib/nn/rmsnorm.h",
        {nn_tests + "nn: rmsnorm matches RP and gradient", backend_test,
         "tests/test_nn_rows_host.cpp: nn rows kernels on the host emulator: rmsnorm forms and column sums"},
        [](std::uint64_t s) { return s == 2 ? rmsnorm_case(3, 700, s) : rmsnorm_case(5, 6, s); },   // 2: C > 32 lanes
        [] { return rmsnorm_case(2048, 128, 1); }, cuda_nn, 2);
    add("nn.gelu", "lib/nn/gelu.h", {nn_tests + "nn: gelu (erf) gradient", backend_test},
        [](std::uint64_t s) { return gelu_case(40, s); }, [] { return gelu_case(2048 * 512, 1); }, cuda_nn);
    add("nn.rotary", "lib/nn/rotary.h", {nn_tests + "nn: partial rotary gradient and identity at position 0", backend_test},
        [](std::uint64_t s) { return rotary_case(2, 5, 2, 6, 4, s); }, [] { return rotary_case(8, 256, 8, 32, 32, 1); },
        cuda_nn);
    // seed 1: causal; 2: null k/v with a pad mask (item 0's keys all masked: only the null key is seen); 3: causal
    // and masked with Nq < Nk, no null key (item 0 fully masked: uniform rows; compared across backends only); 4: null
    // k/v and a pad mask over 301 keys (more keys than a block's 256 threads); 5: causal, Nq 5 < Nk 290; 6, 7, 8: the
    // CUDA row kernels' other paths (kernels/nn_attention_cuda.cu): a block's registers (null k/v and a pad mask over
    // 1,100 keys; causal, Nq 3 < Nk 600), and three passes beyond 4,096 keys
    add("nn.attention", "lib/nn/attention.h",
        {nn_tests + "nn: attention core gradient - causal / masked / fully masked / null k/v",
         "tests/test_nn_decode.cpp: nn: KV-cached attention step equals the causal attention layer - fed in pieces",
         backend_test},
        [](std::uint64_t s) {
            if (s == 3) return attention_case({2, 4, 6, 2, 3, true, false}, true, s);
            if (s == 4) return attention_case({2, 7, 300, 2, 5, false, true}, true, s);
            if (s == 5) return attention_case({2, 5, 290, 2, 4, true, false}, false, s);
            if (s == 6) return attention_case({2, 4, 1100, 2, 3, false, true}, true, s);
            if (s == 7) return attention_case({1, 3, 600, 2, 4, true, false}, false, s);
            if (s == 8) return attention_case({1, 2, 4200, 1, 3, false, true}, true, s);
            return s % 2 ? attention_case({2, 5, 5, 2, 3, true, false}, false, s) : attention_case({2, 4, 6, 2, 3, false, true}, true, s);
        },
        [] { return attention_case({8, 256, 256, 8, 32, true, false}, false, 1); }, cuda_attention, 8);
    // the fused bf16 kernels (kernels/nn_flash_attention_cuda.cu, nn_flash_mma.cuh) at each head size they take, N
    // not a multiple of their 64-row blocks (seeds 1-3 causal, 4 not), then the CCA and encoder shapes the mma
    // kernels take as well (5: a chunk's queries against neighbours and the null column with a pad mask, item 0's
    // neighbours all masked; 6: masked bidirectional self-attention, item 0 fully masked; 7: more queries than keys
    // with the null column; 8: the encoder's cross-attention to its chunk, Nk' = 64 < 1 + D); the perf case is the
    // 172M config's decoder self-attention. Host emulation of the same kernels: tests/test_flash_mma_host.cpp
    add("nn.flash_attention", "lib/nn/attention.h",
        {backend_test, "tests/test_flash_mma_host.cpp: flash mma kernels on the host emulator: CCA and encoder shapes"},
        [](std::uint64_t s) {
            if (s == 2) return attention_case({1, 200, 200, 2, 64, true, false}, false, s, true);
            if (s == 3) return attention_case({2, 150, 150, 1, 128, true, false}, false, s, true);
            if (s == 4) return attention_case({2, 100, 100, 2, 64, false, false}, false, s, true);
            if (s == 5) return attention_case({3, 64, 130, 2, 64, false, true}, true, s, true);
            if (s == 6) return attention_case({3, 70, 70, 1, 32, false, false}, true, s, true);
            if (s == 7) return attention_case({2, 100, 40, 1, 32, false, true}, false, s, true);
            if (s == 8) return attention_case({2, 128, 64, 2, 64, false, false}, false, s, true);
            return attention_case({2, 130, 130, 2, 32, true, false}, false, s, true);
        },
        [] { return attention_case({8, 1024, 1024, 8, 64, true, false}, false, 1, true); },
        "kernels/nn_flash_attention_cuda.cu", 8);
    // the same kernels timed at the 172M config's other attention shapes (retro-bench ops --device cuda --ops ...; the
    // session-23 profile had them at 11-17 TFLOP/s in backward against 44 for the causal one): CCA (128 chunks' 64
    // queries against 2 x 128 neighbour tokens and the null column, pad mask) and the encoder's masked self-attention
    // over 128-token neighbours; tested at a small shape of each, CCA also with few keys (seed 2: 33, as
    // demo-retrieval-wide.json's; the stash, out's remainder with it, then larger than the probabilities)
    add("nn.flash_cca", "lib/nn/attention.h",
        {backend_test, "tests/test_flash_mma_host.cpp: flash mma kernels on the host emulator: the op harness's"},
        [](std::uint64_t s) {
            if (s == 2) return attention_case({2, 64, 32, 2, 64, false, true}, true, s, true);
            return attention_case({2, 64, 96, 2, 64, false, true}, true, s, true);
        },
        [] { return attention_case({128, 64, 256, 8, 64, false, true}, true, 1, true); },
        "kernels/nn_flash_attention_cuda.cu", 2);
    add("nn.flash_encoder", "lib/nn/attention.h", {backend_test},
        [](std::uint64_t s) { return attention_case({2, 80, 80, 2, 64, false, false}, true, s, true); },
        [] { return attention_case({256, 128, 128, 8, 64, false, false}, true, 1, true); },
        "kernels/nn_flash_attention_cuda.cu", 1);
    add("nn.feed_forward", "lib/nn/feed_forward.h", {nn_tests + "nn: feed-forward gradient"},
        [](std::uint64_t s) { return feed_forward_case(4, 3, s); }, [] { return feed_forward_case(2048, 128, 1); });
    add("nn.cross_entropy", "lib/nn/cross_entropy.h", {nn_tests + "nn: cross-entropy with ignore index gradient", backend_test},
        [](std::uint64_t s) { return cross_entropy_case(6, 5, s); }, [] { return cross_entropy_case(2048, 8000, 1); },
        cuda_loss);
    add("nn.cca", "lib/nn/chunked_cross_attention.h",
        {nn_tests + "nn: chunked cross-attention gradient and chunk grid",
         "tests/test_nn_decode.cpp: nn: CCA rows over cached chunk keys/values equal cca_forward at every position"},
        [](std::uint64_t s) { return cca_case(2, s % 2 ? 11 : 9, 3, 2, 4, 5, 2, 6, s); },
        [] { return cca_case(8, 256, 32, 2, 64, 128, 8, 32, 1); });
    // seeds 1, 2 small (gradient-checked); 3: 900 (row, neighbour) pairs, so the CUDA column sums run over several
    // chunks; 4: C = 300, wider than a warp's and a block's threads
    add("nn.copy_head", "lib/nn/copy_head.h",
        {nn_tests + "nn: copy head candidates against a brute-force search",
         "tests/test_generate.cpp: generate: the copy head's cached logits equal a full recompute", backend_test},
        [](std::uint64_t s) {
            if (s == 3) return copy_head_case(3, 100, 4, 3, 8, 40, s);
            if (s == 4) return copy_head_case(1, 20, 4, 2, 6, 300, s);
            return copy_head_case(2, s % 2 ? 12 : 10, 3, 2, 6, 4, s);
        },
        [] { return copy_head_case(8, 256, 8, 2, 16, 128, 1); }, "kernels/nn_copy_head_cuda.cu", 4);
    register_nn_backend(out);   // ops_nn_backend.cpp: the NnBackend ops without an nn.* entry above
}

}  // namespace retro::ops
