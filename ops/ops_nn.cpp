// The nn ops in the registry (lib/nn): each as a CpuCase body running forward and backward in
// float or double. Test shapes are small and hit the edges (masks, null keys, partial chunks); perf
// shapes are the demo model's (dim 128, 8 heads of 32, 256 tokens, batch 8).
#include <cstdint>
#include <memory>
#include <random>

#include "cpu_case.h"
#include "nn/attention.h"
#include "nn/attention_layer.h"
#include "nn/chunked_cross_attention.h"
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

// y = x W^T + b
std::unique_ptr<Case> linear_case(int64_t N, int64_t I, int64_t O, std::uint64_t seed) {
    std::mt19937 rng(static_cast<unsigned>(seed));
    Tensors in{random_tensor(N * I, rng), random_tensor(O * I, rng), random_tensor(O, rng), random_tensor(N * O, rng)};
    auto body = [=]<typename T>(const V<T>& x, bool bwd) -> V<T> {
        V<T> out{std::vector<T>(N * O)};
        nn::linear_forward(out[0].data(), x[0].data(), x[1].data(), x[2].data(), N, I, O);
        if (!bwd) return out;
        out.push_back(std::vector<T>(N * I));
        out.push_back(std::vector<T>(O * I, T(0)));
        out.push_back(std::vector<T>(O, T(0)));
        nn::linear_backward(out[1].data(), out[2].data(), out[3].data(), x[3].data(), x[0].data(), x[1].data(), N, I, O);
        return out;
    };
    const double f = 2.0 * N * I * O;
    return make<decltype(body)>({dims({{"N", N}, {"I", I}, {"O", O}}), 3 * f, 4.0 * (2 * N * I + 2 * O * I + 2 * N * O),
                                 {"x", "W", "b", "dy"}, {true, true, true, false}, {"y", "dx", "dW", "db"}},
                                std::move(in), body);
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
    return make<decltype(body)>({dims({{"N", N}, {"C", C}}), 12.0 * N * C, 4.0 * 5 * N * C, {"x", "gamma", "dy"},
                                 {true, true, false}, {"y", "dx", "dgamma"}},
                                std::move(in), body);
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
    return make<decltype(body)>({dims({{"N", N}}), 30.0 * N, 4.0 * 4 * N, {"x", "dy"}, {true, false}, {"y", "dx"}}, std::move(in), body);
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
    return make<decltype(body)>({dims({{"B", B}, {"N", N}, {"H", H}, {"D", D}, {"R", R}}), 6.0 * B * N * H * R, 4.0 * 4 * n,
                                 {"x", "dy"}, {true, false}, {"y", "dx"}},
                                std::move(in), body);
}

// softmax(q k^T / sqrt(D) + mask) v, with the null key/value column and a pad mask when asked
std::unique_ptr<Case> attention_case(nn::AttentionShape s, bool masked, std::uint64_t seed) {
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
    const double f = 4.0 * s.B * s.H * s.Nq * s.keys() * s.D;
    return make<decltype(body)>({dims({{"B", s.B}, {"Nq", s.Nq}, {"Nk", s.Nk}, {"H", s.H}, {"D", s.D}}) +
                                     (s.causal ? " causal" : "") + (s.null_kv ? " null_kv" : "") + (masked ? " masked" : ""),
                                 3 * f, 4.0 * (3 * nq + 4 * nk), {"q", "k", "v", "null_k", "null_v", "dy"},
                                 {true, true, true, s.null_kv, s.null_kv, false},
                                 {"out", "dq", "dk", "dv", "dnull_k", "dnull_v"}},
                                std::move(in), body);
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
    return make<decltype(body)>({dims({{"N", N}, {"V", Vn}}), 8.0 * N * Vn, 4.0 * 3 * N * Vn, {"logits", "dy"}, {true, false},
                                 {"loss", "dlogits"}},
                                std::move(in), body);
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
    auto add = [&](std::string name, std::string cpu, std::vector<std::string> tests, auto test_case, auto perf_case) {
        OpInfo op;
        op.name = std::move(name);
        op.cpu = std::move(cpu);
        op.tests = std::move(tests);
        op.test_case = test_case;
        op.perf_case = [perf_case](Backend) { return perf_case(); };
        out.push_back(std::move(op));
    };
    const std::string nn_tests = "tests/test_nn_ops.cpp: ";
    add("nn.linear", "lib/nn/linear.h", {nn_tests + "nn: linear gradient with and without bias"},
        [](std::uint64_t s) { return linear_case(5, 7, 3, s); }, [] { return linear_case(2048, 128, 512, 1); });
    add("nn.rmsnorm", "lib/nn/rmsnorm.h", {nn_tests + "nn: rmsnorm matches RP and gradient"},
        [](std::uint64_t s) { return rmsnorm_case(5, 6, s); }, [] { return rmsnorm_case(2048, 128, 1); });
    add("nn.gelu", "lib/nn/gelu.h", {nn_tests + "nn: gelu (erf) gradient"}, [](std::uint64_t s) { return gelu_case(40, s); },
        [] { return gelu_case(2048 * 512, 1); });
    add("nn.rotary", "lib/nn/rotary.h", {nn_tests + "nn: partial rotary gradient and identity at position 0"},
        [](std::uint64_t s) { return rotary_case(2, 5, 2, 6, 4, s); }, [] { return rotary_case(8, 256, 8, 32, 32, 1); });
    add("nn.attention", "lib/nn/attention.h",
        {nn_tests + "nn: attention core gradient - causal / masked / fully masked / null k/v",
         "tests/test_nn_decode.cpp: nn: KV-cached attention step equals the causal attention layer - fed in pieces"},
        [](std::uint64_t s) {
            return s % 2 ? attention_case({2, 5, 5, 2, 3, true, false}, false, s) : attention_case({2, 4, 6, 2, 3, false, true}, true, s);
        },
        [] { return attention_case({8, 256, 256, 8, 32, true, false}, false, 1); });
    add("nn.feed_forward", "lib/nn/feed_forward.h", {nn_tests + "nn: feed-forward gradient"},
        [](std::uint64_t s) { return feed_forward_case(4, 3, s); }, [] { return feed_forward_case(2048, 128, 1); });
    add("nn.cross_entropy", "lib/nn/cross_entropy.h", {nn_tests + "nn: cross-entropy with ignore index gradient"},
        [](std::uint64_t s) { return cross_entropy_case(6, 5, s); }, [] { return cross_entropy_case(2048, 8000, 1); });
    add("nn.cca", "lib/nn/chunked_cross_attention.h",
        {nn_tests + "nn: chunked cross-attention gradient and chunk grid",
         "tests/test_nn_decode.cpp: nn: CCA rows over cached chunk keys/values equal cca_forward at every position"},
        [](std::uint64_t s) { return cca_case(2, s % 2 ? 11 : 9, 3, 2, 4, 5, 2, 6, s); },
        [] { return cca_case(8, 256, 32, 2, 64, 128, 8, 32, 1); });
}

}  // namespace retro::ops
