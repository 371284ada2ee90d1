// BackendRetroModel (model/backend_model.h), the composition the GPU trains with: on HostNnBackend it must give
// RetroModel<float>'s loss and every gradient bit for bit (same ops, same order), with and without retrieval, with
// and without to_decoder_model_dim, for both CCA query layouts, with the copy head and under --train-only freezing;
// its arena is the size backend_model_plan() predicts; and on a CUDA device the same model tracks the CPU (skipped
// visibly without).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "core/cuda_device.h"
#include "model/backend_model.h"
#include "model/layer_shapes.h"
#include "model/param_groups.h"
#include "model/retro.h"
#include "nn/fused_ops.h"
#include "nn/nn_backend_cuda.h"
#include "nn/nn_backend_host.h"
#include "nn/nn_backend_profiler.h"
#include "test_model_fixtures.h"
#include "test_util.h"

using namespace retro;
using namespace retro::test;

namespace {

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Loss and gradients of RetroModel<float> and of BackendRetroModel on `be`, from the same weights.
struct Pair {
    float loss_cpu = 0, loss_backend = 0;
    std::vector<float> grads_cpu, grads_backend, logits_cpu, logits_backend;
};

Pair run_both(const RetroConfig& c, const std::vector<RetroBatch>& batches, nn::NnBackend& be,
              const std::vector<std::uint8_t>& trainable = {}) {
    RetroModel<float> ref(c);
    randomise(ref, 21);
    BackendRetroModel m(c, be);
    m.upload_params(ref.params());
    if (!trainable.empty()) {
        ref.set_trainable(trainable);
        m.set_trainable(trainable);
    }
    ref.zero_grad();
    m.zero_grad();
    Pair p;
    for (const auto& b : batches) {   // accumulate over batches (a shape change re-plans the arena)
        p.loss_cpu = ref.forward(b);
        ref.backward(0.5f);
        p.loss_backend = m.forward(b);
        m.backward(0.5f);
    }
    p.grads_cpu = ref.grads();
    m.download_grads(p.grads_backend);
    p.logits_cpu = ref.logits();
    m.download_logits(p.logits_backend);
    if (!trainable.empty()) {   // frozen tensors' gradients are unspecified: compare the trainable ones
        for (std::size_t t = 0; t < trainable.size(); t++) {
            if (trainable[t]) continue;
            const auto& e = ref.layout().entries()[t];
            std::fill_n(p.grads_cpu.begin() + e.offset, e.numel, 0.0f);
            std::fill_n(p.grads_backend.begin() + e.offset, e.numel, 0.0f);
        }
    }
    return p;
}

// Wider than a CUDA block's 256 threads in every row kernel: widths, vocabulary, CCA keys (k*r+1 = 33 per chunk
// of 8, 5 chunks at n = 40).
RetroConfig wide_config() {
    RetroConfig w = tiny_config();
    w.num_tokens = 500;
    w.max_seq_len = 48;
    w.enc_dim = 260;
    w.dec_dim = 300;
    w.heads = 2;
    w.dim_head = 32;
    w.chunk_size = 8;
    w.validate("wide");
    return w;
}

double rel_rms(const std::vector<float>& a, const std::vector<float>& b) {
    double num = 0, den = 0;
    for (std::size_t i = 0; i < a.size(); i++) {
        num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
        den += double(b[i]) * b[i];
    }
    return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

}  // namespace

TEST_CASE("backend model: on the host backend, loss, logits and gradients equal RetroModel<float> bit for bit") {
    nn::HostNnBackend be;
    auto c = tiny_config();   // enc_dim 8 != dec_dim 12: to_decoder_model_dim present
    SUBCASE("retrieval, two chunks and a partial one, RP query positions") {
        const auto p = run_both(c, {tiny_batch(c, 2, 10, 3)}, be);
        CHECK(p.loss_backend == p.loss_cpu);
        CHECK(same_bits(p.logits_backend, p.logits_cpu));
        CHECK(same_bits(p.grads_backend, p.grads_cpu));
    }
    SUBCASE("aligned CCA query positions, encoder cross-attention everywhere, enc_dim == dec_dim") {
        c.cca_query_positions = "aligned";
        c.enc_cross_attn_all = true;
        c.enc_cross_attn_layers.clear();
        c.enc_dim = 12;
        c.dec_cross_attn_layers = {1, 3};
        const auto p = run_both(c, {tiny_batch(c, 1, 12, 4)}, be);
        CHECK(p.loss_backend == p.loss_cpu);
        CHECK(same_bits(p.grads_backend, p.grads_cpu));
    }
    SUBCASE("tied embeddings (the head's gradient adds to token_emb's)") {
        c.enc_dim = c.dec_dim;
        c.tie_embeddings = true;
        const auto p = run_both(c, {tiny_batch(c, 2, 10, 3)}, be);
        CHECK(p.loss_backend == p.loss_cpu);
        CHECK(same_bits(p.logits_backend, p.logits_cpu));
        CHECK(same_bits(p.grads_backend, p.grads_cpu));
    }
    SUBCASE("no retrieval: a plain decoder") {
        const auto p = run_both(c, {tiny_batch(c, 2, 8, 5, false)}, be);
        CHECK(p.loss_backend == p.loss_cpu);
        CHECK(same_bits(p.grads_backend, p.grads_cpu));
    }
    SUBCASE("two batches of different shapes accumulate (the arena is re-planned)") {
        const auto p = run_both(c, {tiny_batch(c, 2, 10, 3), tiny_batch(c, 1, 8, 6), tiny_batch(c, 2, 10, 7)}, be);
        CHECK(p.loss_backend == p.loss_cpu);
        CHECK(same_bits(p.grads_backend, p.grads_cpu));
    }
    SUBCASE("the wide config (rows wider than a CUDA block), two shapes") {
        const auto w = wide_config();
        const auto p = run_both(w, {tiny_batch(w, 2, 40, 8), tiny_batch(w, 3, 24, 9)}, be);
        CHECK(p.loss_backend == p.loss_cpu);
        CHECK(same_bits(p.grads_backend, p.grads_cpu));
    }
    SUBCASE("the copy head (config copy_head; a 6-token vocabulary: matches in several buckets), two shapes") {
        c.copy_head = true;
        c.num_tokens = 6;
        const auto p = run_both(c, {tiny_batch(c, 2, 10, 3), tiny_batch(c, 1, 12, 4)}, be);
        CHECK(p.loss_backend == p.loss_cpu);
        CHECK(same_bits(p.logits_backend, p.logits_cpu));
        CHECK(same_bits(p.grads_backend, p.grads_cpu));
        const auto without = run_both(c, {tiny_batch(c, 2, 10, 3, false)}, be);   // no neighbours: no candidates
        CHECK(same_bits(without.grads_backend, without.grads_cpu));
    }
    SUBCASE("retro-fit freezing (--train-only cca,encoder): the trainable gradients") {
        const RetroModel<float> shape(c);
        const auto trainable =
            param_trainable(shape.layout(), param_groups_parse("cca,encoder", "test"));
        const auto p = run_both(c, {tiny_batch(c, 2, 10, 3)}, be, trainable);
        CHECK(p.loss_backend == p.loss_cpu);
        CHECK(same_bits(p.grads_backend, p.grads_cpu));
    }
}

TEST_CASE("backend model: in the bf16 GEMM mode on the host, the feed-forward's bf16 activations give the fp32-stored run's bits") {
    // the feed-forward keeps its gelu output, and the pre-norms whose outputs only linear layers read (the feed-forward's
    // and the self-attention's inputs, the encoder's cross-attention queries' and its final norm) keep them, only as the
    // bf16 the GEMMs round them to (NnBackend::set_bf16_activations, on by default): the same floats as keeping fp32
    // and rounding in each GEMM
    auto run = [](const RetroConfig& c, const RetroBatch& b, bool bf16_acts, std::vector<std::string>* ops) {
        nn::HostNnBackend host;
        host.set_bf16_activations(bf16_acts);
        nn::ProfilingNnBackend be(host);
        be.set_gemm_inputs(nn::NnBackend::GemmInputs::bf16);
        RetroModel<float> ref(c);
        randomise(ref, 21);
        BackendRetroModel m(c, be);
        m.upload_params(ref.params());
        m.zero_grad();
        Pair p;
        p.loss_backend = m.forward(b);
        m.backward(0.5f);
        m.download_grads(p.grads_backend);
        m.download_logits(p.logits_backend);
        for (const auto& t : be.timings()) ops->push_back(t.op);
        return p;
    };
    const auto w = wide_config();   // retrieval: the decoder's, the encoder's and CCA's feed-forwards
    const auto batch = tiny_batch(w, 2, 40, 8);
    std::vector<std::string> ops_on, ops_off;
    const Pair on = run(w, batch, true, &ops_on), off = run(w, batch, false, &ops_off);
    CHECK(on.loss_backend == off.loss_backend);
    CHECK(same_bits(on.logits_backend, off.logits_backend));
    CHECK(same_bits(on.grads_backend, off.grads_backend));
    auto has = [](const std::vector<std::string>& v, const char* op) { return std::find(v.begin(), v.end(), op) != v.end(); };
    for (const char* op : {"residual_rmsnorm_forward_bf16", "rmsnorm_forward_bf16", "linear_gelu_forward_bf16x",
                           "linear_forward_bf16x", "linear_backward_bf16x", "gelu_linear_backward_bf16x",
                           "linear_forward_shared_bf16x", "linear_backward_shared_bf16x"})
        CHECK_MESSAGE(has(ops_on, op), op);
    for (const char* op : {"linear_gelu_forward", "gelu_linear_backward", "rmsnorm_forward"})
        CHECK_MESSAGE(!has(ops_on, op), op);
    CHECK(has(ops_off, "linear_gelu_forward"));
    CHECK_FALSE(has(ops_off, "linear_forward_bf16x"));
    // and the mode is the bf16 one: the fp32 run differs
    nn::HostNnBackend fp32;
    BackendRetroModel m32(w, fp32);
    RetroModel<float> ref(w);
    randomise(ref, 21);
    m32.upload_params(ref.params());
    CHECK(m32.forward(batch) != on.loss_backend);
}

TEST_CASE("backend model: a backward in another mode than its forward's is refused, not run on the forward's arena") {
    const auto w = wide_config();
    const auto batch = tiny_batch(w, 2, 40, 8);
    RetroModel<float> ref(w);
    randomise(ref, 21);
    nn::HostNnBackend host;
    host.set_gemm_inputs(nn::NnBackend::GemmInputs::bf16);
    BackendRetroModel m(w, host);
    m.upload_params(ref.params());
    m.zero_grad();
    m.forward(batch);
    host.set_bf16_activations(false);   // the forward's activations are half-size bf16 buffers
    CHECK_THROWS_AS(m.backward(1.0f), InternalError);
    host.set_bf16_activations(true);
    CHECK_NOTHROW(m.backward(1.0f));
}

TEST_CASE("backend model: the arena gives the feed-forwards' g and input half their floats where they keep them as bf16, the attention's output only its bf16 copy, and a change of the mode re-plans") {
    const auto w = wide_config();   // retrieval: the decoder's and the encoder's feed-forwards
    const auto batch = tiny_batch(w, 2, 40, 8);
    const BackendBatchShape shape{2, 40, w.num_neighbours, w.retrieved_len(), true};
    nn::HostNnBackend host;
    host.set_gemm_inputs(nn::NnBackend::GemmInputs::bf16);
    // the plan's bytes: each feed-forward's g and input at (elements + 1) / 2 floats instead of elements (Carver rounds
    // every buffer up to 256 bytes)
    auto rounded = [](std::int64_t floats) { return (static_cast<std::size_t>(floats) * 4 + 255) / 256 * 256; };
    const std::int64_t N = 2 * 40, R = 2 * (40 / w.chunk_size) * w.num_neighbours * w.retrieved_len();
    std::size_t saved = 0;
    auto halved = [&](std::int64_t floats) { return rounded(floats) - rounded((floats + 1) / 2); };
    // per decoder layer g and the attention's and feed-forward's inputs; per encoder layer g, the self-attention's and
    // the feed-forward's inputs and the cross-attention's queries' input where it has one; the encoder's final norm
    for (std::int64_t i = 0; i < w.dec_depth; i++) saved += halved(N * 4 * w.dec_dim) + 2 * halved(N * w.dec_dim);
    for (std::int64_t i = 0; i < w.enc_depth; i++)
        saved += halved(R * 4 * w.enc_dim) + (w.enc_has_cross(i + 1) ? 3 : 2) * halved(R * w.enc_dim);
    saved += halved(R * w.enc_dim);
    // each attention layer's output: its fp32 buffer gone, its bf16 copy after the probabilities (the host backend's
    // emulation of the fused attention's stash, NnBackend::attention_output_bf16_offset)
    auto output_saved = [&](const nn::AttentionLayerShape& s) {
        const nn::AttentionShape a = s.core();
        const std::int64_t n = s.B * s.Nq * s.inner(), P = a.B * a.H * a.Nq * a.keys();
        return rounded(n) + rounded(P) - rounded(nn::NnBackend::bf16_copy_at(P) + (n + 1) / 2);
    };
    const std::int64_t k = w.num_neighbours, r = w.retrieved_len(), M = 2 * (40 / w.chunk_size) * k;
    for (std::int64_t i = 0; i < w.dec_depth; i++) {
        saved += output_saved(decoder_self_shape(w, 2, 40));
        if (w.dec_has_cross(i + 1)) saved += output_saved(nn::cca_attention_shape(decoder_cca_shape(w, 2, 40, k, r)));
    }
    for (std::int64_t i = 0; i < w.enc_depth; i++) {
        saved += output_saved(encoder_self_shape(w, M, r));
        if (w.enc_has_cross(i + 1)) saved += output_saved(encoder_cross_shape(w, M, r));
    }
    host.set_bf16_activations(false);
    const std::size_t fp32_g = backend_model_plan(w, shape, &host);
    host.set_bf16_activations(true);
    const std::size_t bf16_g = backend_model_plan(w, shape, &host);
    CHECK(fp32_g - bf16_g == saved);
    host.set_gemm_inputs(nn::NnBackend::GemmInputs::fp32);   // fp32 GEMMs: no bf16 copy to keep, g in fp32
    CHECK(backend_model_plan(w, shape, &host) == fp32_g);

    // one model through both modes, in either order: each step the bits of a model made in that mode (the plan is
    // remade when the mode changes: a half-size g written in fp32 would run into the buffers after it)
    auto step = [&](BackendRetroModel& m, const RetroModel<float>& ref) {
        m.upload_params(ref.params());
        m.zero_grad();
        Pair p;
        p.loss_backend = m.forward(batch);
        m.backward(0.5f);
        m.download_grads(p.grads_backend);
        return p;
    };
    RetroModel<float> ref(w);
    randomise(ref, 21);
    for (const bool first : {true, false}) {
        CAPTURE(first);
        nn::HostNnBackend a, fresh;
        for (auto* be : {&a, &fresh}) be->set_gemm_inputs(nn::NnBackend::GemmInputs::bf16);
        BackendRetroModel m(w, a);
        a.set_bf16_activations(first);
        step(m, ref);
        a.set_bf16_activations(!first);
        const Pair switched = step(m, ref);
        fresh.set_bf16_activations(!first);
        BackendRetroModel made(w, fresh);
        const Pair direct = step(made, ref);
        CHECK(m.arena_bytes() == made.arena_bytes());
        CHECK(switched.loss_backend == direct.loss_backend);
        CHECK(same_bits(switched.grads_backend, direct.grads_backend));
    }
}

TEST_CASE("backend model: the arena is planned before the first step and grows with the batch") {
    nn::HostNnBackend be;
    const auto c = tiny_config();
    BackendRetroModel m(c, be);
    const BackendBatchShape shape{2, 10, c.num_neighbours, c.retrieved_len(), true};
    const std::size_t planned = backend_model_plan(c, shape);
    m.forward(tiny_batch(c, 2, 10, 3));
    CHECK(m.arena_bytes() == planned);
    auto bigger = shape;
    bigger.B = 4;
    CHECK(backend_model_plan(c, bigger) > planned);
    auto plain = shape;
    plain.retrieval = false;
    CHECK(backend_model_plan(c, plain) < planned);   // no encoder, CCA or neighbour buffers
    // RP's default config at 16 x 2048 tokens: the logits alone take 3.8 GB; counted without allocating anything
    RetroConfig def;
    def.validate("default");
    const std::size_t big = backend_model_plan(def, {16, 2048, 2, 2 * def.chunk_size, true});
    CHECK(big > std::size_t(16) * 2048 * def.num_tokens * 4 * 2);   // logits and their gradient
}

namespace {
// A host backend whose attention asks for more saved floats than it writes once the fused mode is on: a larger
// buffer is harmless to the host's attention, so the model's bits must not change, while the arena must be re-planned
// to the backend's answer when the mode changes (the CUDA backend's fused stash is smaller than the probabilities).
class ModalSavesBackend : public nn::HostNnBackend {
public:
    std::int64_t attention_saved_floats(const nn::AttentionShape& s, bool key_mask) const override {
        const std::int64_t full = nn::HostNnBackend::attention_saved_floats(s, key_mask);
        return fused_attention() ? full + 1000 : full;
    }
};
// One that asks for fewer (as the CUDA backend's fused attention): for the plan's arithmetic only, never run.
class StashSavesBackend : public nn::HostNnBackend {
public:
    std::int64_t attention_saved_floats(const nn::AttentionShape& s, bool key_mask) const override {
        return s.causal ? s.B * s.H * s.Nq : nn::HostNnBackend::attention_saved_floats(s, key_mask);
    }
};
}  // namespace

TEST_CASE("backend model: the attention's saved floats follow the backend and its mode - a mode change re-plans") {
    const auto c = tiny_config();
    const BackendBatchShape shape{2, 10, c.num_neighbours, c.retrieved_len(), true};
    nn::HostNnBackend host;
    CHECK(backend_model_plan(c, shape, &host) == backend_model_plan(c, shape));   // the host keeps probabilities
    // the decoder's (causal) self-attention at B * H * Nq floats a layer instead of B * H * Nq * Nq
    StashSavesBackend stash;
    const std::size_t full = backend_model_plan(c, shape), small = backend_model_plan(c, shape, &stash);
    const std::int64_t per_layer = shape.B * c.heads * shape.n * (shape.n - 1);   // floats saved a layer
    CHECK(full - small >= static_cast<std::size_t>(c.dec_depth * (per_layer * 4 - 256)));
    CHECK(full - small <= static_cast<std::size_t>(c.dec_depth * (per_layer * 4 + 256)));
    // the scratch bound: the fused layers' Delta in place of their ds; the same without a backend or on the host
    CHECK(backend_model_scratch_bound(c, shape, true, &host) == backend_model_scratch_bound(c, shape, true));
    CHECK(backend_model_scratch_bound(c, shape, true, &stash) <= backend_model_scratch_bound(c, shape, true));
    auto plain_shape = shape;   // decoder only: the self-attention's ds is the largest term, and it goes
    plain_shape.retrieval = false;
    CHECK(backend_model_scratch_bound(c, plain_shape, true, &stash) <
          backend_model_scratch_bound(c, plain_shape, true));
    // a model on a backend whose answer changes with the mode: planned anew at the change, the same bits
    ModalSavesBackend be;
    RetroModel<float> ref(c);
    randomise(ref, 21);
    BackendRetroModel m(c, be);
    m.upload_params(ref.params());
    const auto batch = tiny_batch(c, 2, 10, 3);
    const float l0 = m.forward(batch);
    CHECK(m.arena_bytes() == backend_model_plan(c, shape));
    be.set_fused_attention(true);
    const float l1 = m.forward(batch);
    CHECK(m.arena_bytes() == backend_model_plan(c, shape, &be));
    CHECK(m.arena_bytes() > backend_model_plan(c, shape));
    CHECK(std::memcmp(&l0, &l1, sizeof l0) == 0);
    m.backward(1.0f);   // the plan made in the fused mode serves its backward
}

namespace {
// As the CUDA backend in its bf16 mode: cross_entropy_linear_backward with dW and db keeps the logits' gradient in
// scratch of its own (there: only the GEMMs' bf16 copy), so the model's arena holds none and passes null; with the
// head frozen (no dW) it is the two ops on the model's dlogits. Counts the calls that got null.
class OwnLogitsGradBackend : public nn::HostNnBackend {
public:
    bool cross_entropy_linear_backward_uses_dlogits(bool with_dW, bool with_db) const override {
        return !(with_dW && with_db);
    }
    void cross_entropy_linear_backward(float* dx, float* dW, float* db, float* dlogits, float dloss,
                                       const float* logits, const float* lse, const std::int32_t* targets,
                                       std::int32_t ignore_index, std::int64_t valid, const float* x, const float* W,
                                       std::int64_t N, std::int64_t I, std::int64_t V) override {
        if (!cross_entropy_linear_backward_uses_dlogits(dW != nullptr, db != nullptr)) {
            CHECK(dlogits == nullptr);
            null_calls++;
            own.assign(static_cast<std::size_t>(N * V), 0.0f);
            dlogits = own.data();
        }
        REQUIRE(dlogits != nullptr);
        nn::HostNnBackend::cross_entropy_linear_backward(dx, dW, db, dlogits, dloss, logits, lse, targets,
                                                         ignore_index, valid, x, W, N, I, V);
    }
    int null_calls = 0;
    std::vector<float> own;
};
std::size_t carved(std::int64_t floats) { return static_cast<std::size_t>((floats * 4 + 255) / 256 * 256); }
}  // namespace

TEST_CASE("backend model: the arena holds the logits' gradient only where the backward uses it") {
    auto c = tiny_config();
    const BackendBatchShape shape{2, 10, c.num_neighbours, c.retrieved_len(), true};
    const std::size_t dlogits = carved(shape.B * shape.n * c.num_tokens);
    OwnLogitsGradBackend own;
    nn::HostNnBackend host;
    CHECK(backend_model_plan(c, shape, &host) == backend_model_plan(c, shape));
    CHECK(backend_model_plan(c, shape) - backend_model_plan(c, shape, &own) == dlogits);
    CHECK(backend_model_plan(c, shape, &own, false) == backend_model_plan(c, shape));   // head frozen: the two ops
    auto plain = shape;
    plain.retrieval = false;
    CHECK(backend_model_plan(c, plain) - backend_model_plan(c, plain, &own) == dlogits);
    SUBCASE("the same bits as RetroModel<float>, the backend given null") {
        const auto p = run_both(c, {tiny_batch(c, 2, 10, 3), tiny_batch(c, 1, 8, 6)}, own);
        CHECK(own.null_calls == 2);
        CHECK(p.loss_backend == p.loss_cpu);
        CHECK(same_bits(p.logits_backend, p.logits_cpu));
        CHECK(same_bits(p.grads_backend, p.grads_cpu));
    }
    SUBCASE("the copy head reads dlogits: held, and the bits unchanged") {
        c.copy_head = true;
        c.num_tokens = 6;
        CHECK(backend_model_plan(c, shape, &own) == backend_model_plan(c, shape));
        CHECK(backend_model_plan(c, plain) - backend_model_plan(c, plain, &own) == carved(20 * 6));   // no candidates
        const auto p = run_both(c, {tiny_batch(c, 2, 10, 3)}, own);
        CHECK(own.null_calls == 0);
        CHECK(same_bits(p.grads_backend, p.grads_cpu));
    }
    SUBCASE("freezing the head re-plans with dlogits; thawing it re-plans without") {
        RetroModel<float> ref(c);
        randomise(ref, 21);
        BackendRetroModel m(c, own);
        m.upload_params(ref.params());
        const auto batch = tiny_batch(c, 2, 10, 3);
        m.forward(batch);
        CHECK(m.arena_bytes() == backend_model_plan(c, shape, &own));
        m.backward(1.0f);
        const auto frozen = param_trainable(ref.layout(), param_groups_parse("cca,encoder", "test"));
        m.set_trainable(frozen);
        m.forward(batch);
        CHECK(m.arena_bytes() == backend_model_plan(c, shape));
        m.backward(1.0f);
        CHECK(own.null_calls == 1);
        m.set_trainable(std::vector<std::uint8_t>(frozen.size(), 1));
        m.forward(batch);
        CHECK(m.arena_bytes() == backend_model_plan(c, shape, &own));
        m.backward(1.0f);
        CHECK(own.null_calls == 2);
    }
}

TEST_CASE("backend model: on a CUDA device in the fused bf16 mode, an attention saves only the fused backward's stash") {
    if (cuda_device_count() == 0) RETRO_SKIP("no CUDA device");
    if constexpr (kCudaBuilt) {
        CudaStreamOwner stream;
        auto be = nn::cuda_nn_backend(stream.get());
        const nn::AttentionShape self{2, 256, 256, 4, 64, true, false}, cca{8, 64, 128, 4, 64, false, true};
        const unsigned unfused = nn::unfused_ops_requested(std::getenv("RETRO_UNFUSE"));
        CHECK(be->attention_saved_floats(self, false) == 2 * 4 * 256 * 256);   // fp32: the probabilities
        CHECK(be->cross_entropy_linear_backward_uses_dlogits(true, true));   // fp32: the two ops
        be->set_gemm_inputs(nn::NnBackend::GemmInputs::bf16);
        CHECK(be->attention_saved_floats(self, false) == 2 * 4 * 256 * 256);   // bf16, fused attention off
        // the bf16 logits' backward keeps dlogits only as its GEMMs' bf16 copy, with dW and db
        const bool ce_set_aside = unfused & (1u << static_cast<unsigned>(nn::FusedOp::cross_entropy_linear_backward));
        CHECK(be->cross_entropy_linear_backward_uses_dlogits(true, true) == ce_set_aside);
        CHECK(be->cross_entropy_linear_backward_uses_dlogits(false, true));
        be->set_fused_attention(true);
        const RetroConfig w = wide_config();
        const BackendBatchShape shape{2, 40, w.num_neighbours, w.retrieved_len(), true};
        if (unfused & (1u << static_cast<unsigned>(nn::FusedOp::attention_saved_floats))) {
            // set aside: the probabilities, and the output in fp32 (the bf16 activations elsewhere stay as they are,
            // so the plan is not the backend-free one)
            CHECK(be->attention_saved_floats(self, false) == 2 * 4 * 256 * 256);
            CHECK(be->attention_saved_floats(cca, true) == 8 * 4 * 64 * 129);
            CHECK(be->attention_output_bf16_offset(self, false) == -1);
            return;
        }
        // lse [B, H, Nq] and out's bf16 copy [B, Nq, H*D] two to a float (kernels/nn_flash_attention_cuda.cu), the copy
        // 256-byte aligned; the layers keep the output only as that copy where bf16 activations are on
        CHECK(be->attention_saved_floats(self, false) == 2 * 4 * 256 + (2 * 256 * 4 * 64) / 2);
        // with the null column or a key mask also the copy's remainder for Delta (CudaNnBackend::out_lo_at), 256-byte
        // aligned after the copy; with few keys (64 at D = 64) the stash is then larger than the probabilities, and
        // without the mask the same shape keeps lse and the copy alone
        CHECK(be->attention_saved_floats(cca, true) == 8 * 4 * 64 + 2 * ((8 * 64 * 4 * 64) / 2));
        const nn::AttentionShape few{1, 64, 64, 1, 64, false, false};
        CHECK(be->attention_saved_floats(few, true) == 64 + 2 * ((64 * 64) / 2));
        CHECK(be->attention_saved_floats(few, true) > 64 * 64);
        CHECK(be->attention_saved_floats(few, false) == 64 + (64 * 64) / 2);
        // a stash that would not fit the probabilities (lse's 3 floats padded to 64, then 96 for the copy, against 99):
        // the unfused ops
        const nn::AttentionShape tiny{1, 3, 33, 1, 64, false, false};
        CHECK(be->attention_saved_floats(tiny, false) == 3 * 33);
        const nn::AttentionShape odd{1, 3, 3 * 64, 1, 64, false, false};   // lse 3 floats: the copy at 64
        CHECK(be->attention_saved_floats(odd, false) == 64 + (3 * 64) / 2);
        const std::int64_t copy_at = be->bf16_activations() ? 2 * 4 * 256 : -1;
        CHECK(be->attention_output_bf16_offset(self, false) == copy_at);
        CHECK(be->attention_output_bf16_offset(odd, false) == (be->bf16_activations() ? 64 : -1));
        // and the model's arena on it: smaller than the plan that keeps the probabilities
        CHECK(backend_model_plan(w, shape, be.get()) < backend_model_plan(w, shape));
    }
}

TEST_CASE("backend model: on a CUDA device a training step's own scratch stays within backend_model_scratch_bound") {
    // retro-train refuses a config whose plan, weights, optimizer and this bound exceed the GPU's free memory: the
    // bound, less its allowance for the libraries' workspaces, must hold for the scratch the backend really grows
    // (scratch_device_bytes), in every mode, with a fresh backend per case (the scratch only grows)
    if (cuda_device_count() == 0) RETRO_SKIP("no CUDA device");
    if constexpr (kCudaBuilt) {
        auto small_vocab = wide_config();   // the packed q|k|v gradients then outgrow the logits' gradient
        small_vocab.num_tokens = 6;
        auto copy = tiny_config();
        copy.copy_head = true;
        copy.num_tokens = 6;
        for (const RetroConfig& c : {tiny_config(), wide_config(), small_vocab, copy})
            for (const int mode : {0, 1, 2}) {   // fp32; bf16 GEMMs; bf16 GEMMs and the fused attention
                CAPTURE(c.num_tokens);
                CAPTURE(c.dec_dim);
                CAPTURE(mode);
                CudaStreamOwner stream;
                auto be = nn::cuda_nn_backend(stream.get());
                if (mode > 0) be->set_gemm_inputs(nn::NnBackend::GemmInputs::bf16);
                be->set_fused_attention(mode == 2);
                const std::int64_t n = std::min<std::int64_t>(5, c.max_seq_len / c.chunk_size) * c.chunk_size;
                const auto batch = tiny_batch(c, 2, n, 4);
                run_both(c, {batch}, *be);
                const BackendBatchShape shape{2, n, c.num_neighbours, c.retrieved_len(), true};
                const std::size_t bound = backend_model_scratch_bound(c, shape, mode > 0, be.get());
                MESSAGE("scratch " << be->scratch_device_bytes() << " bytes of a bound of " << bound << " less "
                                   << kLibraryWorkspaceAllowance);
                CHECK(be->scratch_device_bytes() <= bound - kLibraryWorkspaceAllowance);
            }
    }
}

TEST_CASE("backend model: on a CUDA device the model tracks the CPU (fp32)") {
    if (cuda_device_count() == 0) RETRO_SKIP("no CUDA device");
    if constexpr (kCudaBuilt) {
        CudaStreamOwner stream;
        auto be = nn::cuda_nn_backend(stream.get());
        auto c = tiny_config();
        for (bool retrieval : {true, false}) {
            const auto p = run_both(c, {tiny_batch(c, 2, 10, 3, retrieval)}, *be);
            CHECK(std::abs(p.loss_backend - p.loss_cpu) <= 1e-5f * std::abs(p.loss_cpu));
            CHECK(rel_rms(p.logits_backend, p.logits_cpu) <= 1e-5);
            CHECK(rel_rms(p.grads_backend, p.grads_cpu) <= 1e-5);
        }
        auto tied = c;   // tie_embeddings: the head's weight gradient and both embedding backwards add into one table
        tied.enc_dim = tied.dec_dim;
        tied.tie_embeddings = true;
        auto copy = c;   // the copy head's gates and their gradients (kernels/nn_copy_head_cuda.cu)
        copy.copy_head = true;
        copy.num_tokens = 6;
        const auto pc = run_both(copy, {tiny_batch(copy, 2, 10, 3)}, *be);
        CHECK(std::abs(pc.loss_backend - pc.loss_cpu) <= 1e-5f * std::abs(pc.loss_cpu));
        CHECK(rel_rms(pc.logits_backend, pc.logits_cpu) <= 1e-5);
        CHECK(rel_rms(pc.grads_backend, pc.grads_cpu) <= 1e-5);
        const auto pt = run_both(tied, {tiny_batch(tied, 2, 10, 3)}, *be);
        CHECK(std::abs(pt.loss_backend - pt.loss_cpu) <= 1e-5f * std::abs(pt.loss_cpu));
        CHECK(rel_rms(pt.grads_backend, pt.grads_cpu) <= 1e-5);
        // wider than a block of 256 threads everywhere (widths, vocabulary, keys), two shapes (the arena re-planned)
        const RetroConfig w = wide_config();
        const auto p = run_both(w, {tiny_batch(w, 2, 40, 8), tiny_batch(w, 3, 24, 9)}, *be);
        CHECK(std::abs(p.loss_backend - p.loss_cpu) <= 1e-5f * std::abs(p.loss_cpu));
        CHECK(rel_rms(p.logits_backend, p.logits_cpu) <= 1e-5);
        CHECK(rel_rms(p.grads_backend, p.grads_cpu) <= 1e-5);
    }
}
