#include "model/backend_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "core/error.h"
#include "model/backend_layers.h"
#include "model/layer_shapes.h"
#include "model/param_groups.h"
#include "nn/copy_head.h"
#include "nn/rotary.h"

namespace retro {

using std::int64_t;
using namespace backend;

std::size_t backend_model_scratch_bound(const RetroConfig& c, const BackendBatchShape& shape, bool bf16_gemm,
                                        const nn::NnBackend* be) {
    const int64_t B = shape.B, n = shape.n, cs = c.chunk_size, l = n / cs;
    const bool retrieval = shape.retrieval && c.first_cca_layer() > 0 && l > 0;
    const int64_t M = retrieval ? B * l * shape.k : 0, r = shape.r, R = M * r, N = B * n;
    // attention backward's scratch, the largest of the layers': the unfused ops' ds (the probabilities' size), or
    // where `be` runs the layer fused (it saves less than the probabilities) Delta and the per-item null-column
    // gradients (kernels/nn_flash_attention_cuda.cu's flash_backward)
    std::vector<std::pair<nn::AttentionLayerShape, bool>> layers = {{decoder_self_shape(c, B, n), false}};
    if (retrieval) {
        layers.push_back({nn::cca_attention_shape(decoder_cca_shape(c, B, n, shape.k, r)), true});
        layers.push_back({encoder_self_shape(c, M, r), true});
        layers.push_back({encoder_cross_shape(c, M, r), false});
    }
    int64_t ds = 0, dout16 = 0;   // dout16: the fused backward's bf16 copy of dO (its fourth copy slot)
    for (const auto& [layer, masked] : layers) {
        const nn::AttentionShape a = layer.core();
        const int64_t full = a.B * a.H * a.Nq * a.keys();
        // (the unfused ops save exactly the probabilities; a fused stash differs in size - smaller, or with few keys
        // and the remainder larger - and where it happens to be as large, the larger of the two scratches)
        const int64_t fused_ds = a.B * a.H * a.Nq + (a.null_kv ? 2 * a.B * a.H * a.D : 0);
        const bool fused = be && be->attention_saved_floats(a, masked) != full;
        ds = std::max(ds, fused ? fused_ds : std::max(full, fused_ds));
        dout16 = std::max(dout16, a.B * a.Nq * a.H * a.D);
    }
    // The CUDA backend's Scratch members (kernels/nn_backend_common.cuh), each grown to the most one op of the step
    // asks of it; checked against scratch_device_bytes on a GPU (tests/test_backend_model.cpp)
    auto floats = [](int64_t n) { return static_cast<std::size_t>(n) * 4; };
    std::size_t bytes = floats(ds);   // ds_
    bytes += floats(N);               // rows_: cross-entropy's row losses
    // colpart_: the column sums' per-chunk partials (db, dgamma, the null key and value, the copy head's dweight: one
    // column per bucket and channel), at most 256 chunks of rows (kernels/nn_rows.cuh's column_chunk_rows), and the
    // rmsnorm backward's dgamma partials, at most 1024 blocks (dgamma_block_rows)
    const int64_t HD = c.inner_dim(), width = std::max(c.dec_dim, c.enc_dim);
    const int64_t columns = std::max({c.num_tokens, 4 * width, HD, c.copy_head ? nn::kCopyBuckets * c.dec_dim : 0});
    bytes += floats(std::max(256 * columns, 1024 * width));
    // emb_: embedding_backward's three int32 arrays of the ids (the decoder's or the neighbours') and CUB's radix
    // sort storage (an allowance: as much again, and 1 MiB); partials_: sum_squares' 256 doubles
    const int64_t ids = std::max(N, R);
    bytes += 6 * (floats(ids) + 256) + (std::size_t{1} << 20) + 256 * 8;
    bytes += kLibraryWorkspaceAllowance;
    if (bf16_gemm) {
        // bf_[0..3], the bf16 copies, each grown to the largest it holds:
        //   slot 0  a linear layer's W (forward: q|k|v packed), its dy (backward: the logits' gradient, the packed
        //           q|k|v or k|v gradients, which lie in the arena one q_max or k_max apart) or the fused attention's q
        //   slot 1  x (forward), W (backward: packed) or the fused attention's k
        //   slot 2  x (backward) or the fused attention's v
        //   slot 3  the fused attention's dO
        // acts: every activation a linear layer reads or writes, and the attention's q, k, v (the CCA and encoder
        // rows: at most R, their context's M cs <= R)
        const int64_t acts = std::max(N * std::max({c.dec_dim, c.enc_dim, HD, 4 * c.dec_dim}),
                                      R * std::max({c.enc_dim, c.dec_dim, HD, 4 * c.enc_dim}));
        int64_t weights = 3 * HD * width;   // q|k|v packed
        const ParamLayout layout(c);
        for (const auto& e : layout.entries()) weights = std::max(weights, e.numel);
        const int64_t packed_dy = 3 * (std::max(N, R) * HD + 64);   // three arena buffers and their rounding
        const int64_t slot0 = std::max({weights, N * c.num_tokens, packed_dy, acts});
        const int64_t slot1 = std::max(acts, weights);
        bytes += (static_cast<std::size_t>(slot0) + static_cast<std::size_t>(slot1) + static_cast<std::size_t>(acts) +
                  static_cast<std::size_t>(dout16)) * 2;
    }
    return bytes;
}

struct BackendRetroModel::Plan {
    struct DecLayer {
        float *x0 = nullptr, *n0 = nullptr, *r0 = nullptr, *x1 = nullptr, *n1 = nullptr, *r1 = nullptr, *x2 = nullptr,
              *n2 = nullptr, *r2 = nullptr, *cca_xs = nullptr, *cca_ys = nullptr;
        AttnSaved attn, cca;
        FfSaved ff;
    };
    struct Rotary {   // a table in the arena and its host copy (uploaded once per plan)
        nn::RotaryView view;
        nn::RotaryTable<float> host;
    };

    BackendBatchShape s;
    int64_t N = 0, l = 0, M = 0, R = 0;
    nn::AttentionLayerShape self, cca_attn;
    nn::CcaShape cca;
    std::int32_t *inputs = nullptr, *labels = nullptr, *retrieved = nullptr;
    std::uint8_t* mask = nullptr;
    nn::CopyCandidate* copy_cand = nullptr;   // config copy_head with retrieval: [N, k], found on the host
    float *embed = nullptr, *x_final = nullptr, *xn_final = nullptr, *rms_final = nullptr, *logits = nullptr,
          *lse = nullptr, *tmp = nullptr;
    std::vector<DecLayer> dec;
    float *ctx = nullptr, *E = nullptr;
    EncoderActs enc;
    Rotary rot_dec, rot_cca_q, rot_cca_k, rot_enc, rot_ctx;
    std::int64_t *cca_shift = nullptr, *cca_unshift = nullptr, *ctx_index = nullptr;
    std::vector<std::int64_t*> ctx_back;   // per neighbour j: decoder row -> its dctx row, or -1
    // backward scratch, shared by the layers
    float *dlogits = nullptr, *dxn = nullptr, *dx = nullptr, *dn = nullptr, *dE = nullptr,
          *dE_part = nullptr, *dO = nullptr, *dq = nullptr, *dk = nullptr, *dv = nullptr, *tmp_k = nullptr,
          *tmp_v = nullptr, *dgel = nullptr, *dys = nullptr, *dxs = nullptr, *dEn = nullptr, *dh = nullptr,
          *dn_e = nullptr, *dctx = nullptr, *dctx_part = nullptr, *dembed = nullptr;

    // Assigns every buffer from `c` (sizes only when c.base is null); the attention layers' probabilities sized for
    // `be` (null: the full probabilities), and dlogits only where the backward uses it (plan_holds_dlogits).
    void carve(Carver& c, const RetroConfig& cfg, const BackendBatchShape& shape, const nn::NnBackend* be,
               bool head_trainable);
};

// Whether the backward's logits layer reads or writes the dlogits buffer: the copy head's backward reads it, and a
// backend whose cross_entropy_linear_backward is the two ops writes it there (the GPU's bf16 form keeps it only as
// the GEMMs' bf16 copy in its own scratch: at the 172M config N·V floats, 4.2 GB at 32 x 1024 tokens, not held).
// The head's bias gradient is always asked for; its weight gradient only while the head trains.
static bool plan_holds_dlogits(const RetroConfig& cfg, bool retrieval, const nn::NnBackend* be, bool head_trainable) {
    return (retrieval && cfg.copy_head) || !be || be->cross_entropy_linear_backward_uses_dlogits(head_trainable, true);
}

void BackendRetroModel::Plan::carve(Carver& c, const RetroConfig& cfg, const BackendBatchShape& shape,
                                    const nn::NnBackend* be, bool head_trainable) {
    s = shape;
    const int64_t B = s.B, n = s.n, Ce = cfg.enc_dim, Cd = cfg.dec_dim, V = cfg.num_tokens, cs = cfg.chunk_size,
                  HD = cfg.inner_dim(), Rd = cfg.rot_dim();
    N = B * n;
    l = n / cs;
    const bool retrieval = s.retrieval && cfg.first_cca_layer() > 0 && l > 0;
    s.retrieval = retrieval;
    M = retrieval ? B * l * s.k : 0;
    R = M * s.r;
    self = decoder_self_shape(cfg, B, n);
    inputs = c.take<std::int32_t>(N);
    labels = c.take<std::int32_t>(N);
    embed = c.take<float>(N * Ce);
    tmp = c.take<float>(N * Cd);
    rot_dec.view = {c.take<float>(n * Rd), c.take<float>(n * Rd), n, Rd};
    dec.assign(static_cast<std::size_t>(cfg.dec_depth), {});
    for (int64_t i = 0; i < cfg.dec_depth; i++) {
        auto& L = dec[static_cast<std::size_t>(i)];
        const bool cca_here = retrieval && cfg.dec_has_cross(i + 1);
        L.x0 = (i == 0 && Ce == Cd) ? embed : c.take<float>(N * Cd);
        L.n0 = c.take<float>(activation_floats(N * Cd, be));
        L.r0 = c.take<float>(N);
        L.attn = carve_attention(c, self, be, false);
        L.x1 = c.take<float>(N * Cd);
        if (cca_here) {
            L.n1 = c.take<float>(N * Cd);
            L.r1 = c.take<float>(N);
            L.x2 = c.take<float>(N * Cd);
        } else {
            L.x2 = L.x1;
        }
        L.n2 = c.take<float>(activation_floats(N * Cd, be));
        L.r2 = c.take<float>(N);
        L.ff = carve_feed_forward(c, N * ff_inner(Cd), be);
    }
    x_final = c.take<float>(N * Cd);
    xn_final = c.take<float>(N * Cd);
    rms_final = c.take<float>(N);
    logits = c.take<float>(N * V);
    lse = c.take<float>(N);
    dlogits = plan_holds_dlogits(cfg, retrieval, be, head_trainable) ? c.take<float>(N * V) : nullptr;
    dxn = c.take<float>(N * Cd);
    dx = c.take<float>(N * Cd);
    dn = c.take<float>(N * Cd);
    if (Ce != Cd) dembed = c.take<float>(N * Ce);
    // attention backward scratch: the largest query / key sides over every attention layer that runs
    int64_t q_max = N * HD, k_max = N * HD, kv_max = N * Cd, ff_max = N * 4 * Cd;
    if (retrieval) {
        cca = decoder_cca_shape(cfg, B, n, s.k, s.r);
        cca_attn = nn::cca_attention_shape(cca);
        retrieved = c.take<std::int32_t>(R);
        mask = c.take<std::uint8_t>(R);
        if (cfg.copy_head) copy_cand = c.take<nn::CopyCandidate>(N * s.k);
        const int64_t rows = B * l * cs;
        for (int64_t i = 0; i < cfg.dec_depth; i++)   // (pointers are null when only counting: test the config)
            if (cfg.dec_has_cross(i + 1)) {
                auto& L = dec[static_cast<std::size_t>(i)];
                L.cca_xs = c.take<float>(rows * Cd);
                L.cca_ys = c.take<float>(rows * Cd);
                L.cca = carve_attention(c, cca_attn, be, true);   // (pad mask)
            }
        ctx = c.take<float>(M * cs * Cd);
        E = c.take<float>(R * Cd);
        enc = carve_encoder(c, cfg, M, s.r, be);
        rot_cca_q.view = {c.take<float>(cs * Rd), c.take<float>(cs * Rd), cs, Rd};
        rot_cca_k.view = {c.take<float>(s.k * s.r * Rd), c.take<float>(s.k * s.r * Rd), s.k * s.r, Rd};
        rot_enc.view = {c.take<float>(s.r * Rd), c.take<float>(s.r * Rd), s.r, Rd};
        rot_ctx.view = {c.take<float>(cs * Rd), c.take<float>(cs * Rd), cs, Rd};
        cca_shift = c.take<std::int64_t>(rows);
        cca_unshift = c.take<std::int64_t>(N);
        ctx_index = c.take<std::int64_t>(M * cs);
        ctx_back.assign(static_cast<std::size_t>(s.k), nullptr);
        for (auto& p : ctx_back) p = c.take<std::int64_t>(N);
        dE = c.take<float>(R * Cd);
        dE_part = c.take<float>(R * Cd);
        dys = c.take<float>(rows * Cd);
        dxs = c.take<float>(rows * Cd);
        dEn = c.take<float>(R * Ce);
        dh = c.take<float>(R * Ce);
        dn_e = c.take<float>(R * Ce);
        dctx = c.take<float>(M * cs * Cd);
        dctx_part = c.take<float>(M * cs * Cd);
        q_max = std::max({q_max, rows * HD, R * HD});
        k_max = std::max({k_max, R * HD, M * cs * HD});
        kv_max = std::max({kv_max, R * Cd, R * Ce, M * cs * Cd});
        ff_max = std::max(ff_max, R * 4 * Ce);
    }
    dO = c.take<float>(q_max);
    dq = c.take<float>(q_max);
    dk = c.take<float>(k_max);
    dv = c.take<float>(k_max);
    tmp_k = c.take<float>(kv_max);
    tmp_v = c.take<float>(kv_max);
    dgel = c.take<float>(ff_max);
}

std::size_t backend_model_plan(const RetroConfig& config, const BackendBatchShape& shape, const nn::NnBackend* be,
                               bool head_trainable) {
    BackendRetroModel::Plan p;   // sizes only
    Carver c;
    p.carve(c, config, shape, be, head_trainable);
    return c.used;
}


BackendRetroModel::BackendRetroModel(const RetroConfig& config, nn::NnBackend& backend)
    : config_(config), layout_(config), be_(backend) {
    config_.validate("model config");
    const std::size_t bytes = static_cast<std::size_t>(layout_.total()) * sizeof(float);
    params_ = static_cast<float*>(be_.alloc(bytes));
    grads_ = static_cast<float*>(be_.alloc(bytes));
    be_.zero(params_, bytes);
    be_.zero(grads_, bytes);
    p_ = bind_params(params_, layout_, config_);
    g_ = bind_params(grads_, layout_, config_);
}

BackendRetroModel::~BackendRetroModel() {
    be_.release(arena_);
    be_.release(grads_);
    be_.release(params_);
}

void BackendRetroModel::upload_params(const std::vector<float>& host) {
    RETRO_CHECK(static_cast<int64_t>(host.size()) == layout_.total(), "upload_params: ", host.size(), " values for ",
                layout_.total());
    be_.upload(params_, host.data(), host.size() * sizeof(float));
}
void BackendRetroModel::download_params(std::vector<float>& host) {
    host.resize(static_cast<std::size_t>(layout_.total()));
    be_.download(host.data(), params_, host.size() * sizeof(float));
}
void BackendRetroModel::download_grads(std::vector<float>& host) {
    host.resize(static_cast<std::size_t>(layout_.total()));
    be_.download(host.data(), grads_, host.size() * sizeof(float));
}
void BackendRetroModel::zero_grad() { be_.zero(grads_, static_cast<std::size_t>(layout_.total()) * sizeof(float)); }

void BackendRetroModel::set_trainable(const std::vector<std::uint8_t>& per_entry) {
    const BackwardSkips b = param_backward_skips(layout_, config_, per_entry);
    lowest_trainable_ = b.lowest_trainable;
    head_trainable_ = b.head_trainable;
    encoder_trainable_ = b.encoder_trainable;
}

void BackendRetroModel::plan(const BackendBatchShape& shape) {
    // the backend's mode decides the attention's saved floats (attention_saved_floats), whether dlogits is held and
    // the size of the activations kept as bf16 or fp32 (activation_floats, carve_feed_forward), the head's
    // trainability too: a plan made in another mode is remade, never used with a stash smaller than what the
    // attention now writes, without a dlogits the logits' backward now uses, or with bf16-sized buffers for fp32
    const PlanMode mode = current_mode();
    if (plan_ && shape == shape_ && mode == mode_) return;
    be_.release(arena_);
    arena_ = nullptr;
    plan_.reset();
    arena_bytes_ = backend_model_plan(config_, shape, &be_, head_trainable_);
    arena_ = be_.alloc(arena_bytes_);
    auto p = std::make_unique<Plan>();
    Carver c{static_cast<char*>(arena_)};
    p->carve(c, config_, shape, &be_, head_trainable_);
    RETRO_CHECK(c.used == arena_bytes_, "arena plan: ", c.used, " bytes carved of ", arena_bytes_);
    // the shape's constant inputs: rotary tables and the row maps of CCA's shift and the encoder's context
    auto upload_table = [&](Plan::Rotary& r, const nn::RotaryTable<float>& t) {
        r.host = t;
        be_.upload(const_cast<float*>(r.view.cos), t.cos.data(), t.cos.size() * sizeof(float));
        be_.upload(const_cast<float*>(r.view.sin), t.sin.data(), t.sin.size() * sizeof(float));
    };
    const int64_t Rd = config_.rot_dim(), cs = config_.chunk_size, B = shape.B, n = shape.n;
    upload_table(p->rot_dec, nn::rotary_table_range<float>(n, Rd));
    if (p->s.retrieval) {
        const int64_t l = p->l, k = shape.k, r = shape.r;
        upload_table(p->rot_cca_q, nn::rotary_table<float>(nn::cca_query_positions(cs, p->cca.aligned_queries), Rd));
        upload_table(p->rot_cca_k, nn::rotary_table<float>(nn::cca_key_positions(k, r), Rd));
        upload_table(p->rot_enc, nn::rotary_table_range<float>(r, Rd));
        upload_table(p->rot_ctx, nn::rotary_table_range<float>(cs, Rd));
        // CCA (nn/chunked_cross_attention.h): group row b*l*cs + q reads decoder position q + cs - 1 of item b
        std::vector<std::int64_t> shift(static_cast<std::size_t>(B * l * cs)), unshift(static_cast<std::size_t>(B * n), -1);
        for (int64_t b = 0; b < B; b++)
            for (int64_t q = 0; q < l * cs; q++) {
                const int64_t pos = q + cs - 1, row = b * l * cs + q;
                shift[static_cast<std::size_t>(row)] = pos < n ? b * n + pos : -1;
                if (pos < n) unshift[static_cast<std::size_t>(b * n + pos)] = row;
            }
        be_.upload(p->cca_shift, shift.data(), shift.size() * sizeof(std::int64_t));
        be_.upload(p->cca_unshift, unshift.data(), unshift.size() * sizeof(std::int64_t));
        // encoder context: neighbour m = (b*l + u)*k + j reads chunk u of item b; backward adds j = 0..k-1 in order
        std::vector<std::int64_t> ctx(static_cast<std::size_t>(p->M * cs));
        std::vector<std::vector<std::int64_t>> back(static_cast<std::size_t>(k),
                                                    std::vector<std::int64_t>(static_cast<std::size_t>(B * n), -1));
        for (int64_t m = 0; m < p->M; m++) {
            const int64_t b = m / (l * k), u = (m / k) % l, j = m % k;
            for (int64_t t = 0; t < cs; t++) {
                ctx[static_cast<std::size_t>(m * cs + t)] = b * n + u * cs + t;
                back[static_cast<std::size_t>(j)][static_cast<std::size_t>(b * n + u * cs + t)] = m * cs + t;
            }
        }
        be_.upload(p->ctx_index, ctx.data(), ctx.size() * sizeof(std::int64_t));
        for (int64_t j = 0; j < k; j++)
            be_.upload(p->ctx_back[static_cast<std::size_t>(j)], back[static_cast<std::size_t>(j)].data(),
                       static_cast<std::size_t>(B * n) * sizeof(std::int64_t));
    }
    plan_ = std::move(p);
    shape_ = shape;
    mode_ = mode;
}

float BackendRetroModel::forward(const RetroBatch& batch) {
    const auto& c = config_;
    const int64_t B = batch.B, n = batch.n, Ce = c.enc_dim, Cd = c.dec_dim, V = c.num_tokens, cs = c.chunk_size;
    RETRO_CHECK(B > 0 && n > 0, "empty batch");
    RETRO_CHECK(static_cast<int64_t>(batch.seq.size()) == B * (n + 1), "seq holds ", batch.seq.size(),
                " ids, expected B*(n+1) = ", B * (n + 1));
    if (n > c.max_seq_len)
        user_error_in("batch", cat("sequence length ", n, " exceeds the model's max_seq_len ", c.max_seq_len));
    for (auto id : batch.seq)
        if (id < 0 || id >= V) user_error_in("batch", cat("token id ", id, " outside the vocabulary [0, ", V, ")"));
    const int64_t l = n / cs;
    if (batch.has_retrieval()) {
        RETRO_CHECK(static_cast<int64_t>(batch.retrieved.size()) == B * l * batch.k * batch.r, "retrieved holds ",
                    batch.retrieved.size(), " ids, expected B*l*k*r = ", B * l * batch.k * batch.r);
        RETRO_CHECK(batch.r >= cs, "retrieved length ", batch.r, " shorter than the chunk size ", cs);
        for (auto id : batch.retrieved)
            if (id < 0 || id >= V)
                user_error_in("batch", cat("retrieved token id ", id, " outside the vocabulary [0, ", V, ")"));
    }
    plan({B, n, batch.k, batch.r, batch.has_retrieval()});
    Plan& P = *plan_;
    const int64_t N = P.N;

    std::vector<std::int32_t> inputs(static_cast<std::size_t>(N)), labels(inputs.size());
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < n; t++) {
            inputs[static_cast<std::size_t>(b * n + t)] = batch.seq[static_cast<std::size_t>(b * (n + 1) + t)];
            labels[static_cast<std::size_t>(b * n + t)] = batch.seq[static_cast<std::size_t>(b * (n + 1) + t + 1)];
        }
    be_.upload(P.inputs, inputs.data(), inputs.size() * sizeof(std::int32_t));
    be_.upload(P.labels, labels.data(), labels.size() * sizeof(std::int32_t));
    if (P.s.retrieval) {
        std::vector<std::uint8_t> mask(batch.retrieved.size());
        for (std::size_t i = 0; i < mask.size(); i++) mask[i] = batch.retrieved[i] != c.pad_id;
        be_.upload(P.retrieved, batch.retrieved.data(), batch.retrieved.size() * sizeof(std::int32_t));
        be_.upload(P.mask, mask.data(), mask.size());
    }

    be_.embedding_forward(P.embed, P.inputs, p_.token_emb, N, V, Ce);
    be_.position_add_forward(P.embed, p_.pos_emb, B, n, Ce);
    if (p_.to_dec_w) be_.linear_forward(P.dec[0].x0, P.embed, p_.to_dec_w, p_.to_dec_b, N, Ce, Cd);

    // pre-norm blocks: each residual sum and the norm that reads it as one fused op (residual_rmsnorm_forward; the
    // same arithmetic as RetroModel's two ops)
    bool encoded = false;
    // (the norms' outputs that only linear layers read as bf16 where the mode keeps bf16 activations:
    // linear_input_forward, ff_input_forward)
    const bool bf16 = keeps_bf16_activations(be_);
    linear_input_forward(be_, P.dec[0].x0, P.dec[0].n0, P.dec[0].r0, nullptr, nullptr, p_.decoder[0].g_attn, N, Cd);
    for (std::size_t i = 0; i < P.dec.size(); i++) {
        const auto& L = p_.decoder[i];
        auto& A = P.dec[i];
        attn_forward(be_, P.tmp, A.attn, A.n0, nullptr, nullptr, &P.rot_dec.view, &P.rot_dec.view, L.attn, P.self,
                     bf16);
        if (L.has_cca && P.s.retrieval) {
            be_.residual_rmsnorm_forward(A.x1, A.n1, A.r1, A.x0, P.tmp, L.g_cca, N, Cd);
            if (!encoded) {
                be_.gather_rows(P.ctx, A.x1, P.ctx_index, P.M * cs, Cd);
                encoder_forward();
                encoded = true;
            }
            // CCA (nn/chunked_cross_attention.h): shift into chunk groups, cross-attend, shift back
            be_.gather_rows(A.cca_xs, A.n1, P.cca_shift, B * P.l * cs, Cd);
            attn_forward(be_, A.cca_ys, A.cca, A.cca_xs, P.E, P.mask, &P.rot_cca_q.view, &P.rot_cca_k.view, L.cca,
                         P.cca_attn);
            be_.gather_rows(P.tmp, A.cca_ys, P.cca_unshift, N, Cd);
            ff_input_forward(be_, A.ff, A.x2, A.n2, A.r2, A.x1, P.tmp, L.g_ff, N, Cd);
        } else {   // x2 is x1
            ff_input_forward(be_, A.ff, A.x1, A.n2, A.r2, A.x0, P.tmp, L.g_ff, N, Cd);
        }
        ff_forward(be_, P.tmp, A.ff, A.n2, L.ff, N, Cd);
        if (i + 1 < P.dec.size())
            linear_input_forward(be_, P.dec[i + 1].x0, P.dec[i + 1].n0, P.dec[i + 1].r0, A.x2, P.tmp,
                                 p_.decoder[i + 1].g_attn, N, Cd);
        else
            be_.residual_rmsnorm_forward(P.x_final, P.xn_final, P.rms_final, A.x2, P.tmp, p_.dec_norm_out, N, Cd);
    }
    be_.linear_forward(P.logits, P.xn_final, p_.to_logits_w, p_.to_logits_b, N, Cd, V);
    if (P.copy_cand) {   // nn/copy_head.h: candidates found on the host from the batch's ids, the gates on the backend
        std::vector<nn::CopyCandidate> cand;
        nn::copy_candidates_batch(cand, inputs.data(), B, n, batch.retrieved.data(), l, batch.k, batch.r, cs, c.pad_id);
        be_.upload(P.copy_cand, cand.data(), cand.size() * sizeof(nn::CopyCandidate));
        be_.copy_head_forward(P.logits, P.xn_final, P.copy_cand, N, batch.k, V, Cd, p_.copy_bias, p_.copy_weight);
    }
    return be_.cross_entropy_forward(P.lse, &valid_, P.logits, P.labels, N, V, c.pad_id);
}

void BackendRetroModel::encoder_forward() {
    Plan& P = *plan_;
    backend::encoder_forward(be_, P.E, P.enc, P.retrieved, P.mask, P.ctx, P.M, P.s.r, p_, config_, P.rot_enc.view,
                             P.rot_ctx.view);
}

void BackendRetroModel::encoder_backward() {   // dE (Plan) -> dctx (=), parameter gradients +=
    const auto& c = config_;
    Plan& P = *plan_;
    const int64_t Ce = c.enc_dim, Cd = c.dec_dim, R = P.R, ctx_size = P.M * c.chunk_size * Cd;
    const GradScratch t{P.dO, P.dq, P.dk, P.dv, P.tmp_k, P.tmp_v, P.dgel};
    const bool bf16 = keeps_bf16_activations(be_);   // the norms' outputs the linear layers read: bf16 bits
    if (bf16)
        be_.linear_backward_bf16x(P.dEn, g_.enc_project_w, g_.enc_project_b, P.dE,
                                  reinterpret_cast<const std::uint16_t*>(P.enc.norm), p_.enc_project_w, R, Ce, Cd);
    else
        be_.linear_backward(P.dEn, g_.enc_project_w, g_.enc_project_b, P.dE, P.enc.norm, p_.enc_project_w, R, Ce, Cd);
    be_.rmsnorm_backward(P.dh, g_.enc_norm_out, P.dEn, P.enc.pre, p_.enc_norm_out, P.enc.rms, R, Ce);
    be_.zero(P.dctx, static_cast<std::size_t>(ctx_size) * sizeof(float));
    for (int64_t i = static_cast<int64_t>(P.enc.layers.size()) - 1; i >= 0; i--) {
        const auto& L = p_.encoder[static_cast<std::size_t>(i)];
        const auto& G = g_.encoder[static_cast<std::size_t>(i)];
        auto& A = P.enc.layers[static_cast<std::size_t>(i)];
        ff_backward(be_, P.dn_e, G.ff, P.dh, A.ff, A.n2, L.ff, R, Ce, t);
        be_.rmsnorm_backward_add(P.dh, G.g_ff, P.dn_e, A.h2, L.g_ff, A.r2, R, Ce);
        if (L.has_cross) {
            attn_backward(be_, P.dn_e, P.dctx_part, G.cross, P.dh, A.cross, A.n1, P.ctx, nullptr, &P.rot_enc.view,
                          &P.rot_ctx.view, L.cross, P.enc.cross, t, bf16);
            be_.residual_add(P.dctx, P.dctx_part, ctx_size);
            be_.rmsnorm_backward_add(P.dh, G.g_cross, P.dn_e, A.h1, L.g_cross, A.r1, R, Ce);
        }
        attn_backward(be_, P.dn_e, nullptr, G.attn, P.dh, A.attn, A.n0, nullptr, P.mask, &P.rot_enc.view,
                      &P.rot_enc.view, L.attn, P.enc.self, t, bf16);
        be_.rmsnorm_backward_add(P.dh, G.g_attn, P.dn_e, A.h0, L.g_attn, A.r0, R, Ce);
    }
    be_.embedding_backward(g_.token_emb, P.dh, P.retrieved, R, Ce);
}

BackendRetroModel::PlanMode BackendRetroModel::current_mode() const {
    return {be_.fused_attention(), be_.gemm_inputs(), be_.bf16_activations(), head_trainable_};
}

void BackendRetroModel::backward(float scale) {
    RETRO_CHECK(plan_ != nullptr, "backward before forward");
    // the forward's activations were carved and written in the forward's mode: a backward in another would read
    // them at other sizes and places
    RETRO_CHECK(current_mode() == mode_, "backward: the backend's mode (GEMM inputs, fused attention, bf16 "
                                         "activations) or the head's trainability changed since the forward");
    const auto& c = config_;
    Plan& P = *plan_;
    const int64_t B = P.s.B, n = P.s.n, N = P.N, Ce = c.enc_dim, Cd = c.dec_dim, V = c.num_tokens,
                  cs = c.chunk_size;
    const GradScratch t{P.dO, P.dq, P.dk, P.dv, P.tmp_k, P.tmp_v, P.dgel};
    if (P.copy_cand) {   // the copy head's backward reads dlogits too
        be_.cross_entropy_backward(P.dlogits, scale, P.logits, P.lse, P.labels, N, V, c.pad_id, valid_);
        be_.linear_backward(P.dxn, head_trainable_ ? g_.to_logits_w : nullptr, g_.to_logits_b, P.dlogits,
                            P.xn_final, p_.to_logits_w, N, Cd, V);
        be_.copy_head_backward(P.dxn, g_.copy_bias, g_.copy_weight, P.dlogits, P.xn_final, P.copy_cand, N, P.s.k, V,
                               Cd, p_.copy_weight);
    } else {   // the two as one op (on the GPU in bf16: dlogits written only as the GEMMs' bf16 copy, and not held)
        RETRO_CHECK(P.dlogits || !be_.cross_entropy_linear_backward_uses_dlogits(head_trainable_, true),
                    "backward: the plan holds no dlogits, and the backend's mode or the head's trainability changed "
                    "since the forward");
        be_.cross_entropy_linear_backward(P.dxn, head_trainable_ ? g_.to_logits_w : nullptr, g_.to_logits_b,
                                          P.dlogits, scale, P.logits, P.lse, P.labels, c.pad_id, valid_, P.xn_final,
                                          p_.to_logits_w, N, Cd, V);
    }
    be_.rmsnorm_backward(P.dx, g_.dec_norm_out, P.dxn, P.x_final, p_.dec_norm_out, P.rms_final, N, Cd);
    if (P.s.retrieval) be_.zero(P.dE, static_cast<std::size_t>(P.R * Cd) * sizeof(float));
    const int64_t first = c.first_cca_layer() - 1;
    auto frozen_from = [&](int64_t block) { return lowest_trainable_ > block; };   // nothing trains at or below
    for (int64_t i = c.dec_depth - 1; i >= 0; i--) {
        const auto& L = p_.decoder[static_cast<std::size_t>(i)];
        const auto& G = g_.decoder[static_cast<std::size_t>(i)];
        auto& A = P.dec[static_cast<std::size_t>(i)];
        if (frozen_from(3 * i + 3)) return;
        ff_backward(be_, P.dn, G.ff, P.dx, A.ff, A.n2, L.ff, N, Cd, t);
        be_.rmsnorm_backward_add(P.dx, G.g_ff, P.dn, A.x2, L.g_ff, A.r2, N, Cd);
        if (frozen_from(3 * i + 2)) return;
        if (L.has_cca && P.s.retrieval) {
            // CCA backward: shift dy into the groups, cross-attention backward (dE_part =), shift dx back
            be_.gather_rows(P.dys, P.dx, P.cca_shift, B * P.l * cs, Cd);
            attn_backward(be_, P.dxs, P.dE_part, G.cca, P.dys, A.cca, A.cca_xs, P.E, P.mask, &P.rot_cca_q.view,
                          &P.rot_cca_k.view, L.cca, P.cca_attn, t);
            be_.gather_rows(P.dn, P.dxs, P.cca_unshift, N, Cd);
            be_.residual_add(P.dE, P.dE_part, P.R * Cd);
            be_.rmsnorm_backward_add(P.dx, G.g_cca, P.dn, A.x1, L.g_cca, A.r1, N, Cd);
            if (i == first && (encoder_trainable_ || !frozen_from(3 * i + 1))) {
                encoder_backward();
                for (auto* back : P.ctx_back) be_.gather_add_rows(P.dx, P.dctx, back, N, Cd);
            }
        }
        if (frozen_from(3 * i + 1)) return;
        attn_backward(be_, P.dn, nullptr, G.attn, P.dx, A.attn, A.n0, nullptr, nullptr, &P.rot_dec.view,
                      &P.rot_dec.view, L.attn, P.self, t, keeps_bf16_activations(be_));
        be_.rmsnorm_backward_add(P.dx, G.g_attn, P.dn, A.x0, L.g_attn, A.r0, N, Cd);
    }
    if (frozen_from(0)) return;
    const float* de = P.dx;
    if (p_.to_dec_w) {
        be_.linear_backward(P.dembed, g_.to_dec_w, g_.to_dec_b, P.dx, P.embed, p_.to_dec_w, N, Ce, Cd);
        de = P.dembed;
    }
    be_.position_add_backward(g_.pos_emb, de, B, n, Ce);
    be_.embedding_backward(g_.token_emb, de, P.inputs, N, Ce);
}

void BackendRetroModel::download_logits(std::vector<float>& host) {
    RETRO_CHECK(plan_ != nullptr, "download_logits before forward");
    host.resize(static_cast<std::size_t>(plan_->N * config_.num_tokens));
    be_.download(host.data(), plan_->logits, host.size() * sizeof(float));
}

}  // namespace retro
