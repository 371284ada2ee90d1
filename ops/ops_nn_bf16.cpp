// The op registry's bf16-activation cases (ops/ops_nn_bf16.h): each runs the NnBackend ops of one slice of the bf16
// activations and holds them to the nn ops on the rounded values (BF16 on CUDA only; on the CPU the fp32 reference).
#include "ops_nn_bf16.h"

#include <random>
#include <type_traits>
#include <vector>

#include "backend_case.h"
#include "nn/gelu.h"
#include "nn/linear.h"
#include "nn/residual.h"
#include "nn/rmsnorm.h"

namespace retro::ops {

using std::int64_t;
using nn_cases::dims;
template <typename T>
using V = std::vector<std::vector<T>>;

// The feed-forward over bf16 activations (the bf16 GEMM mode's storage of its gelu output): linear_gelu_forward_bf16
// (h = x W1^T + b1, g16 = bf16(gelu(h))), linear_forward_bf16x (y = g W2^T + b2 from g16) and linear_backward_bf16x
// (dg = dy W2, dW2 += dy^T g, db2 += sum dy). The reference: nn::linear_forward, nn::gelu_forward, g rounded to bf16,
// nn::linear_forward, nn::linear_backward. BF16 on CUDA only (set_bf16_only).
std::unique_ptr<Case> ff_bf16_case(int64_t N, int64_t I, int64_t O, std::uint64_t seed) {
    std::mt19937 rng(static_cast<unsigned>(seed));
    Tensors in{random_tensor(N * I, rng), random_tensor(O * I, rng), random_tensor(O, rng), random_tensor(I * O, rng),
               random_tensor(I, rng), random_tensor(N * I, rng), random_tensor(I * O, rng), random_tensor(I, rng)};
    auto body = [=]<typename T>(const V<T>& x, bool) -> V<T> {
        // dW2 and db2 start from x[6], x[7]: parameter gradients accumulate (+=)
        V<T> out{std::vector<T>(N * I), std::vector<T>(N * O), std::vector<T>(N * O), x[6], x[7]};
        std::vector<T> g(static_cast<std::size_t>(N * O));
        nn::linear_forward(out[1].data(), x[0].data(), x[1].data(), x[2].data(), N, I, O);
        nn::gelu_forward(g.data(), out[1].data(), N * O);
        for (auto& e : g) e = static_cast<T>(from_bf16(to_bf16(static_cast<float>(e))));
        nn::linear_forward(out[0].data(), g.data(), x[3].data(), x[4].data(), N, O, I);
        nn::linear_backward(out[2].data(), out[3].data(), out[4].data(), x[5].data(), g.data(), x[3].data(), N, O, I);
        return out;
    };
    auto device = [=](nn::NnBackend& be, const F32Tensors& x) -> F32Tensors {
        BackendArena a(be);
        auto* g16 = a.alloc<std::uint16_t>(N * O);
        float *y = a.alloc<float>(N * I), *h = a.alloc<float>(N * O), *dg = a.alloc<float>(N * O), *dW2 = a.up(x[6]),
              *db2 = a.up(x[7]);
        const float* W2 = a.up(x[3]);
        be.linear_gelu_forward_bf16(g16, h, a.up(x[0]), a.up(x[1]), a.up(x[2]), N, I, O);
        be.linear_forward_bf16x(y, g16, W2, a.up(x[4]), N, O, I);
        be.linear_backward_bf16x(dg, dW2, db2, a.up(x[5]), g16, W2, N, O, I);
        return {a.down(y, N * I), a.down(h, N * O), a.down(dg, N * O), a.down(dW2, I * O), a.down(db2, I)};
    };
    auto c = std::make_unique<BackendCase<decltype(body)>>(
        typename BackendCase<decltype(body)>::Spec{dims({{"N", N}, {"I", I}, {"O", O}}), 8.0 * N * I * O,
                                                   4.0 * (4 * N * I + 3 * N * O + 2 * O * I),
                                                   {"x", "W1", "b1", "W2", "b2", "dy", "dW2 before", "db2 before"},
                                                   {false, false, false, false, false, false, false, false},
                                                   {"y", "h", "dg", "dW2", "db2"}},
        std::move(in), body, device,
        std::vector<std::string>{"linear_gelu_forward_bf16", "linear_forward_bf16x", "linear_backward_bf16x"});
    c->set_bf16_only();
    return c;
}

// The feed-forward's first layer over a pre-norm output stored as bf16 (the bf16 activations' second slice):
// residual_rmsnorm_forward_bf16 (x = a + b, n16 = bf16(rmsnorm(x))), linear_gelu_forward_bf16x (h = n W1^T + b1,
// g16 = bf16(gelu(h))) and gelu_linear_backward_bf16x (from dg: dn = gelu'(h) dg W1, dW1 += .. n, db1 += ..). The
// reference: nn::residual_sum, nn::rmsnorm_forward, n rounded to bf16, nn::linear_forward, nn::gelu_forward, g rounded,
// nn::gelu_backward, nn::linear_backward. BF16 on CUDA only (set_bf16_only).
std::unique_ptr<Case> ff_input_bf16_case(int64_t N, int64_t I, int64_t O, std::uint64_t seed) {
    std::mt19937 rng(static_cast<unsigned>(seed));
    Tensors in{random_tensor(N * I, rng), random_tensor(N * I, rng), random_tensor(I, rng), random_tensor(O * I, rng),
               random_tensor(O, rng), random_tensor(N * O, rng), random_tensor(O * I, rng), random_tensor(O, rng)};
    auto round_bf16 = [](auto& v) {
        for (auto& e : v) e = static_cast<std::decay_t<decltype(e)>>(from_bf16(to_bf16(static_cast<float>(e))));
    };
    auto body = [=]<typename T>(const V<T>& x, bool) -> V<T> {
        // dW1 and db1 start from x[6], x[7]: parameter gradients accumulate (+=)
        V<T> out{std::vector<T>(N * I), std::vector<T>(N),     std::vector<T>(N * I), std::vector<T>(N * O),
                 std::vector<T>(N * O), std::vector<T>(N * I), x[6],                  x[7]};
        nn::residual_sum(out[0].data(), x[0].data(), x[1].data(), N * I);
        nn::rmsnorm_forward(out[2].data(), out[1].data(), out[0].data(), x[2].data(), N, I);
        round_bf16(out[2]);
        nn::linear_forward(out[3].data(), out[2].data(), x[3].data(), x[4].data(), N, I, O);
        nn::gelu_forward(out[4].data(), out[3].data(), N * O);
        round_bf16(out[4]);
        std::vector<T> dh(static_cast<std::size_t>(N * O));
        nn::gelu_backward(dh.data(), x[5].data(), out[3].data(), N * O);
        nn::linear_backward(out[5].data(), out[6].data(), out[7].data(), dh.data(), out[2].data(), x[3].data(), N, I, O);
        return out;
    };
    auto device = [=](nn::NnBackend& be, const F32Tensors& x) -> F32Tensors {
        BackendArena a(be);
        auto* n16 = a.alloc<std::uint16_t>(N * I);
        auto* g16 = a.alloc<std::uint16_t>(N * O);
        float *xs = a.alloc<float>(N * I), *norm = a.alloc<float>(N), *h = a.alloc<float>(N * O),
              *dn = a.alloc<float>(N * I), *dW1 = a.up(x[6]), *db1 = a.up(x[7]);
        float* dg = a.up(x[5]);   // scratch of the backward
        const float* W1 = a.up(x[3]);
        be.residual_rmsnorm_forward_bf16(xs, n16, norm, a.up(x[0]), a.up(x[1]), a.up(x[2]), N, I);
        be.linear_gelu_forward_bf16x(g16, h, n16, W1, a.up(x[4]), N, I, O);
        be.gelu_linear_backward_bf16x(dn, dW1, db1, dg, h, n16, W1, N, I, O);
        auto values = [&](const std::uint16_t* p, int64_t n) {
            std::vector<std::uint16_t> bits(static_cast<std::size_t>(n));
            be.download(bits.data(), p, bits.size() * 2);
            std::vector<float> v(bits.size());
            for (std::size_t i = 0; i < v.size(); i++) v[i] = from_bf16(bf16{bits[i]});
            return v;
        };
        return {a.down(xs, N * I), a.down(norm, N),   values(n16, N * I), a.down(h, N * O),
                values(g16, N * O), a.down(dn, N * I), a.down(dW1, O * I), a.down(db1, O)};
    };
    auto c = std::make_unique<BackendCase<decltype(body)>>(
        typename BackendCase<decltype(body)>::Spec{dims({{"N", N}, {"I", I}, {"O", O}}), 6.0 * N * I * O,
                                                   4.0 * (4 * N * I + 3 * N * O + 2 * O * I),
                                                   {"a", "b", "gamma", "W1", "b1", "dg", "dW1 before", "db1 before"},
                                                   {false, false, false, false, false, false, false, false},
                                                   {"x", "norm", "n", "h", "g", "dn", "dW1", "db1"}},
        std::move(in), body, device,
        std::vector<std::string>{"residual_rmsnorm_forward_bf16", "linear_gelu_forward_bf16x",
                                 "gelu_linear_backward_bf16x"});
    c->set_bf16_only();
    return c;
}

// An attention's projections of a pre-norm output stored as bf16: rmsnorm_forward_bf16 (n16 = bf16(rmsnorm(x))), then
// linear_forward_shared_bf16x / linear_backward_shared_bf16x over `count` layers (the weights back to back and the
// outputs at one stride where packed). The reference: nn::rmsnorm_forward, n rounded to bf16, then each layer's
// nn::linear_forward and nn::linear_backward (dx summed in layer order). BF16 on CUDA only (set_bf16_only).
std::unique_ptr<Case> attn_input_bf16_case(int count, int64_t N, int64_t I, int64_t O, bool packed, std::uint64_t seed) {
    std::mt19937 rng(static_cast<unsigned>(seed));
    Tensors in{random_tensor(N * I, rng), random_tensor(I, rng), random_tensor(count * O * I, rng),
               random_tensor(count * N * O, rng), random_tensor(count * O * I, rng)};
    auto body = [=]<typename T>(const V<T>& x, bool) -> V<T> {
        // each layer's dW starts from its part of x[4]: parameter gradients accumulate (+=)
        V<T> out{std::vector<T>(N), std::vector<T>(N * I), std::vector<T>(count * N * O), std::vector<T>(N * I, T(0)),
                 x[4]};
        nn::rmsnorm_forward(out[1].data(), out[0].data(), x[0].data(), x[1].data(), N, I);
        for (auto& e : out[1]) e = static_cast<T>(from_bf16(to_bf16(static_cast<float>(e))));
        std::vector<T> tmp(static_cast<std::size_t>(N * I));
        for (int i = 0; i < count; i++) {
            const T* W = x[2].data() + i * O * I;
            nn::linear_forward(out[2].data() + i * N * O, out[1].data(), W, static_cast<const T*>(nullptr), N, I, O);
            T* dxi = i == 0 ? out[3].data() : tmp.data();
            nn::linear_backward(dxi, out[4].data() + i * O * I, static_cast<T*>(nullptr), x[3].data() + i * N * O,
                                out[1].data(), W, N, I, O);
            if (i > 0) nn::residual_add(out[3].data(), tmp.data(), N * I);
        }
        return out;
    };
    auto device = [=](nn::NnBackend& be, const F32Tensors& x) -> F32Tensors {
        BackendArena a(be);
        auto* n16 = a.alloc<std::uint16_t>(N * I);
        float* norm = a.alloc<float>(N);
        be.rmsnorm_forward_bf16(n16, norm, a.up(x[0]), a.up(x[1]), N, I);
        nn::NnBackend::SharedLinears l;
        l.count = count;
        const float* Wall = packed ? a.up(x[2]) : nullptr;
        float *yall = packed ? a.alloc<float>(count * N * O) : nullptr, *dWall = packed ? a.up(x[4]) : nullptr;
        const float* dyall = packed ? a.up(x[3]) : nullptr;
        for (int i = 0; i < count; i++) {
            if (packed) {
                l.W[i] = Wall + i * O * I, l.y[i] = yall + i * N * O, l.dy[i] = dyall + i * N * O;
                l.dW[i] = dWall + i * O * I;
                continue;
            }
            l.W[i] = a.up(std::vector<float>(x[2].begin() + i * O * I, x[2].begin() + (i + 1) * O * I));
            l.dy[i] = a.up(std::vector<float>(x[3].begin() + i * N * O, x[3].begin() + (i + 1) * N * O));
            l.y[i] = a.alloc<float>(N * O);
            l.dW[i] = a.up(std::vector<float>(x[4].begin() + i * O * I, x[4].begin() + (i + 1) * O * I));
        }
        float *dx = a.alloc<float>(N * I), *tmp = a.alloc<float>(N * I);
        be.linear_forward_shared_bf16x(l, n16, N, I, O);
        be.linear_backward_shared_bf16x(dx, tmp, l, n16, N, I, O);
        std::vector<std::uint16_t> bits(static_cast<std::size_t>(N * I));
        be.download(bits.data(), n16, bits.size() * 2);
        F32Tensors out{a.down(norm, N), std::vector<float>(bits.size()), {}, a.down(dx, N * I), {}};
        for (std::size_t i = 0; i < bits.size(); i++) out[1][i] = from_bf16(bf16{bits[i]});
        for (int i = 0; i < count; i++) {
            const auto yi = a.down(l.y[i], N * O), dWi = a.down(l.dW[i], O * I);
            out[2].insert(out[2].end(), yi.begin(), yi.end());
            out[4].insert(out[4].end(), dWi.begin(), dWi.end());
        }
        return out;
    };
    const double f = 2.0 * count * N * I * O;
    auto c = std::make_unique<BackendCase<decltype(body)>>(
        typename BackendCase<decltype(body)>::Spec{
            dims({{"layers", count}, {"N", N}, {"I", I}, {"O", O}}) + (packed ? " packed" : " apart"), 3 * f,
            4.0 * (3 * N * I + 2 * count * O * I + 2 * count * N * O), {"x", "gamma", "W", "dy", "dW before"},
            {false, false, false, false, false}, {"norm", "n", "y", "dx", "dW"}},
        std::move(in), body, device,
        std::vector<std::string>{"rmsnorm_forward_bf16", "linear_forward_shared_bf16x", "linear_backward_shared_bf16x"});
    c->set_bf16_only();
    return c;
}

}  // namespace retro::ops
