// The NnBackend ops (nn/nn_backend.h) that have no nn.* entry of their own in ops_nn.cpp, as BackendCases
// (ops/backend_case.h): each a templated CPU body (the nn/*.h function where there is one, else the arithmetic
// nn/nn_backend.h states, in float and double) and the same ops through an NnBackend.
//   nn.embedding    embedding_forward/backward + position_add_forward/backward (repeated ids)
//   nn.embedding_position embedding_position_forward (the decoder's step: token rows plus position rows, -1 none)
//   nn.gather_rows  gather_rows, gather_add_rows (-1 rows, repeated rows), scatter_rows (distinct rows, -1 rows),
//                   residual_sum, residual_add, scale, copy
//   nn.adamw        adamw_update (decaying and non-decaying elements)
//   nn.sum_squares  sum_squares (double accumulation; long enough for the GPU's grid-stride loop to wrap)
//   nn.residual_rmsnorm  residual_rmsnorm_forward, rmsnorm_backward_add (the fused pre-norm pairs; x == a too)
//   nn.attention_decode  attention_decode (a decode step's self-attention over KV caches, or CCA's over a chunk with
//                   the null column and the pad mask; forward only)
//   nn.linear_gelu  linear_gelu_forward (the feed-forward's first layer: gelu(x W^T + b) and the value before it)
//   nn.norm_linear  rmsnorm_linear_forward (the decoder's norm + projection pairs; gelu and plain)
//   nn.linear_residual linear_residual_forward (the decoder's projection + residual sums; out == res too)
//   nn.linear_rotary linear_rotary_forward (the decoder's q | k projections with their rotation; with the norm too)
//   nn.cross_entropy_linear cross_entropy_linear_backward (the logits layer's backward from the loss)
//   nn.gelu_linear_backward gelu_linear_backward (the feed-forward's first layer backward from its gelu's output)
//   (the three bf16-activation cases below are written in ops_nn_bf16.cpp)
//   nn.ff_bf16      linear_gelu_forward_bf16, linear_forward_bf16x, linear_backward_bf16x (the feed-forward over its
//                   gelu output stored as bf16; BF16 on CUDA only)
//   nn.ff_in_bf16   residual_rmsnorm_forward_bf16, linear_gelu_forward_bf16x, gelu_linear_backward_bf16x (the
//                   feed-forward's first layer over its pre-norm input stored as bf16; BF16 on CUDA only)
//   nn.attn_in_bf16 rmsnorm_forward_bf16, linear_forward_shared_bf16x, linear_backward_shared_bf16x (an attention's
//                   projections of its pre-norm input stored as bf16; BF16 on CUDA only)
//   nn.linear_shared linear_forward_shared, linear_backward_shared (an attention's projections of one input; the
//                   weights back to back or apart, the outputs at one stride or not; fp32 and the bf16 GEMM mode)
//   nn.scaled_rotary rotary_scale_forward (the queries' scale and rotation in one pass; forward only)
//   nn.scaled_rotary_backward rotary_backward_scale (the training backward's rotation and scale of dq in one pass)
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <string>

#include "backend_case.h"
#include "nn/attention.h"
#include "nn/cross_entropy.h"
#include "nn/embedding.h"
#include "nn/gelu.h"
#include "nn/linear.h"
#include "nn/residual.h"
#include "nn/rmsnorm.h"
#include "nn/rotary.h"
#include "op_registry.h"
#include "ops_nn_bf16.h"

namespace retro::ops {
namespace {

using std::int64_t;
template <typename T>
using V = std::vector<std::vector<T>>;

using nn_cases::dims;

// y[B*T, C] = table[ids] + pos[t]; gradients of table and pos
std::unique_ptr<Case> embedding_case(int64_t B, int64_t Tn, int64_t Vn, int64_t C, std::uint64_t seed) {
    std::mt19937 rng(static_cast<unsigned>(seed));
    const int64_t N = B * Tn;
    std::vector<std::int32_t> ids(static_cast<std::size_t>(N));
    for (auto& e : ids) e = static_cast<std::int32_t>(rng() % static_cast<unsigned>(Vn));   // repeats
    Tensors in{random_tensor(Vn * C, rng), random_tensor(Tn * C, rng), random_tensor(N * C, rng)};
    auto body = [=]<typename T>(const V<T>& x, bool bwd) -> V<T> {
        V<T> out{std::vector<T>(N * C)};
        nn::embedding_forward(out[0].data(), ids.data(), x[0].data(), N, Vn, C);
        nn::position_add_forward(out[0].data(), x[1].data(), B, Tn, C);
        if (!bwd) return out;
        out.push_back(std::vector<T>(Vn * C, T(0)));
        out.push_back(std::vector<T>(Tn * C, T(0)));
        nn::embedding_backward(out[1].data(), x[2].data(), ids.data(), N, C);
        nn::position_add_backward(out[2].data(), x[2].data(), B, Tn, C);
        return out;
    };
    auto device = [=](nn::NnBackend& be, const F32Tensors& x) -> F32Tensors {
        BackendArena a(be);
        const std::int32_t* dids = a.up(ids);
        const float *table = a.up(x[0]), *pos = a.up(x[1]), *dy = a.up(x[2]);
        float *y = a.alloc<float>(N * C), *dtable = a.zeros<float>(Vn * C), *dpos = a.zeros<float>(Tn * C);
        be.embedding_forward(y, dids, table, N, Vn, C);
        be.position_add_forward(y, pos, B, Tn, C);
        be.embedding_backward(dtable, dy, dids, N, C);
        be.position_add_backward(dpos, dy, B, Tn, C);
        return {a.down(y, N * C), a.down(dtable, Vn * C), a.down(dpos, Tn * C)};
    };
    return make_backend_case<decltype(body)>(
        {dims({{"B", B}, {"T", Tn}, {"V", Vn}, {"C", C}}), 3.0 * N * C, 4.0 * (5 * N * C + Vn * C + Tn * C),
         {"table", "pos", "dy"}, {true, true, false}, {"y", "dtable", "dpos"}},
        std::move(in), body, device,
        {"embedding_forward", "embedding_backward", "position_add_forward", "position_add_backward"});
}

// embedding_position_forward: out[n] = table[ids[n]] + pos_table[pos_index[n]] (nothing added where pos_index[n] is
// -1). The reference: nn::embedding_forward, then the rows added as gather_add_rows adds them.
std::unique_ptr<Case> embedding_position_case(int64_t N, int64_t Vn, int64_t P, int64_t C, std::uint64_t seed) {
    std::mt19937 rng(static_cast<unsigned>(seed));
    std::vector<std::int32_t> ids(static_cast<std::size_t>(N));
    for (auto& e : ids) e = static_cast<std::int32_t>(rng() % static_cast<unsigned>(Vn));
    std::vector<std::int64_t> pos(static_cast<std::size_t>(N));
    for (auto& e : pos) e = static_cast<int64_t>(rng() % static_cast<unsigned>(P + 1)) - 1;   // -1: no position row
    Tensors in{random_tensor(Vn * C, rng), random_tensor(P * C, rng)};
    auto body = [=]<typename T>(const V<T>& x, bool) -> V<T> {
        V<T> out{std::vector<T>(N * C)};
        nn::embedding_forward(out[0].data(), ids.data(), x[0].data(), N, Vn, C);
        for (int64_t n = 0; n < N; n++)
            if (pos[n] >= 0)
                for (int64_t c = 0; c < C; c++) out[0][n * C + c] += x[1][pos[n] * C + c];
        return out;
    };
    auto device = [=](nn::NnBackend& be, const F32Tensors& x) -> F32Tensors {
        BackendArena a(be);
        float* y = a.alloc<float>(N * C);
        be.embedding_position_forward(y, a.up(ids), a.up(x[0]), a.up(pos), a.up(x[1]), N, Vn, C);
        return {a.down(y, N * C)};
    };
    return make_backend_case<decltype(body)>(
        {dims({{"N", N}, {"V", Vn}, {"P", P}, {"C", C}}), 1.0 * N * C, 4.0 * 3 * N * C, {"table", "pos_table"},
         {false, false}, {"y"}},
        std::move(in), body, device, {"embedding_position_forward"});
}

// Row gathers (index with -1 and repeated rows), the residual adds and scale, over S source rows of C floats.
std::unique_ptr<Case> gather_case(int64_t S, int64_t rows, int64_t C, std::uint64_t seed) {
    std::mt19937 rng(static_cast<unsigned>(seed));
    std::vector<std::int64_t> index(static_cast<std::size_t>(rows));
    for (auto& e : index) e = static_cast<int64_t>(rng() % static_cast<unsigned>(S + 1)) - 1;   // -1: a zero row
    // scatter: row i of b into row scatter[i] of a copy of src, distinct rows in shuffled order, every third none
    std::vector<std::int64_t> scatter(static_cast<std::size_t>(rows), -1), perm(static_cast<std::size_t>(S));
    for (int64_t i = 0; i < S; i++) perm[static_cast<std::size_t>(i)] = i;
    std::shuffle(perm.begin(), perm.end(), rng);
    for (int64_t i = 0, next = 0; i < rows && next < S; i++)
        if (i % 3 != 2) scatter[static_cast<std::size_t>(i)] = perm[static_cast<std::size_t>(next++)];
    const int64_t n = rows * C;
    const float s = 0.37f;
    Tensors in{random_tensor(S * C, rng), random_tensor(n, rng), random_tensor(n, rng)};
    auto body = [=]<typename T>(const V<T>& x, bool) -> V<T> {
        const T* src = x[0].data();
        V<T> out{std::vector<T>(n), x[1], std::vector<T>(n), x[1], x[1], x[0]};
        for (int64_t i = 0; i < rows; i++)
            for (int64_t c = 0; c < C; c++) {
                out[0][i * C + c] = index[i] >= 0 ? src[index[i] * C + c] : T(0);
                if (index[i] >= 0) out[1][i * C + c] += src[index[i] * C + c];
                if (scatter[i] >= 0) out[5][scatter[i] * C + c] = x[2][i * C + c];
            }
        nn::residual_sum(out[2].data(), x[1].data(), x[2].data(), n);
        nn::residual_add(out[3].data(), x[2].data(), n);
        for (auto& e : out[4]) e *= static_cast<T>(s);
        return out;
    };
    auto device = [=](nn::NnBackend& be, const F32Tensors& x) -> F32Tensors {
        BackendArena a(be);
        const std::int64_t *didx = a.up(index), *dscatter = a.up(scatter);
        const float *src = a.up(x[0]), *base = a.up(x[1]), *b = a.up(x[2]);
        float* scattered = a.up(x[0]);
        be.scatter_rows(scattered, b, dscatter, rows, C);
        float *g = a.alloc<float>(n), *ga = a.alloc<float>(n), *sum = a.alloc<float>(n), *acc = a.alloc<float>(n),
              *sc = a.alloc<float>(n);
        be.gather_rows(g, src, didx, rows, C);
        for (float* d : {ga, acc, sc}) be.copy(d, base, static_cast<std::size_t>(n) * sizeof(float));
        be.gather_add_rows(ga, src, didx, rows, C);
        be.residual_sum(sum, base, b, n);
        be.residual_add(acc, b, n);
        be.scale(sc, s, n);
        be.synchronize();
        return {a.down(g, n), a.down(ga, n), a.down(sum, n), a.down(acc, n), a.down(sc, n), a.down(scattered, S * C)};
    };
    return make_backend_case<decltype(body)>(
        {dims({{"S", S}, {"rows", rows}, {"C", C}}), 4.0 * n, 4.0 * 14 * n, {"src", "base", "b"}, {false, false, false},
         {"gather", "gather_add", "residual_sum", "residual_add", "scale", "scatter"}},
        std::move(in), body, device,
        {"gather_rows", "gather_add_rows", "scatter_rows", "residual_sum", "residual_add", "scale", "copy", "synchronize"});
}

// One AdamW step (nn/nn_backend.h's arithmetic) at lr 1e-3, weight decay 0.1, betas (0.9, 0.95), step 3.
std::unique_ptr<Case> adamw_case(int64_t n, std::uint64_t seed) {
    std::mt19937 rng(static_cast<unsigned>(seed));
    std::vector<std::uint8_t> decay(static_cast<std::size_t>(n));
    for (auto& e : decay) e = rng() % 2;
    Tensors in{random_tensor(n, rng), random_tensor(n, rng), random_tensor(n, rng, 0.1), random_tensor(n, rng, 0.01)};
    for (auto& e : in[3]) e = std::abs(e);   // v >= 0
    const double lr = 1e-3, wd = 0.1, b1 = 0.9, b2 = 0.95, eps = 1e-8, step = 3;
    const double bc1 = 1 - std::pow(b1, step), bc2 = 1 - std::pow(b2, step);
    auto scalars = [=]<typename T>(T*) {   // as train/adamw.cpp computes them, in T
        struct {
            T decay, w1, b2, w2, step_size, bc2_sqrt, eps;
        } a{static_cast<T>(1.0 - lr * wd), static_cast<T>(1.0 - b1), static_cast<T>(b2), static_cast<T>(1.0 - b2),
            static_cast<T>(lr / bc1), static_cast<T>(std::sqrt(bc2)), static_cast<T>(eps)};
        return a;
    };
    auto body = [=]<typename T>(const V<T>& x, bool) -> V<T> {
        const auto a = scalars(static_cast<T*>(nullptr));
        V<T> out{x[0], x[2], x[3]};
        T *p = out[0].data(), *m = out[1].data(), *v = out[2].data();
        for (int64_t i = 0; i < n; i++) {
            const T gi = x[1][i];
            if (decay[i]) p[i] *= a.decay;
            m[i] = m[i] + a.w1 * (gi - m[i]);
            v[i] = v[i] * a.b2 + a.w2 * (gi * gi);
            const T denom = std::sqrt(v[i]) / a.bc2_sqrt + a.eps;
            p[i] = p[i] + (-a.step_size) * (m[i] / denom);
        }
        return out;
    };
    auto device = [=](nn::NnBackend& be, const F32Tensors& x) -> F32Tensors {
        const auto s = scalars(static_cast<float*>(nullptr));
        const nn::NnBackend::AdamWScalars a{s.decay, s.w1, s.b2, s.w2, s.step_size, s.bc2_sqrt, s.eps};
        BackendArena ar(be);
        float *p = ar.up(x[0]), *m = ar.up(x[2]), *v = ar.up(x[3]);
        const float* g = ar.up(x[1]);
        be.adamw_update(p, g, m, v, ar.up(decay), n, a);
        return {ar.down(p, n), ar.down(m, n), ar.down(v, n)};
    };
    return make_backend_case<decltype(body)>({dims({{"n", n}}), 12.0 * n, 4.0 * 7 * n + n, {"p", "g", "m", "v"},
                                              {false, false, false, false}, {"p", "m", "v"}},
                                             std::move(in), body, device, {"adamw_update"});
}

std::unique_ptr<Case> sum_squares_case(int64_t n, std::uint64_t seed) {
    std::mt19937 rng(static_cast<unsigned>(seed));
    Tensors in{random_tensor(n, rng, 2.0)};
    auto body = [=]<typename T>(const V<T>& x, bool) -> V<T> {
        double sq = 0;   // in double for either T (nn/nn_backend.h)
        for (int64_t i = 0; i < n; i++) sq += static_cast<double>(x[0][i]) * x[0][i];
        return {{static_cast<T>(sq)}};
    };
    auto device = [=](nn::NnBackend& be, const F32Tensors& x) -> F32Tensors {
        BackendArena a(be);
        return {{static_cast<float>(be.sum_squares(a.up(x[0]), n))}};
    };
    return make_backend_case<decltype(body)>({dims({{"n", n}}), 2.0 * n, 4.0 * n, {"x"}, {false}, {"sum"}}, std::move(in),
                                             body, device, {"sum_squares"});
}

// x = a + b, y = rmsnorm(x); dx += rmsnorm's dx, dgamma +=: the two ops apart are the reference. alias: x is a.
std::unique_ptr<Case> residual_rmsnorm_case(int64_t N, int64_t C, bool alias, std::uint64_t seed) {
    std::mt19937 rng(static_cast<unsigned>(seed));
    const int64_t n = N * C;
    Tensors in{random_tensor(n, rng), random_tensor(n, rng), random_tensor(C, rng), random_tensor(n, rng),
               random_tensor(n, rng)};
    auto body = [=]<typename T>(const V<T>& x, bool) -> V<T> {
        V<T> out{std::vector<T>(n), std::vector<T>(n), std::vector<T>(N), x[4], std::vector<T>(C, T(0))};
        nn::residual_sum(out[0].data(), x[0].data(), x[1].data(), n);
        nn::rmsnorm_forward(out[1].data(), out[2].data(), out[0].data(), x[2].data(), N, C);
        std::vector<T> tmp(static_cast<std::size_t>(n));
        nn::rmsnorm_backward(tmp.data(), out[4].data(), x[3].data(), out[0].data(), x[2].data(), out[2].data(), N, C);
        nn::residual_add(out[3].data(), tmp.data(), n);
        return out;
    };
    auto device = [=](nn::NnBackend& be, const F32Tensors& x) -> F32Tensors {
        BackendArena a(be);
        float* da = a.up(x[0]);
        float *xs = alias ? da : a.alloc<float>(n), *y = a.alloc<float>(n), *norm = a.alloc<float>(N),
              *dx = a.up(x[4]), *dgamma = a.zeros<float>(C);
        const float *b = a.up(x[1]), *gamma = a.up(x[2]), *dy = a.up(x[3]);
        be.residual_rmsnorm_forward(xs, y, norm, da, b, gamma, N, C);
        be.rmsnorm_backward_add(dx, dgamma, dy, xs, gamma, norm, N, C);
        return {a.down(xs, n), a.down(y, n), a.down(norm, N), a.down(dx, n), a.down(dgamma, C)};
    };
    return make_backend_case<decltype(body)>(
        {dims({{"N", N}, {"C", C}}) + (alias ? " x=a" : ""), 12.0 * n, 4.0 * 10 * n,
         {"a", "b", "gamma", "dy", "dx0"}, {false, false, false, false, false}, {"x", "y", "norm", "dx", "dgamma"}},
        std::move(in), body, device, {"residual_rmsnorm_forward", "rmsnorm_backward_add"});
}

// attention_decode over caches [S, L, H*D], row i reading slot seq[i] up to position pos[i]. Self-attention (cca
// false): row i's new key and value are written at (seq[i], pos[i]) first, then causal attention over keys
// 0..pos[i]. CCA (cca true): nothing written; the null column and a pad mask [S, L] (slot 0 wholly masked: only the
// null key is seen; slots may repeat). The reference: the writes, then nn::attention_forward per row with Nq = 1.
// Outputs: out (of a second call on the same workspace: counters left non-zero fail it) and both caches.
std::unique_ptr<Case> attention_decode_case(int64_t S, int64_t L, int64_t H, int64_t D, std::vector<std::int64_t> pos,
                                            std::vector<std::int64_t> seq, bool cca, std::uint64_t seed) {
    std::mt19937 rng(static_cast<unsigned>(seed));
    const int64_t rows = static_cast<int64_t>(pos.size()), HD = H * D, cache = S * L * HD;
    Tensors in{random_tensor(rows * HD, rng), random_tensor(rows * HD, rng), random_tensor(rows * HD, rng),
               random_tensor(cache, rng), random_tensor(cache, rng), random_tensor(HD, rng), random_tensor(HD, rng)};
    std::vector<std::uint8_t> mask;
    if (cca) {
        mask.resize(static_cast<std::size_t>(S * L));
        for (auto& e : mask) e = rng() % 4 != 0;
        std::fill_n(mask.begin(), L, std::uint8_t{0});
    }
    auto body = [=]<typename T>(const V<T>& x, bool) -> V<T> {
        V<T> out{std::vector<T>(rows * HD), x[3], x[4]};
        for (int64_t i = 0; i < rows; i++) {
            T* K = out[1].data() + seq[i] * L * HD;
            T* Vc = out[2].data() + seq[i] * L * HD;
            if (!cca) {
                std::copy_n(x[1].data() + i * HD, HD, K + pos[i] * HD);
                std::copy_n(x[2].data() + i * HD, HD, Vc + pos[i] * HD);
            }
            std::vector<T> probs(static_cast<std::size_t>(H * (pos[i] + 2)));
            nn::attention_forward(out[0].data() + i * HD, probs.data(), x[0].data() + i * HD, K, Vc,
                                  cca ? x[5].data() : nullptr, cca ? x[6].data() : nullptr,
                                  cca ? mask.data() + seq[i] * L : nullptr,
                                  nn::AttentionShape{1, 1, pos[i] + 1, H, D, !cca, cca});
        }
        return out;
    };
    auto device = [=](nn::NnBackend& be, const F32Tensors& x) -> F32Tensors {
        BackendArena a(be);
        float *out = a.alloc<float>(rows * HD), *kc = a.up(x[3]), *vc = a.up(x[4]);
        nn::NnBackend::DecodeCache c{kc, vc, L};
        c.workspace = a.alloc<float>(nn::attention_decode_workspace(rows, H, D, L));
        c.counters = a.zeros<std::uint32_t>(rows * H);
        if (cca) {
            c.null_k = a.up(x[5]);
            c.null_v = a.up(x[6]);
            c.key_mask = a.up(mask);
        } else {
            c.k_new = a.up(x[1]);
            c.v_new = a.up(x[2]);
        }
        const float* q = a.up(x[0]);
        const std::int64_t *P = a.up(pos), *Sq = a.up(seq);
        // twice (the writes are the same again): the second call's output is checked, so a call that leaves its
        // counters anything but zero fails the case
        be.attention_decode(out, q, c, P, Sq, rows, H, D);
        be.zero(out, static_cast<std::size_t>(rows * HD) * sizeof(float));
        be.attention_decode(out, q, c, P, Sq, rows, H, D);
        return {a.down(out, rows * HD), a.down(kc, cache), a.down(vc, cache)};
    };
    int64_t keys = 0;
    for (auto p : pos) keys += p + 1;
    return make_backend_case<decltype(body)>(
        {dims({{"S", S}, {"L", L}, {"H", H}, {"D", D}, {"rows", rows}}) + (cca ? " null+mask" : " append"),
         4.0 * H * keys * D, 4.0 * (2 * H * keys * D + 4 * rows * HD),
         {"q", "k_new", "v_new", "kcache", "vcache", "null_k", "null_v"},
         {false, false, false, false, false, false, false}, {"out", "kcache", "vcache"}},
        std::move(in), body, device, {"attention_decode"});
}

// linear_gelu_forward: g = gelu(x W^T + b) and h = x W^T + b (h null: only g; bias null too). The reference:
// nn::linear_forward, then nn::gelu_forward. Outputs: g, and h (zeros when not asked for).
std::unique_ptr<Case> linear_gelu_case(int64_t N, int64_t I, int64_t O, bool with_h, bool bias, std::uint64_t seed) {
    std::mt19937 rng(static_cast<unsigned>(seed));
    Tensors in{random_tensor(N * I, rng), random_tensor(O * I, rng), random_tensor(O, rng)};
    auto body = [=]<typename T>(const V<T>& x, bool) -> V<T> {
        V<T> out{std::vector<T>(N * O), std::vector<T>(N * O)};
        nn::linear_forward(out[1].data(), x[0].data(), x[1].data(), bias ? x[2].data() : nullptr, N, I, O);
        nn::gelu_forward(out[0].data(), out[1].data(), N * O);
        if (!with_h) std::fill(out[1].begin(), out[1].end(), T(0));
        return out;
    };
    auto device = [=](nn::NnBackend& be, const F32Tensors& x) -> F32Tensors {
        BackendArena a(be);
        float *g = a.alloc<float>(N * O), *h = with_h ? a.alloc<float>(N * O) : nullptr;
        be.linear_gelu_forward(g, h, a.up(x[0]), a.up(x[1]), bias ? a.up(x[2]) : nullptr, N, I, O);
        return {a.down(g, N * O), with_h ? a.down(h, N * O) : std::vector<float>(static_cast<std::size_t>(N * O))};
    };
    return make_backend_case<decltype(body)>(
        {dims({{"N", N}, {"I", I}, {"O", O}}) + (with_h ? " h" : "") + (bias ? " bias" : ""), 2.0 * N * I * O,
         4.0 * (N * I + O * I + 2 * N * O), {"x", "W", "b"}, {false, false, false}, {"g", "h"}},
        std::move(in), body, device, {"linear_gelu_forward"});
}

// rmsnorm_linear_forward: y = [gelu](rmsnorm(x) W^T + b) (bias may be null). The reference: nn::rmsnorm_forward,
// nn::linear_forward, nn::gelu_forward. Row 0 is zero where there are several rows (norm 0: the clamp).
std::unique_ptr<Case> rmsnorm_linear_case(int64_t N, int64_t I, int64_t O, bool gelu, bool bias, std::uint64_t seed) {
    std::mt19937 rng(static_cast<unsigned>(seed));
    Tensors in{random_tensor(N * I, rng), random_tensor(I, rng), random_tensor(O * I, rng), random_tensor(O, rng)};
    if (N > 1) std::fill_n(in[0].begin(), I, 0.0);
    auto body = [=]<typename T>(const V<T>& x, bool) -> V<T> {
        std::vector<T> xn(static_cast<std::size_t>(N * I)), norm(static_cast<std::size_t>(N));
        nn::rmsnorm_forward(xn.data(), norm.data(), x[0].data(), x[1].data(), N, I);
        V<T> out{std::vector<T>(N * O)};
        nn::linear_forward(out[0].data(), xn.data(), x[2].data(), bias ? x[3].data() : nullptr, N, I, O);
        if (gelu) nn::gelu_forward(out[0].data(), out[0].data(), N * O);
        return out;
    };
    auto device = [=](nn::NnBackend& be, const F32Tensors& x) -> F32Tensors {
        BackendArena a(be);
        float *y = a.alloc<float>(N * O), *xn = a.alloc<float>(N * I), *norm = a.alloc<float>(N);
        be.rmsnorm_linear_forward(y, xn, norm, a.up(x[0]), a.up(x[1]), a.up(x[2]), bias ? a.up(x[3]) : nullptr, N, I,
                                  O, gelu);
        return {a.down(y, N * O)};
    };
    return make_backend_case<decltype(body)>(
        {dims({{"N", N}, {"I", I}, {"O", O}}) + (gelu ? " gelu" : "") + (bias ? " bias" : ""), 2.0 * N * I * O,
         4.0 * (N * I + O * I + N * O), {"x", "gamma", "W", "b"}, {false, false, false, false}, {"y"}},
        std::move(in), body, device, {"rmsnorm_linear_forward"});
}

// linear_residual_forward: out = res + (x W^T + b) (bias may be null), into a buffer of its own or onto res itself.
// The reference: nn::linear_forward, then nn::residual_sum.
std::unique_ptr<Case> linear_residual_case(int64_t N, int64_t I, int64_t O, bool in_place, bool bias,
                                           std::uint64_t seed) {
    std::mt19937 rng(static_cast<unsigned>(seed));
    Tensors in{random_tensor(N * I, rng), random_tensor(O * I, rng), random_tensor(O, rng), random_tensor(N * O, rng)};
    auto body = [=]<typename T>(const V<T>& x, bool) -> V<T> {
        std::vector<T> t(static_cast<std::size_t>(N * O));
        nn::linear_forward(t.data(), x[0].data(), x[1].data(), bias ? x[2].data() : nullptr, N, I, O);
        V<T> out{std::vector<T>(N * O)};
        nn::residual_sum(out[0].data(), x[3].data(), t.data(), N * O);
        return out;
    };
    auto device = [=](nn::NnBackend& be, const F32Tensors& x) -> F32Tensors {
        BackendArena a(be);
        float* res = a.up(x[3]);
        float *out = in_place ? res : a.alloc<float>(N * O), *t = a.alloc<float>(N * O);
        be.linear_residual_forward(out, t, res, a.up(x[0]), a.up(x[1]), bias ? a.up(x[2]) : nullptr, N, I, O);
        return {a.down(out, N * O)};
    };
    return make_backend_case<decltype(body)>(
        {dims({{"N", N}, {"I", I}, {"O", O}}) + (in_place ? " out=res" : "") + (bias ? " bias" : ""),
         2.0 * N * I * O + N * O, 4.0 * (N * I + O * I + 3 * N * O), {"x", "W", "b", "res"},
         {false, false, false, false}, {"out"}},
        std::move(in), body, device, {"linear_residual_forward"});
}

// linear_rotary_forward: y = x W^T + b (x first RMS-normalised when norm), then in each of the N rows the first
// `heads` heads of D scaled (the first `scaled` of them by s) and rotated (rot_dim R) at that row's position (row n at
// position 5n + 2). The reference: nn::rmsnorm_forward, nn::linear_forward, the scale, nn::rotary_forward per row.
std::unique_ptr<Case> linear_rotary_case(int64_t N, int64_t I, int64_t O, int64_t heads, int64_t D, int64_t R,
                                         int64_t scaled, bool norm, std::uint64_t seed) {
    std::mt19937 rng(static_cast<unsigned>(seed));
    const float s = 0.125f + 0.01f * static_cast<float>(seed);
    std::vector<std::int64_t> pos;
    for (int64_t n = 0; n < N; n++) pos.push_back(5 * n + 2);
    Tensors in{random_tensor(N * I, rng), random_tensor(I, rng), random_tensor(O * I, rng), random_tensor(O, rng)};
    auto body = [=]<typename T>(const V<T>& x, bool) -> V<T> {
        std::vector<T> xn(x[0]), norms(static_cast<std::size_t>(N));
        if (norm) nn::rmsnorm_forward(xn.data(), norms.data(), x[0].data(), x[1].data(), N, I);
        V<T> out{std::vector<T>(N * O)};
        nn::linear_forward(out[0].data(), xn.data(), x[2].data(), x[3].data(), N, I, O);
        const auto table = nn::rotary_table<T>(pos, R);
        for (int64_t n = 0; n < N; n++) {
            T* row = out[0].data() + n * O;
            for (int64_t c = 0; c < scaled * D; c++) row[c] *= static_cast<T>(s);
            const std::vector<T> head_part(row, row + heads * D);
            nn::rotary_forward(row, head_part.data(), table.cos.data() + n * R, table.sin.data() + n * R, R, 1, 1,
                               heads, D);
        }
        return out;
    };
    auto device = [=](nn::NnBackend& be, const F32Tensors& x) -> F32Tensors {
        BackendArena a(be);
        const auto table = nn::rotary_table<float>(pos, R);
        nn::NnBackend::LinearRotary r;
        r.table = {a.up(table.cos), a.up(table.sin), N, R};
        r.heads = heads;
        r.D = D;
        r.scale = s;
        r.scaled_heads = scaled;
        float *y = a.alloc<float>(N * O), *xn = a.alloc<float>(N * I), *nrm = a.alloc<float>(N);
        be.linear_rotary_forward(y, xn, nrm, a.up(x[0]), norm ? a.up(x[1]) : nullptr, a.up(x[2]), a.up(x[3]), N, I, O, r);
        return {a.down(y, N * O)};
    };
    return make_backend_case<decltype(body)>(
        {dims({{"N", N}, {"I", I}, {"O", O}, {"heads", heads}, {"D", D}, {"R", R}, {"scaled", scaled}}) +
             (norm ? " norm" : ""),
         2.0 * N * I * O, 4.0 * (N * I + O * I + N * O), {"x", "gamma", "W", "b"}, {false, false, false, false}, {"y"}},
        std::move(in), body, device, {"linear_rotary_forward"});
}

// linear_forward_shared / linear_backward_shared over `count` layers of one input: y_i = x W_i^T; dx = sum_i dy_i W_i
// (nn::linear_backward's dx of each, added in i order as the model adds them; none when !want_dx), dW_i = dy_i^T x.
// packed: the W_i back to back and the y_i, dy_i at one stride (gap floats apart) in one buffer each (the GPU's
// strided-batched GEMMs); otherwise each in an allocation of its own (one GEMM a layer).
std::unique_ptr<Case> linear_shared_case(int count, int64_t N, int64_t I, int64_t O, bool packed, int64_t gap,
                                         bool want_dx, std::uint64_t seed) {
    std::mt19937 rng(static_cast<unsigned>(seed));
    Tensors in{random_tensor(N * I, rng), random_tensor(count * O * I, rng), random_tensor(count * N * O, rng)};
    auto body = [=]<typename T>(const V<T>& x, bool) -> V<T> {
        V<T> out{std::vector<T>(count * N * O), std::vector<T>(N * I, T(0)), std::vector<T>(count * O * I, T(0))};
        std::vector<T> tmp(static_cast<std::size_t>(N * I));
        for (int i = 0; i < count; i++) {
            const T* W = x[1].data() + i * O * I;
            const T* dy = x[2].data() + i * N * O;
            nn::linear_forward(out[0].data() + i * N * O, x[0].data(), W, static_cast<const T*>(nullptr), N, I, O);
            T* dxi = !want_dx ? nullptr : i == 0 ? out[1].data() : tmp.data();
            nn::linear_backward(dxi, out[2].data() + i * O * I, static_cast<T*>(nullptr), dy, x[0].data(), W, N, I, O);
            if (want_dx && i > 0) nn::residual_add(out[1].data(), tmp.data(), N * I);
        }
        return out;
    };
    auto device = [=](nn::NnBackend& be, const F32Tensors& x) -> F32Tensors {
        BackendArena a(be);
        nn::NnBackend::SharedLinears l;
        l.count = count;
        const float* X = a.up(x[0]);
        const int64_t sy = N * O + gap;
        float *Wall = nullptr, *yall = nullptr, *dyall = nullptr, *dWall = nullptr;
        if (packed) {
            Wall = a.up(x[1]);
            yall = a.alloc<float>(count * sy);
            dyall = a.alloc<float>(count * sy);
            dWall = a.zeros<float>(count * O * I);
        }
        for (int i = 0; i < count; i++) {
            const std::vector<float> Wi(x[1].begin() + i * O * I, x[1].begin() + (i + 1) * O * I),
                dyi(x[2].begin() + i * N * O, x[2].begin() + (i + 1) * N * O);
            l.W[i] = packed ? Wall + i * O * I : a.up(Wi);
            l.y[i] = packed ? yall + i * sy : a.alloc<float>(N * O);
            float* dy = packed ? dyall + i * sy : a.alloc<float>(N * O);
            be.upload(dy, dyi.data(), dyi.size() * sizeof(float));
            l.dy[i] = dy;
            l.dW[i] = packed ? dWall + i * O * I : a.zeros<float>(O * I);
        }
        float *dx = want_dx ? a.alloc<float>(N * I) : nullptr, *tmp = a.alloc<float>(N * I);
        be.linear_forward_shared(l, X, N, I, O);
        be.linear_backward_shared(dx, tmp, l, X, N, I, O);
        F32Tensors out{{}, want_dx ? a.down(dx, N * I) : std::vector<float>(static_cast<std::size_t>(N * I)), {}};
        for (int i = 0; i < count; i++) {
            const auto yi = a.down(l.y[i], N * O), dWi = a.down(l.dW[i], O * I);
            out[0].insert(out[0].end(), yi.begin(), yi.end());
            out[2].insert(out[2].end(), dWi.begin(), dWi.end());
        }
        return out;
    };
    const double f = 2.0 * count * N * I * O;
    auto c = std::make_unique<BackendCase<decltype(body)>>(
        typename BackendCase<decltype(body)>::Spec{
            dims({{"layers", count}, {"N", N}, {"I", I}, {"O", O}}) + (packed ? " packed" : " apart") +
                (gap ? " gap" + std::to_string(gap) : "") + (want_dx ? "" : " no-dx"),
            3 * f, 4.0 * (3 * N * I + 2 * count * O * I + 2 * count * N * O), {"x", "W", "dy"}, {false, false, false},
            {"y", "dx", "dW"}},
        std::move(in), body, device, std::vector<std::string>{"linear_forward_shared", "linear_backward_shared"});
    c->set_bf16_gemm();   // CUDA BF16: the GemmInputs::bf16 mode
    return c;
}

// cross_entropy_linear_backward: dlogits = nn::cross_entropy_backward (lse from nn::cross_entropy_forward; target 0
// ignored), then nn::linear_backward(dx, dW, db, dlogits, x, W) onto zeros. The logits are bf16 values, so the bf16
// reference (every input rounded) sees the logits the device does; the device's own rounding of dlogits (the GEMMs'
// input) is what separates the two.
std::unique_ptr<Case> cross_entropy_linear_case(int64_t N, int64_t I, int64_t Vn, std::uint64_t seed) {
    std::mt19937 rng(static_cast<unsigned>(seed));
    std::vector<std::int32_t> t(static_cast<std::size_t>(N));
    for (auto& e : t) e = static_cast<std::int32_t>(rng() % Vn);   // some 0s: ignored
    Tensors in{random_tensor(N * Vn, rng, 3.0), random_tensor(N * I, rng), random_tensor(Vn * I, rng), {0.7}};
    for (auto& e : in[0]) e = static_cast<double>(from_bf16(to_bf16(static_cast<float>(e))));
    auto body = [=]<typename T>(const V<T>& x, bool) -> V<T> {
        std::vector<T> lse(static_cast<std::size_t>(N)), dl(static_cast<std::size_t>(N * Vn));
        std::int64_t valid = 0;
        nn::cross_entropy_forward(lse.data(), &valid, x[0].data(), t.data(), N, Vn, 0);
        nn::cross_entropy_backward(dl.data(), x[3][0], x[0].data(), lse.data(), t.data(), N, Vn, 0, valid);
        V<T> out{std::vector<T>(N * I, T(0)), std::vector<T>(Vn * I, T(0)), std::vector<T>(Vn, T(0))};
        nn::linear_backward(out[0].data(), out[1].data(), out[2].data(), dl.data(), x[1].data(), x[2].data(), N, I, Vn);
        return out;
    };
    auto device = [=](nn::NnBackend& be, const F32Tensors& x) -> F32Tensors {
        BackendArena a(be);
        const float* logits = a.up(x[0]);
        const std::int32_t* targets = a.up(t);
        float *lse = a.alloc<float>(N), *dl = a.alloc<float>(N * Vn), *dx = a.zeros<float>(N * I),
              *dW = a.zeros<float>(Vn * I), *db = a.zeros<float>(Vn);
        std::int64_t valid = 0;
        be.cross_entropy_forward(lse, &valid, logits, targets, N, Vn, 0);
        be.cross_entropy_linear_backward(dx, dW, db, dl, x[3][0], logits, lse, targets, 0, valid, a.up(x[1]),
                                         a.up(x[2]), N, I, Vn);
        return {a.down(dx, N * I), a.down(dW, Vn * I), a.down(db, Vn)};
    };
    auto c = std::make_unique<BackendCase<decltype(body)>>(
        typename BackendCase<decltype(body)>::Spec{dims({{"N", N}, {"I", I}, {"V", Vn}}), 4.0 * N * I * Vn,
                                                   4.0 * (3 * N * Vn + 2 * N * I + 2 * Vn * I),
                                                   {"logits", "x", "W", "dloss"}, {false, false, false, false},
                                                   {"dx", "dW", "db"}},
        std::move(in), body, device, std::vector<std::string>{"cross_entropy_linear_backward"});
    c->set_bf16_gemm();   // CUDA BF16: dlogits in db's column-sum pass, the GEMMs on its bf16 copy
    return c;
}

// gelu_linear_backward: dy = gelu'(h) dg (nn::gelu_backward), then nn::linear_backward(dx, dW, db, dy, x, W) with dW
// and db accumulated onto zeros; want_dx false: no dx, want_db false: no bias.
std::unique_ptr<Case> gelu_linear_backward_case(int64_t N, int64_t I, int64_t O, bool want_dx, bool want_db,
                                                std::uint64_t seed) {
    std::mt19937 rng(static_cast<unsigned>(seed));
    Tensors in{random_tensor(N * O, rng), random_tensor(N * O, rng), random_tensor(N * I, rng), random_tensor(O * I, rng)};
    auto body = [=]<typename T>(const V<T>& x, bool) -> V<T> {
        std::vector<T> dy(static_cast<std::size_t>(N * O));
        nn::gelu_backward(dy.data(), x[0].data(), x[1].data(), N * O);
        V<T> out{std::vector<T>(N * I, T(0)), std::vector<T>(O * I, T(0)), std::vector<T>(O, T(0))};
        nn::linear_backward(want_dx ? out[0].data() : nullptr, out[1].data(), want_db ? out[2].data() : nullptr,
                            dy.data(), x[2].data(), x[3].data(), N, I, O);
        return out;
    };
    auto device = [=](nn::NnBackend& be, const F32Tensors& x) -> F32Tensors {
        BackendArena a(be);
        float *dg = a.up(x[0]), *dx = a.zeros<float>(N * I), *dW = a.zeros<float>(O * I), *db = a.zeros<float>(O);
        be.gelu_linear_backward(want_dx ? dx : nullptr, dW, want_db ? db : nullptr, dg, a.up(x[1]), a.up(x[2]),
                                a.up(x[3]), N, I, O);
        return {a.down(dx, N * I), a.down(dW, O * I), a.down(db, O)};
    };
    auto c = std::make_unique<BackendCase<decltype(body)>>(
        typename BackendCase<decltype(body)>::Spec{
            dims({{"N", N}, {"I", I}, {"O", O}}) + (want_dx ? "" : " no-dx") + (want_db ? "" : " no-db"),
            4.0 * N * I * O, 4.0 * (3 * N * O + 2 * N * I + 2 * O * I), {"dg", "h", "x", "W"},
            {false, false, false, false}, {"dx", "dW", "db"}},
        std::move(in), body, device, std::vector<std::string>{"gelu_linear_backward"});
    c->set_bf16_gemm();   // CUDA BF16: the one-pass dy (bf16 copy and db's sums) and the GEMMs on it
    return c;
}

// The device body of a rotary op case: `op(be, out, in, view)` on the uploaded input into a fresh buffer, then in
// place; returns both.
template <typename Op>
F32Tensors rotary_out_and_in_place(nn::NnBackend& be, const F32Tensors& x, int64_t N, int64_t R, int64_t n, Op op) {
    const auto table = nn::rotary_table_range<float>(N, R);
    BackendArena a(be);
    const nn::RotaryView view{a.up(table.cos), a.up(table.sin), N, R};
    float *y = a.alloc<float>(n), *g = a.up(x[0]);
    op(be, y, g, view);
    op(be, g, g, view);
    return {a.down(y, n), a.down(g, n)};
}

// rotary_scale_forward: the first `scaled` heads of every row times s, then rotary over all H heads (rot_dim R <= D:
// the unrotated channels scaled too). The reference: the scale, then nn::rotary_forward. Outputs: y from x, and the
// same in place.
std::unique_ptr<Case> rotary_scale_case(int64_t B, int64_t N, int64_t H, int64_t D, int64_t R, int64_t scaled,
                                        std::uint64_t seed) {
    std::mt19937 rng(static_cast<unsigned>(seed));
    const int64_t n = B * N * H * D;
    const float s = 0.125f + 0.01f * static_cast<float>(seed);
    Tensors in{random_tensor(n, rng)};
    auto body = [=]<typename T>(const V<T>& x, bool) -> V<T> {
        std::vector<T> scaled_x = x[0];
        for (int64_t r = 0; r < B * N; r++)
            for (int64_t c = 0; c < scaled * D; c++) scaled_x[r * H * D + c] *= static_cast<T>(s);
        V<T> out{std::vector<T>(n)};
        nn::rotary_forward(out[0].data(), scaled_x.data(), nn::rotary_table_range<T>(N, R), B, N, H, D);
        out.push_back(out[0]);
        return out;
    };
    auto device = [=](nn::NnBackend& be, const F32Tensors& x) -> F32Tensors {
        return rotary_out_and_in_place(be, x, N, R, n, [=](nn::NnBackend& b, float* y, const float* in,
                                                           const nn::RotaryView& view) {
            b.rotary_scale_forward(y, in, view, B, N, H, D, s, scaled);
        });
    };
    return make_backend_case<decltype(body)>(
        {dims({{"B", B}, {"N", N}, {"H", H}, {"D", D}, {"R", R}, {"scaled", scaled}}), 7.0 * n, 4.0 * 2 * n, {"x"},
         {false}, {"y", "y_in_place"}},
        std::move(in), body, device, {"rotary_scale_forward"});
}

// rotary_backward_scale: nn::rotary_backward of dy over all H heads (rot_dim R <= D), then every element times s.
// Outputs: dx from dy, and the same in place.
std::unique_ptr<Case> rotary_backward_scale_case(int64_t B, int64_t N, int64_t H, int64_t D, int64_t R,
                                                 std::uint64_t seed) {
    std::mt19937 rng(static_cast<unsigned>(seed));
    const int64_t n = B * N * H * D;
    const float s = 0.125f + 0.01f * static_cast<float>(seed);
    Tensors in{random_tensor(n, rng)};
    auto body = [=]<typename T>(const V<T>& x, bool) -> V<T> {
        V<T> out{std::vector<T>(n)};
        nn::rotary_backward(out[0].data(), x[0].data(), nn::rotary_table_range<T>(N, R), B, N, H, D);
        for (auto& e : out[0]) e *= static_cast<T>(s);
        out.push_back(out[0]);
        return out;
    };
    auto device = [=](nn::NnBackend& be, const F32Tensors& x) -> F32Tensors {
        return rotary_out_and_in_place(be, x, N, R, n, [=](nn::NnBackend& b, float* dx, const float* dy,
                                                           const nn::RotaryView& view) {
            b.rotary_backward_scale(dx, dy, view, B, N, H, D, s);
        });
    };
    return make_backend_case<decltype(body)>(
        {dims({{"B", B}, {"N", N}, {"H", H}, {"D", D}, {"R", R}}), 7.0 * n, 4.0 * 2 * n, {"dy"}, {false},
         {"dx", "dx_in_place"}},
        std::move(in), body, device, {"rotary_backward_scale"});
}

}  // namespace

void register_nn_backend(std::vector<OpInfo>& out) {
    auto add = [&](std::string name, std::string cpu, std::vector<std::string> tests, std::string cuda, auto test_case,
                   auto perf_case, int test_seeds = 1) {
        OpInfo op;
        op.test_seeds = test_seeds;
        op.name = std::move(name);
        op.cpu = std::move(cpu);
        op.cuda = std::move(cuda);
        op.tests = std::move(tests);
        op.test_case = test_case;
        op.perf_case = [perf_case](Backend) { return perf_case(); };
        out.push_back(std::move(op));
    };
    const std::string backend_test = "tests/test_nn_backend.cpp: " + std::string(kNnBackendTestCase);
    add("nn.embedding", "lib/nn/embedding.h", {"tests/test_nn_ops.cpp: nn: embedding and positions gradient", backend_test},
        "kernels/nn_backend_cuda.cu", [](std::uint64_t s) { return embedding_case(2, 5, 7, 6, s); },
        [] { return embedding_case(8, 256, 8000, 128, 1); });
    add("nn.embedding_position", "lib/nn/nn_backend.h", {backend_test}, "kernels/nn_embedding_cuda.cu",
        [](std::uint64_t s) { return embedding_position_case(9, 7, 5, 6, s); },
        [] { return embedding_position_case(8, 8000, 2048, 256, 1); });
    add("nn.gather_rows", "lib/nn/nn_backend_host.cpp", {backend_test}, "kernels/nn_loss_cuda.cu",
        [](std::uint64_t s) { return gather_case(5, 9, 7, s); }, [] { return gather_case(2048, 2048, 128, 1); });
    add("nn.adamw", "lib/train/adamw.cpp", {backend_test}, "kernels/nn_loss_cuda.cu",
        [](std::uint64_t s) { return adamw_case(1000, s); }, [] { return adamw_case(std::int64_t{1} << 22, 1); });
    add("nn.sum_squares", "lib/nn/nn_backend_host.cpp", {backend_test}, "kernels/nn_loss_cuda.cu",
        [](std::uint64_t s) { return sum_squares_case(100000, s); }, [] { return sum_squares_case(std::int64_t{1} << 22, 1); });
    // seed 2: rows wider than a block's 256 threads; 3: x written over a
    add("nn.residual_rmsnorm", "lib/nn/nn_backend_host.cpp",
        {backend_test, "tests/test_backend_model.cpp: backend model: on the host backend, loss, logits and gradients equal RetroModel<float> bit for bit"},
        "kernels/nn_backend_cuda.cu",
        [](std::uint64_t s) {
            if (s == 2) return residual_rmsnorm_case(3, 700, false, s);
            return residual_rmsnorm_case(5, 6, s == 3, s);
        },
        [] { return residual_rmsnorm_case(8192, 768, false, 1); }, 3);
    // seed 1: one row (the GPU's few-row kernel with gelu in its epilogue), h and bias; 2: 3 rows, no h, no bias; 3:
    // 12 rows (the GEMM, then gelu), h; 4: 8 rows of 700 inputs (float4 path, the largest few-row count)
    add("nn.linear_gelu", "lib/nn/nn_backend_host.cpp", {backend_test}, "kernels/nn_backend_cuda.cu",
        [](std::uint64_t s) {
            if (s == 2) return linear_gelu_case(3, 37, 41, false, false, s);
            if (s == 3) return linear_gelu_case(12, 64, 48, true, true, s);
            if (s == 4) return linear_gelu_case(8, 700, 300, true, true, s);
            return linear_gelu_case(1, 512, 96, true, true, s);
        },
        [] { return linear_gelu_case(1, 512, 2048, false, true, 1); }, 4);
    // seed 1: the feed-forward's shape in small; 2: rows past one chunk of the column sums' first pass, widths not a
    // multiple of 32
    add("nn.ff_bf16", "lib/nn/nn_backend_host.cpp", {backend_test}, "kernels/nn_backend_cuda.cu",
        [](std::uint64_t s) {
            if (s == 2) return ff_bf16_case(300, 40, 150, s);
            return ff_bf16_case(32, 48, 192, s);
        },
        [] { return ff_bf16_case(8192, 768, 3072, 1); }, 2);
    // the CPU's fp32 run against its double reference: g's stored rounding flips where the float and double values
    // of gelu straddle a bf16 boundary (~1e-4 of the elements, each a bf16 step: rms ratios ~2e-4 in y and dW2)
    out.back().bound_f32 = 1e-3;
    // seed 1: rows and widths past a block of 256 threads; 2: widths off 4 and 8 (the scalar paths)
    add("nn.ff_in_bf16", "lib/nn/nn_backend_host.cpp", {backend_test}, "kernels/nn_backend_cuda.cu",
        [](std::uint64_t s) {
            if (s == 2) return ff_input_bf16_case(37, 42, 150, s);
            return ff_input_bf16_case(300, 264, 520, s);
        },
        [] { return ff_input_bf16_case(8192, 768, 3072, 1); }, 2);
    // the CPU's fp32 run against its double reference: the stored roundings of n and g flip where the float and
    // double values straddle a bf16 boundary, as nn.ff_bf16's
    out.back().bound_f32 = 1e-3;
    // seed 1: three layers packed (the strided-batched GEMMs), rows past a block; 2: two layers apart, odd widths
    add("nn.attn_in_bf16", "lib/nn/nn_backend.h", {backend_test}, "kernels/nn_linear_shared_cuda.cu",
        [](std::uint64_t s) {
            if (s == 2) return attn_input_bf16_case(2, 37, 42, 24, false, s);
            return attn_input_bf16_case(3, 300, 264, 128, true, s);
        },
        [] { return attn_input_bf16_case(3, 8192, 768, 512, true, 1); }, 2);
    out.back().bound_f32 = 1e-3;   // (n's stored rounding, as above)
    // seed 1: one row (the GPU's few-row kernel with the norm in its prologue), gelu, bias; 2: 3 rows of 37 inputs
    // (scalar path), plain, no bias; 3: 12 rows (the two ops); 4: 8 rows of 2048 (the normalised rows past the shared
    // memory a block has: the two ops); 5: 8 rows of 700 (float4 path), gelu
    add("nn.norm_linear", "lib/nn/nn_backend.h", {backend_test}, "kernels/nn_backend_cuda.cu",
        [](std::uint64_t s) {
            if (s == 2) return rmsnorm_linear_case(3, 37, 41, false, false, s);
            if (s == 3) return rmsnorm_linear_case(12, 64, 48, true, true, s);
            if (s == 4) return rmsnorm_linear_case(8, 2048, 40, false, true, s);
            if (s == 5) return rmsnorm_linear_case(8, 700, 300, true, true, s);
            return rmsnorm_linear_case(1, 512, 96, true, true, s);
        },
        [] { return rmsnorm_linear_case(1, 512, 1536, false, false, 1); }, 5);
    // seed 1: one row onto res itself, bias; 2: 3 rows of 37 inputs into a buffer of its own, no bias; 3: 12 rows (the
    // GEMM, then the sum), in place
    add("nn.linear_residual", "lib/nn/nn_backend.h", {backend_test}, "kernels/nn_backend_cuda.cu",
        [](std::uint64_t s) {
            if (s == 2) return linear_residual_case(3, 37, 41, false, false, s);
            if (s == 3) return linear_residual_case(12, 64, 48, true, true, s);
            return linear_residual_case(1, 512, 300, true, true, s);
        },
        [] { return linear_residual_case(1, 2048, 512, true, true, 1); }, 3);
    // seed 1: a decode row of q | k | v with the norm (q scaled, partial rotation; the GPU's one-launch form); 2: 3
    // rows of separate q (O = heads x D), full rotation, no norm, scalar path; 3: 12 rows (the three ops); 4: 8 rows
    // of k (none scaled) with the norm
    add("nn.linear_rotary", "lib/nn/nn_backend.h", {backend_test}, "kernels/nn_backend_cuda.cu",
        [](std::uint64_t s) {
            if (s == 2) return linear_rotary_case(3, 37, 24, 3, 8, 8, 3, false, s);
            if (s == 3) return linear_rotary_case(12, 64, 64, 4, 16, 8, 4, true, s);
            if (s == 4) return linear_rotary_case(8, 96, 64, 4, 16, 8, 0, true, s);
            return linear_rotary_case(1, 512, 1536, 16, 64, 32, 8, true, s);
        },
        [] { return linear_rotary_case(1, 512, 1536, 16, 64, 32, 8, true, 1); }, 4);
    // seed 1: the feed-forward's shape in small (bf16: the one-pass dy); 2: no dx; 3: no bias (the two ops); 4: a
    // row count past one chunk of the column sums' first pass, columns not a multiple of 32
    // seed 1: a small vocabulary; 2: rows past one chunk of the column sums' first pass, a vocabulary not a
    // multiple of 32
    add("nn.cross_entropy_linear", "lib/nn/nn_backend.h", {backend_test}, "kernels/nn_loss_cuda.cu",
        [](std::uint64_t s) {
            if (s == 2) return cross_entropy_linear_case(150, 24, 70, s);
            return cross_entropy_linear_case(12, 16, 40, s);
        },
        [] { return cross_entropy_linear_case(2048, 768, 8000, 1); }, 2);
    add("nn.gelu_linear_backward", "lib/nn/nn_backend.h", {backend_test}, "kernels/nn_backend_cuda.cu",
        [](std::uint64_t s) {
            if (s == 2) return gelu_linear_backward_case(24, 16, 64, false, true, s);
            if (s == 3) return gelu_linear_backward_case(24, 16, 64, true, false, s);
            if (s == 4) return gelu_linear_backward_case(300, 24, 70, true, true, s);
            return gelu_linear_backward_case(32, 48, 192, true, true, s);
        },
        [] { return gelu_linear_backward_case(8192, 768, 3072, true, true, 1); }, 4);
    // seed 1: q, k, v with the weights back to back and 64 floats between outputs (a strided-batched forward; in bf16
    // each dy rounded apart, so the dW one GEMM a layer; in fp32 the dW batched); 2: k, v apart (one GEMM a layer);
    // 3: packed without gaps and without dx (cross-attention without a context gradient; every GEMM batched); 4: 5
    // rows back to back (fp32: the separate layers' few-row path; bf16: one dy copy, batched)
    add("nn.linear_shared", "lib/nn/nn_backend.h", {backend_test}, "kernels/nn_linear_shared_cuda.cu",
        [](std::uint64_t s) {
            if (s == 2) return linear_shared_case(2, 37, 24, 40, false, 0, true, s);
            if (s == 3) return linear_shared_case(2, 40, 32, 16, true, 0, false, s);
            if (s == 4) return linear_shared_case(3, 5, 16, 8, true, 0, true, s);
            return linear_shared_case(3, 64, 48, 32, true, 64, true, s);
        },
        [] { return linear_shared_case(3, 8192, 768, 512, true, 0, true, 1); }, 4);
    // seed 1: a decode row of q | k heads (the first half scaled), partial rotary; 2: every head scaled, full rotary
    add("nn.scaled_rotary", "lib/nn/nn_backend_host.cpp", {backend_test}, "kernels/nn_backend_cuda.cu",
        [](std::uint64_t s) {
            if (s == 2) return rotary_scale_case(2, 5, 3, 8, 8, 3, s);
            return rotary_scale_case(1, 3, 4, 6, 4, 2, s);
        },
        [] { return rotary_scale_case(8, 1024, 8, 64, 64, 8, 1); }, 2);
    // its backward over every head: seed 1 partial rotary, 2 full
    add("nn.scaled_rotary_backward", "lib/nn/nn_backend_host.cpp", {backend_test}, "kernels/nn_backend_cuda.cu",
        [](std::uint64_t s) {
            if (s == 2) return rotary_backward_scale_case(2, 5, 3, 8, 8, s);
            return rotary_backward_scale_case(1, 3, 4, 6, 4, s);
        },
        [] { return rotary_backward_scale_case(8, 1024, 8, 64, 64, 1); }, 2);
    // self-attention, seed 1: small (position 0, the last position, rows not in sequence order, a sequence not fed);
    // 2: keys over many splits of kAttentionDecodeSplitKeys = 64 (the new key the 2nd of its split); 3: the largest
    // head dimension; 4: exactly four full splits (256 keys); 7: D = 48 (float4 quarters of 12 channels), the new key
    // alone in its split and the last of one. CCA (null column, pad mask, nothing written), seed 5: small, a wholly
    // masked slot, a slot read by two rows; 6: 300 keys. The perf case: 8 sequences of the demo decoder at 1,000
    add("nn.attention_decode", "lib/nn/nn_backend_host.cpp",
        {backend_test, "tests/test_generate.cpp: generate: the backend decoder (host backend) equals a full recompute at every step (fp32 1e-5)"},
        "kernels/nn_attention_decode_cuda.cu",
        [](std::uint64_t s) {
            if (s == 2) return attention_decode_case(2, 700, 2, 64, {600, 257}, {1, 0}, false, s);
            if (s == 3) return attention_decode_case(1, 40, 1, nn::kAttentionDecodeMaxD, {39}, {0}, false, s);
            if (s == 4) return attention_decode_case(1, 300, 2, 32, {255}, {0}, false, s);
            if (s == 5) return attention_decode_case(3, 12, 2, 5, {11, 11, 7}, {0, 2, 2}, true, s);
            if (s == 6) return attention_decode_case(2, 300, 2, 64, {299, 299}, {1, 0}, true, s);
            if (s == 7) return attention_decode_case(2, 130, 3, 48, {64, 63}, {0, 1}, false, s);
            return attention_decode_case(3, 9, 2, 5, {8, 0}, {2, 0}, false, s);
        },
        [] { return attention_decode_case(8, 1024, 8, 64, std::vector<std::int64_t>(8, 1000), {0, 1, 2, 3, 4, 5, 6, 7}, false, 1); },
        7);
}

}  // namespace retro::ops
