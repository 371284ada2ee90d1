#include "generate/backend_decoder.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <type_traits>

#include "core/error.h"
#include "core/log.h"
#include "generate/decode_rows.h"
#include "model/backend_layers.h"
#include "model/layer_shapes.h"
#include "nn/chunked_cross_attention.h"
#include "nn/copy_head.h"
#include "nn/rotary.h"

namespace retro {

using std::int64_t;

namespace {

nn::RotaryView upload_table(nn::NnBackend& be, nn::BackendBuffer& buf, const nn::RotaryTable<float>& t) {
    const std::size_t n = t.cos.size();
    buf = nn::BackendBuffer(be, 2 * std::max<std::size_t>(n, 1) * sizeof(float));
    be.upload(buf.f(), t.cos.data(), n * sizeof(float));
    be.upload(buf.f() + n, t.sin.data(), n * sizeof(float));
    return {buf.f(), buf.f() + n, t.rows, t.rot_dim};
}

nn::RotaryView table_view(const nn::BackendBuffer& buf, int64_t rows, int64_t rot_dim) {
    return {buf.f(), buf.f() + rows * rot_dim, rows, rot_dim};
}

}  // namespace

std::size_t BackendDecoder::cache_bytes(const RetroConfig& c, int64_t S, bool retrieval) {
    const int64_t L = c.max_seq_len, HD = c.inner_dim(), KR = c.num_neighbours * c.retrieved_len(),
                  chunks = L / c.chunk_size;
    int64_t cca_layers = 0;
    for (int64_t l = 1; l <= c.dec_depth; l++) cca_layers += c.dec_has_cross(l) ? 1 : 0;
    std::size_t floats = static_cast<std::size_t>(c.dec_depth * 2 * S * L * HD);
    if (retrieval && c.first_cca_layer() > 0)
        floats += static_cast<std::size_t>(cca_layers * 2 * S * chunks * KR * HD + S * L * c.dec_dim) +
                  static_cast<std::size_t>(S * chunks * KR) / 4 + 1;
    return floats * sizeof(float);
}

std::size_t BackendDecoder::step_bytes_bound(const RetroConfig& c, int64_t S, bool retrieval) {
    const int64_t L = c.max_seq_len, R = S * L, Cd = c.dec_dim, Ce = c.enc_dim, HD = c.inner_dim(), Rd = c.rot_dim();
    // rows: embeddings, stream, norms, projections, attention output, feed-forward, rotary rows; one sequence's
    // attention probabilities; the logits of one row per sequence
    std::size_t floats = static_cast<std::size_t>(R * (Ce + 6 * Cd + 4 * HD + 8 * Cd + 2 * Rd + 4) + c.heads * L * L +
                                                  S * c.num_tokens);
    floats += static_cast<std::size_t>(R) * 7 * sizeof(std::int64_t) / sizeof(float);   // pos, seq, ctx, sel, unsel, pick
    if (c.copy_head) floats += static_cast<std::size_t>(R * c.num_neighbours) * sizeof(nn::CopyCandidate) / sizeof(float);
    if (retrieval && c.first_cca_layer() > 0) {
        const int64_t M = S * (L / c.chunk_size) * c.num_neighbours, Re = M * c.retrieved_len();
        backend::Carver count;
        backend::carve_encoder(count, c, M, c.retrieved_len());
        floats += count.used / sizeof(float) + static_cast<std::size_t>(Re * (Cd + 2 * HD + 1) + M * c.chunk_size * Cd);
    }
    return floats * sizeof(float);
}

BackendDecoder::BackendDecoder(const RetroConfig& config, const float* params, nn::NnBackend& be, int64_t sequences,
                               bool retrieval)
    : c_(config), be_(be), program_mode_(nn::decode_program_mode_requested(std::getenv("RETRO_DECODE_PROGRAM"))) {
    RETRO_CHECK(sequences > 0, "decoder needs at least one sequence");
    const ParamLayout layout(c_);
    p_ = bind_params(const_cast<float*>(params), layout, c_);
    first_cca_ = c_.first_cca_layer() - 1;
    retrieval_ = retrieval && first_cca_ >= 0;
    k_ = c_.num_neighbours;
    r_ = c_.retrieved_len();
    L_ = c_.max_seq_len;
    chunks_ = L_ / c_.chunk_size;
    const int64_t S = sequences, HD = c_.inner_dim(), KR = k_ * r_, Rd = c_.rot_dim();
    seqs_.resize(static_cast<std::size_t>(S));
    last_row_.assign(static_cast<std::size_t>(S), -1);
    for (const auto& L : p_.decoder) {
        kc_.emplace_back(be_, static_cast<std::size_t>(S * L_ * HD) * sizeof(float));
        vc_.emplace_back(be_, static_cast<std::size_t>(S * L_ * HD) * sizeof(float));
        const bool cca = retrieval_ && L.has_cca;
        cca_k_.emplace_back(be_, cca ? static_cast<std::size_t>(S * chunks_ * KR * HD) * sizeof(float) : 1);
        cca_v_.emplace_back(be_, cca ? static_cast<std::size_t>(S * chunks_ * KR * HD) * sizeof(float) : 1);
    }
    if (retrieval_) {
        cca_mask_ = nn::BackendBuffer(be_, static_cast<std::size_t>(std::max<int64_t>(S * chunks_ * KR, 1)));
        ctx_ = nn::BackendBuffer(be_, static_cast<std::size_t>(S * L_ * c_.dec_dim) * sizeof(float));
        upload_table(be_, rot_r_, nn::rotary_table_range<float>(r_, Rd));
        upload_table(be_, rot_cs_, nn::rotary_table_range<float>(c_.chunk_size, Rd));
        upload_table(be_, rot_kr_, nn::rotary_table<float>(nn::cca_key_positions(k_, r_), Rd));
    }
}

template <typename T>
T* BackendDecoder::grow(Grow& g, int64_t count) {
    const std::size_t bytes = static_cast<std::size_t>(std::max<int64_t>(count, 1)) * sizeof(T);
    if (bytes > g.bytes) {   // with headroom (a step's rows grow by one); earlier kernels may still read the old one
        be_.synchronize();
        g.bytes = std::max(bytes, 2 * g.bytes);
        g.buf = nn::BackendBuffer(be_, g.bytes);
        grow_epoch_++;   // a captured graph that used the old buffer is stale
    }
    return static_cast<T*>(g.buf.get());
}

void BackendDecoder::add_neighbours(int64_t s, const std::int32_t* retrieved) {
    auto& q = seqs_[static_cast<std::size_t>(s)];
    for (int64_t i = 0; i < k_ * r_; i++)
        if (retrieved[i] < 0 || retrieved[i] >= c_.num_tokens)
            user_error_in("neighbours", cat("retrieved token id ", retrieved[i], " outside the vocabulary [0, ",
                                            c_.num_tokens, ")"));
    q.retrieved.insert(q.retrieved.end(), retrieved, retrieved + k_ * r_);
}

void BackendDecoder::reset(int64_t s) {   // the caches are overwritten position by position: no clearing needed
    auto& q = seqs_[static_cast<std::size_t>(s)];
    q.n = 0;
    q.encoded = 0;
    q.retrieved.clear();
    q.tokens.clear();
}

void BackendDecoder::step(const std::vector<std::vector<std::int32_t>>& tokens, bool all_logits) {
    const int64_t S = sequences();
    std::vector<int64_t> lengths, chunks;
    for (int64_t s = 0; s < S; s++) {
        lengths.push_back(seqs_[static_cast<std::size_t>(s)].n);
        if (retrieval_) chunks.push_back(neighbour_chunks(s));
    }
    DecodeRows rows = decode_rows(tokens, lengths, chunks, c_);
    // the step's probs buffer holds the probabilities (prepare_step): in the fused attention mode the CUDA backend's
    // stash may be larger (NnBackend::attention_saved_floats; the encoder's arena is carved without a backend too)
    RETRO_CHECK(!be_.fused_attention(), "BackendDecoder: the backend is in the fused attention mode, whose saved "
                                        "floats the decoder's buffers are not sized for");
    std::fill(last_row_.begin(), last_row_.end(), -1);
    logits_.clear();
    logits_pending_ = false;
    if (rows.seq.empty()) return;
    prepare_step(rows, all_logits);
    const StepPlan& P = plan_;
    if (use_graphs_ && P.graph_key.has_value()) {
        // the step replayed (a graph, or a recorded program: NnBackend::begin_capture, nn/decode_program.h): made
        // when its key (buffers, rows, chunks read) is new, replayed while it holds; what changes from token to
        // token is in the buffers prepare_step uploaded
        if ((!graph_ && !program_) || graph_key_ != *P.graph_key) make_replay();
        if (program_) {
            nn::run_decode_program(be_, *program_, /*reverse_phases=*/true);   // (no bit may change: the phases' check)
            program_steps_++;
        } else {
            if (replay_fused_ && !launch_fused_step()) make_replay();   // refused: a captured graph from now on
            if (!replay_fused_) {
                be_.launch_graph(*graph_);
                graph_launches_++;
            }
        }
    } else {
        run_step(be_);
    }
    for (int64_t s = 0; s < S; s++)
        seqs_[static_cast<std::size_t>(s)].n += P.row_begin[static_cast<std::size_t>(s + 1)] - P.row_begin[static_cast<std::size_t>(s)];
    logits_pending_ = true;
}

// The backend's fused step launched; false (and, in fused mode, no fused step from now on) where the device refused
// the launch before anything ran (nn::FusedLaunchRefused).
bool BackendDecoder::launch_fused_step() {
    try {
        be_.launch_graph(*graph_);
    } catch (const nn::FusedLaunchRefused& e) {
        fused_refused_ = e.what();
        log_warn(fused_refused_ + "; decoding on with captured graphs");
        return false;
    }
    program_steps_++;
    fused_steps_++;
    return true;
}

void BackendDecoder::make_replay() {
    graph_.reset();
    program_.reset();
    graph_key_ = *plan_.graph_key;
    replay_fused_ = false;
    // (after a refused fused launch, fused mode captures graphs: the backend would refuse again)
    const bool refused = program_mode_ == nn::DecodeProgramMode::fused && !fused_refused_.empty();
    program_why_ = refused ? fused_refused_ : "off";
    if (program_mode_ != nn::DecodeProgramMode::off && !refused) {
        nn::DecodeProgramRecorder rec;
        run_step(rec);
        program_why_ = rec.why();
        if (rec.ok()) {
            const std::vector<bool> b = nn::decode_barriers(rec.program);
            program_ops_ = static_cast<std::int64_t>(b.size());
            program_barriers_ = std::count(b.begin(), b.end(), true) - (b.empty() ? 0 : 1);
        }
        if (rec.ok() && program_mode_ == nn::DecodeProgramMode::interpret) {
            program_ = std::move(rec.program);
            return;
        }
        if (rec.ok()) {
            graph_ = be_.fuse_decode_program(rec.program, &program_why_);
            if (graph_) {
                program_why_.clear();
                replay_fused_ = true;
                return;
            }
        }
    }
    be_.begin_capture();
    try {
        run_step(be_);
    } catch (...) {
        be_.abort_capture();   // (the op's error, not the broken capture's, is the one to report)
        throw;
    }
    graph_ = be_.end_capture();
    graph_captures_++;
}

double BackendDecoder::time_replays(int times) {
    const bool replayed = use_graphs_ && plan_.graph_key.has_value() && graph_key_ == *plan_.graph_key &&
                          (graph_ || program_);
    if (!replayed || times < 1) return -1;
    be_.synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < times; i++) {
        if (program_) nn::run_decode_program(be_, *program_);
        else be_.launch_graph(*graph_);
    }
    be_.synchronize();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / times;
}

const std::vector<float>& BackendDecoder::logits() const {
    if (logits_pending_) {
        logits_.resize(static_cast<std::size_t>(plan_.out_rows * c_.num_tokens));
        be_.download(logits_.data(), plan_.lg, logits_.size() * sizeof(float));
        logits_pending_ = false;
    }
    return logits_;
}

void BackendDecoder::sample_last(const nn::SamplingParams& o, const std::vector<std::int64_t>& seqs,
                                 const std::vector<double>& u, std::vector<std::int32_t>& ids, std::int64_t vocab) {
    std::vector<std::int64_t> rows;
    rows.reserve(seqs.size());
    for (const std::int64_t s : seqs) {
        RETRO_CHECK(s >= 0 && s < sequences() && last_row(s) >= 0, "sample_last: sequence ", s, " has no logits row");
        rows.push_back(last_row(s));
    }
    RETRO_CHECK(o.greedy || u.size() >= seqs.size(), "sample_last: ", u.size(), " uniforms for ", seqs.size(), " sequences");
    ids.assign(seqs.size(), -1);
    RETRO_CHECK(vocab >= 0 && vocab <= c_.num_tokens, "sample_last: vocabulary ", vocab, " of ", c_.num_tokens);
    be_.sample_rows(ids.data(), plan_.lg, rows.data(), static_cast<std::int64_t>(rows.size()),
                    vocab > 0 ? vocab : c_.num_tokens, c_.num_tokens, o, o.greedy ? nullptr : u.data());
}

// Every host-side decision of a step and every upload it needs, before anything runs: the rows' ids, positions,
// sequences and rotary rows, the rows the encoder's context takes, the CCA rows' selection (the same for every CCA
// layer) with their query rotations, the rows whose logits are wanted, the copy head's candidates; and every buffer
// grown to the step's size. run_step() then only calls compute ops on these buffers (a graph can replay it).
void BackendDecoder::prepare_step(const DecodeRows& rows, bool all_logits) {
    const int64_t S = sequences(), Ce = c_.enc_dim, Cd = c_.dec_dim, V = c_.num_tokens, HD = c_.inner_dim(),
                  H = c_.heads, Rd = c_.rot_dim(), cs = c_.chunk_size, KR = k_ * r_;
    StepPlan& P = plan_;
    row_seq_ = rows.seq;
    row_pos_ = rows.pos;
    P.row_begin = rows.begin;
    const int64_t R = static_cast<int64_t>(row_seq_.size());
    P.R = R;
    P.n0.assign(static_cast<std::size_t>(S), 0);
    P.one_row_each = c_.dim_head <= nn::kAttentionDecodeMaxD;
    P.encode = false;
    int64_t self_probs = 0;
    for (int64_t s = 0; s < S; s++) {
        auto& q = seqs_[static_cast<std::size_t>(s)];
        const int64_t fed = P.row_begin[static_cast<std::size_t>(s + 1)] - P.row_begin[static_cast<std::size_t>(s)];
        P.n0[static_cast<std::size_t>(s)] = q.n;
        P.one_row_each = P.one_row_each && fed <= 1;
        self_probs = std::max(self_probs, H * fed * (q.n + fed));
        if (retrieval_ && (q.n + fed) / cs > q.encoded) P.encode = true;   // a chunk finishes: the encoder runs
        if (c_.copy_head)   // the head's history: the ids fed so far, this step's included
            q.tokens.insert(q.tokens.end(), rows.ids.begin() + P.row_begin[static_cast<std::size_t>(s)],
                            rows.ids.begin() + P.row_begin[static_cast<std::size_t>(s + 1)]);
    }

    // the step's inputs, packed into one block and sent with one upload (each upload costs the host a few µs while
    // the GPU waits: a decode step had ten of them)
    StepBlock block;
    const std::size_t at_ids = block.add(rows.ids.data(), R), at_pos = block.add(row_pos_.data(), R),
                      at_seq = block.add(row_seq_.data(), R);
    const auto rot_host = nn::rotary_table<float>(row_pos_, Rd);   // each row at its position
    const std::size_t at_cos = block.add(rot_host.cos.data(), R * Rd), at_sin = block.add(rot_host.sin.data(), R * Rd);
    std::size_t at_ctx = 0, at_sel = 0, at_unsel = 0, at_qcos = 0, at_qsin = 0, at_slot = 0, at_last = 0, at_pick = 0,
                at_cand = 0;

    // CCA (nn/chunked_cross_attention.h's cca_rows_forward): rows at p >= cs - 1 read chunk u = floor((p + 1)/cs) - 1
    // of their sequence, grouped by (sequence, chunk); the others get 0
    P.segments.clear();
    P.cca_slot = P.cca_last = nullptr;
    P.Rs = 0;
    P.cca_every_row = false;
    int64_t cca_probs = 0;
    std::vector<int64_t> chunk_read(static_cast<std::size_t>(R), -1);
    if (retrieval_) {
        const auto qtable = nn::cca_query_positions(cs, c_.cca_query_positions == "aligned");
        std::vector<int64_t> sel, qpos, unsel(static_cast<std::size_t>(R), -1), ctx_rows(static_cast<std::size_t>(R));
        for (int64_t i = 0; i < R; i++) {
            const int64_t pos = row_pos_[static_cast<std::size_t>(i)], s = row_seq_[static_cast<std::size_t>(i)];
            ctx_rows[static_cast<std::size_t>(i)] = s * L_ + pos;
            if (pos < cs - 1) continue;
            const int64_t u = (pos + 1) / cs - 1, t = pos - (u * cs + cs - 1);
            chunk_read[static_cast<std::size_t>(i)] = u;
            if (P.segments.empty() || P.segments.back().s != s || P.segments.back().u != u)
                P.segments.push_back({static_cast<int64_t>(sel.size()), 0, s, u});
            P.segments.back().rows++;
            unsel[static_cast<std::size_t>(i)] = static_cast<int64_t>(sel.size());
            sel.push_back(i);
            qpos.push_back(qtable[static_cast<std::size_t>(t)]);
        }
        at_ctx = block.add(ctx_rows.data(), R);
        P.Rs = static_cast<int64_t>(sel.size());
        P.cca_every_row = P.Rs == R;   // then sel is 0..R-1 in order (rows are selected in row order)
        if (P.Rs > 0) {
            at_sel = block.add(sel.data(), P.Rs);
            at_unsel = block.add(unsel.data(), R);
            const auto qrot_host = nn::rotary_table<float>(qpos, Rd);
            at_qcos = block.add(qrot_host.cos.data(), P.Rs * Rd);
            at_qsin = block.add(qrot_host.sin.data(), P.Rs * Rd);
            for (const auto& g : P.segments) cca_probs = std::max(cca_probs, H * g.rows * (KR + 1));
            if (P.one_row_each) {
                // attention_decode over the chunk slots: row i reads slot s * chunks + u, keys 0..KR-1 (the pad mask
                // of the slot masks the rest): one call a layer instead of one per (sequence, chunk)
                std::vector<int64_t> slot, last(static_cast<std::size_t>(P.Rs), KR - 1);
                for (const auto& g : P.segments)
                    for (int64_t r = 0; r < g.rows; r++) slot.push_back(g.s * chunks_ + g.u);
                at_slot = block.add(slot.data(), P.Rs);
                at_last = block.add(last.data(), P.Rs);
            }
        }
    }

    // logits of every row, or of each advancing sequence's last row
    std::vector<int64_t> pick;
    for (int64_t s = 0; s < S; s++) {
        const int64_t b = P.row_begin[static_cast<std::size_t>(s)], en = P.row_begin[static_cast<std::size_t>(s + 1)];
        if (en == b) continue;
        if (all_logits)
            for (int64_t i = b; i < en; i++) pick.push_back(i);
        else
            pick.push_back(en - 1);
        last_row_[static_cast<std::size_t>(s)] = static_cast<int64_t>(pick.size()) - 1;
    }
    P.out_rows = static_cast<int64_t>(pick.size());
    P.pick_every_row = P.out_rows == R;
    for (int64_t i = 0; i < P.out_rows && P.pick_every_row; i++) P.pick_every_row = pick[static_cast<std::size_t>(i)] == i;
    at_pick = block.add(pick.data(), P.out_rows);
    const bool copy = c_.copy_head && retrieval_;
    if (copy) {
        // nn/copy_head.h, as CachedDecoder::add_copy_head: each picked row at p >= cs - 1 proposes, per neighbour of
        // the chunk CCA reads there, what followed the longest match of its sequence's ids so far
        std::vector<nn::CopyCandidate> cand(static_cast<std::size_t>(P.out_rows * k_));
        for (int64_t i = 0; i < P.out_rows; i++) {
            const int64_t row = pick[static_cast<std::size_t>(i)], u = chunk_read[static_cast<std::size_t>(row)];
            if (u < 0) continue;
            const auto& q = seqs_[static_cast<std::size_t>(row_seq_[static_cast<std::size_t>(row)])];
            nn::copy_candidates(cand.data() + i * k_, q.tokens.data(), row_pos_[static_cast<std::size_t>(row)],
                                q.retrieved.data() + u * KR, k_, r_, c_.pad_id);
        }
        at_cand = block.add(cand.data(), P.out_rows * k_);
    }

    // one upload; the pointers into it
    char* base = grow<char>(g_step_, static_cast<int64_t>(block.bytes.size()));
    be_.upload(base, block.bytes.data(), block.bytes.size());
    auto in = [&](std::size_t at) { return base + at; };
    P.ids = reinterpret_cast<std::int32_t*>(in(at_ids));
    P.pos = reinterpret_cast<int64_t*>(in(at_pos));
    P.seq = reinterpret_cast<int64_t*>(in(at_seq));
    P.rot = {reinterpret_cast<float*>(in(at_cos)), reinterpret_cast<float*>(in(at_sin)), R, Rd};
    P.ctx_rows = retrieval_ ? reinterpret_cast<int64_t*>(in(at_ctx)) : nullptr;
    P.sel = P.Rs > 0 ? reinterpret_cast<int64_t*>(in(at_sel)) : nullptr;
    P.unsel = P.Rs > 0 ? reinterpret_cast<int64_t*>(in(at_unsel)) : nullptr;
    if (P.Rs > 0) P.qrot = {reinterpret_cast<float*>(in(at_qcos)), reinterpret_cast<float*>(in(at_qsin)), P.Rs, Rd};
    if (P.Rs > 0 && P.one_row_each) {
        P.cca_slot = reinterpret_cast<int64_t*>(in(at_slot));
        P.cca_last = reinterpret_cast<int64_t*>(in(at_last));
    }
    P.pick = reinterpret_cast<int64_t*>(in(at_pick));
    P.cand = copy ? reinterpret_cast<nn::CopyCandidate*>(in(at_cand)) : nullptr;

    // the step's activations
    P.e = grow<float>(g_e_, R * Ce);
    P.x = grow<float>(g_x_, R * Cd);
    P.xn = grow<float>(g_xn_, R * Cd);
    P.norm = grow<float>(g_norm_, R);
    P.y = grow<float>(g_y_, R * Cd);
    P.x1 = grow<float>(g_x1_, R * Cd);
    P.x2 = grow<float>(g_x2_, R * Cd);
    P.q = grow<float>(g_q_, 3 * R * HD);
    P.o = grow<float>(g_o_, R * HD);
    P.ff = {nullptr, grow<float>(g_g_, R * 4 * Cd)};   // no backward: the pre-gelu values are not kept
    P.xs = grow<float>(g_xs_, std::max(P.Rs, P.out_rows) * Cd);
    P.ys = grow<float>(g_ys_, P.Rs * Cd);
    P.probs = grow<float>(g_probs_, std::max(P.one_row_each ? 0 : self_probs, cca_probs));
    P.lg = grow<float>(g_logits_, P.out_rows * V);
    P.decode_ws = nullptr;
    P.decode_counters = nullptr;
    if (P.one_row_each) {   // the self-attention over L_ positions, and CCA over the chunk slots' KR keys
        P.decode_ws = grow<float>(g_decode_ws_, std::max(nn::attention_decode_workspace(R, H, c_.dim_head, L_),
                                                         nn::attention_decode_workspace(P.Rs, H, c_.dim_head, KR)));
        const std::size_t had = g_decode_counters_.bytes;   // zero when (re)allocated; every call leaves them zero
        P.decode_counters = grow<std::uint32_t>(g_decode_counters_, std::max(R, P.Rs) * H);
        if (g_decode_counters_.bytes != had) be_.zero(P.decode_counters, g_decode_counters_.bytes);
    }

    // a step the same graph can replay: one row per advancing sequence, logits of those rows, no chunk to encode;
    // its key is what the captured ops bake in (buffer addresses, row count, each row's sequence, whether it reads a
    // chunk)
    P.graph_key.reset();
    if (P.one_row_each && !all_logits && !P.encode) {
        // (the chunk a row reads is in the uploaded slots, so only whether it reads one is baked in)
        std::vector<int64_t> key = {static_cast<int64_t>(grow_epoch_), R};
        for (int64_t i = 0; i < R; i++) {
            key.push_back(row_seq_[static_cast<std::size_t>(i)]);
            key.push_back(chunk_read[static_cast<std::size_t>(i)] >= 0 ? 1 : 0);
        }
        P.graph_key = std::move(key);
    }
}

// The step's compute, on prepare_step's buffers only (no upload, download or host decision but the encoder's, which
// only an eager step runs), called on the backend or on a DecodeProgramRecorder (which then lists the ops).
template <class Ops>
void BackendDecoder::run_step(Ops& ops) {
    const StepPlan& P = plan_;
    const int64_t S = sequences(), R = P.R, Ce = c_.enc_dim, Cd = c_.dec_dim, V = c_.num_tokens, HD = c_.inner_dim(),
                  H = c_.heads, Dh = c_.dim_head;
    float *x = P.x, *xn = P.xn, *norm = P.norm, *y = P.y, *x1 = P.x1, *x2 = P.x2, *q = P.q, *o = P.o;
    float *kr = q + R * HD, *vr = q + 2 * R * HD;
    // embeddings: token_emb[id] + pos_emb[pos], then to the decoder width
    // (without the projection, enc_dim = dec_dim: straight into x, one launch and no copy node in a captured step)
    float* e = p_.to_dec_w ? P.e : x;
    ops.embedding_position_forward(e, P.ids, p_.token_emb, P.pos, p_.pos_emb, R, V, Ce);   // e[i] += pos_emb[pos[i]]
    if (p_.to_dec_w) ops.linear_forward(x, e, p_.to_dec_w, p_.to_dec_b, R, Ce, Cd);
    const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(Dh)));
    // pre-norm blocks over the stream x: each norm rides in the projection that reads it (rmsnorm_linear_forward,
    // linear_rotary_forward), the queries' and keys' rotation in their projection (linear_rotary_forward) and each
    // residual sum in the projection that ends its block (linear_residual_forward): on the GPU one GEMV launch each
    // for a decode step's few rows (decoding is launch-bound, docs/performance.md), and on any backend the same
    // floats as the separate ops (nn/nn_backend.h). xn and norm are the norms' scratch where the ops run apart.
    for (std::size_t li = 0; li < p_.decoder.size(); li++) {
        const auto& L = p_.decoder[li];
        // self-attention (nn/attention_kv_cache.h's attention_layer_step): projections over all rows, the new keys
        // and values appended to each sequence's cache, each sequence's rows attending its keys 0..pos
        if (R == 1 && L.attn.to_k == L.attn.to_q + HD * Cd && L.attn.to_v == L.attn.to_k + HD * Cd) {
            // one row (a single sequence's decode step): to_q, to_k, to_v lie one after another in the layout
            // (model/params.cpp), so one GEMV of W = [3 HD, Cd] gives the row's q | k | v, which is q, kr, vr here;
            // q and k then rotate as one row of 2H heads at the same position, the first H scaled on the way
            // (linear_rotary_forward: with the norm before it, one launch on the GPU). Decoding is launch-bound
            // (docs/performance.md)
            ops.linear_rotary_forward(q, xn, norm, x, L.g_attn, L.attn.to_q, nullptr, 1, Cd, 3 * HD,
                                      {P.rot, 2 * H, Dh, scale, H});
        } else {
            ops.rmsnorm_forward(xn, norm, x, L.g_attn, R, Cd);
            ops.linear_rotary_forward(q, nullptr, nullptr, xn, nullptr, L.attn.to_q, nullptr, R, Cd, HD,
                                      {P.rot, H, Dh, scale, H});
            ops.linear_rotary_forward(kr, nullptr, nullptr, xn, nullptr, L.attn.to_k, nullptr, R, Cd, HD,
                                      {P.rot, H, Dh, 1.0f, 0});
            ops.linear_forward(vr, xn, L.attn.to_v, nullptr, R, Cd, HD);
        }
        if (P.one_row_each) {   // every advancing sequence feeds one row: one call, the cache writes included
            nn::NnBackend::DecodeCache cache{kc_[li].f(), vc_[li].f(), L_};
            cache.k_new = kr;
            cache.v_new = vr;
            cache.workspace = P.decode_ws;
            cache.counters = P.decode_counters;
            ops.attention_decode(o, q, cache, P.pos, P.seq, R, H, Dh);
        } else {
            for (int64_t s = 0; s < S; s++) {
                const int64_t b = P.row_begin[static_cast<std::size_t>(s)], en = P.row_begin[static_cast<std::size_t>(s + 1)];
                if (en == b) continue;
                const int64_t n0 = P.n0[static_cast<std::size_t>(s)];
                float* kcache = kc_[li].f() + s * L_ * HD;
                float* vcache = vc_[li].f() + s * L_ * HD;
                ops.copy(kcache + n0 * HD, kr + b * HD, static_cast<std::size_t>((en - b) * HD) * sizeof(float));
                ops.copy(vcache + n0 * HD, vr + b * HD, static_cast<std::size_t>((en - b) * HD) * sizeof(float));
                const nn::AttentionShape sh{1, en - b, n0 + en - b, H, Dh, true, false};
                ops.attention_forward(o + b * HD, P.probs, q + b * HD, kcache, vcache, nullptr, nullptr, nullptr, sh);
            }
        }
        ops.linear_residual_forward(x1, y, x, o, L.attn.to_out_w, L.attn.to_out_b, R, HD, Cd);   // x1 = x + attention
        const float* xin = x1;
        if (L.has_cca && retrieval_) {
            if (L.index == first_cca_) {   // the encoder's context: this layer's x1, kept per sequence and position
                ops.scatter_rows(ctx_.f(), x1, P.ctx_rows, R, Cd);
                if (P.encode) {
                    if constexpr (std::is_same_v<Ops, nn::NnBackend>) encode_finished_chunks(P.row_begin);
                    else ops.unsupported("the encoder");
                }
            }
            cca_rows(ops, x2, x1, L, li);   // x2 = x1 + CCA(rmsnorm(x1))
            xin = x2;
        }
        // the feed-forward: x = xin + ff(rmsnorm(xin))
        ops.rmsnorm_linear_forward(P.ff.g, xn, norm, xin, L.g_ff, L.ff.w1, L.ff.b1, R, Cd, ff_inner(Cd), true);
        ops.linear_residual_forward(x, y, xin, P.ff.g, L.ff.w2, L.ff.b2, R, ff_inner(Cd), Cd);
    }
    // the logits of the picked rows (and the copy head's gates on their normalised rows)
    const float* xo = x;
    if (!P.pick_every_row) {
        ops.gather_rows(P.xs, x, P.pick, P.out_rows, Cd);
        xo = P.xs;
    }
    if (P.cand) {
        ops.rmsnorm_forward(xn, norm, xo, p_.dec_norm_out, P.out_rows, Cd);
        ops.linear_forward(P.lg, xn, p_.to_logits_w, p_.to_logits_b, P.out_rows, Cd, V);
        ops.copy_head_forward(P.lg, xn, P.cand, P.out_rows, k_, V, Cd, p_.copy_bias, p_.copy_weight);
    } else {
        ops.rmsnorm_linear_forward(P.lg, xn, norm, xo, p_.dec_norm_out, p_.to_logits_w, p_.to_logits_b, P.out_rows, Cd,
                                   V, false);
    }
}

// nn/chunked_cross_attention.h's cca_rows_forward over prepare_step's selection, as the residual block it is: out =
// x + CCA(rmsnorm(x)) (out is not x). The selected rows' queries rotated at the CCA query positions, each (sequence,
// chunk) segment against that chunk's cached keys and values, the outputs back in row order (0 for the rows that
// read no chunk).
template <class Ops>
void BackendDecoder::cca_rows(Ops& ops, float* out, const float* x, const DecoderLayerParams<float>& L,
                              std::size_t layer) {
    const StepPlan& P = plan_;
    const int64_t R = P.R, Cd = c_.dec_dim, HD = c_.inner_dim(), H = c_.heads, Dh = c_.dim_head, KR = k_ * r_, Rs = P.Rs;
    if (Rs == 0) {
        ops.zero(P.y, static_cast<std::size_t>(R * Cd) * sizeof(float));
        ops.residual_sum(out, x, P.y, R * Cd);
        return;
    }
    // every row reads a chunk (every decode step past the first chunk): the selection is the identity, so the rows
    // go in and out without the two gathers; the norm is row by row, so the selected rows are normalised after the
    // gather
    const float* xs = x;
    if (!P.cca_every_row) {
        ops.gather_rows(P.xs, x, P.sel, Rs, Cd);
        xs = P.xs;
    }
    ops.linear_rotary_forward(P.q, P.xn, P.norm, xs, L.g_cca, L.cca.to_q, nullptr, Rs, Cd, HD,
                              {P.qrot, H, Dh, static_cast<float>(1.0 / std::sqrt(static_cast<double>(Dh))), H});
    if (P.cca_slot) {   // a decode step: every selected row against its chunk's slot in one call
        nn::NnBackend::DecodeCache cache{cca_k_[layer].f(), cca_v_[layer].f(), KR};
        cache.null_k = L.cca.null_k;
        cache.null_v = L.cca.null_v;
        cache.key_mask = static_cast<const std::uint8_t*>(cca_mask_.get());
        cache.workspace = P.decode_ws;
        cache.counters = P.decode_counters;
        ops.attention_decode(P.o, P.q, cache, P.cca_last, P.cca_slot, Rs, H, Dh);
    } else {
        for (const auto& g : P.segments) {
            const int64_t at = g.s * chunks_ + g.u;
            const nn::AttentionShape sh{1, g.rows, KR, H, Dh, false, true};
            ops.attention_forward(P.o + g.first * HD, P.probs, P.q + g.first * HD, cca_k_[layer].f() + at * KR * HD,
                                  cca_v_[layer].f() + at * KR * HD, L.cca.null_k, L.cca.null_v,
                                  static_cast<const std::uint8_t*>(cca_mask_.get()) + at * KR, sh);
        }
    }
    if (P.cca_every_row) {
        ops.linear_residual_forward(out, P.y, x, P.o, L.cca.to_out_w, L.cca.to_out_b, Rs, HD, Cd);
    } else {
        ops.linear_forward(P.ys, P.o, L.cca.to_out_w, L.cca.to_out_b, Rs, HD, Cd);
        ops.gather_rows(P.y, P.ys, P.unsel, R, Cd);
        ops.residual_sum(out, x, P.y, R * Cd);
    }
}

// Every finished chunk of every sequence (chunks whose last position this step feeds) through the encoder in one
// batch, then each CCA layer's keys and values of its E_u into the caches (cached_decoder.cpp's
// encode_finished_chunks).
void BackendDecoder::encode_finished_chunks(const std::vector<int64_t>& row_begin) {
    const int64_t cs = c_.chunk_size, Cd = c_.dec_dim, S = sequences(), KR = k_ * r_, HD = c_.inner_dim(),
                  H = c_.heads, Dh = c_.dim_head;
    struct Job {
        int64_t s, u;
    };
    std::vector<Job> jobs;
    for (int64_t s = 0; s < S; s++) {
        const auto& q = seqs_[static_cast<std::size_t>(s)];
        const int64_t fed = q.n + row_begin[static_cast<std::size_t>(s + 1)] - row_begin[static_cast<std::size_t>(s)];
        for (int64_t u = q.encoded; u < fed / cs; u++) jobs.push_back({s, u});
    }
    if (jobs.empty()) return;
    const int64_t J = static_cast<int64_t>(jobs.size()), M = J * k_, R = M * r_;
    std::vector<std::int32_t> ids(static_cast<std::size_t>(R));
    std::vector<std::uint8_t> mask(ids.size());
    for (int64_t j = 0; j < J; j++) {
        const auto& q = seqs_[static_cast<std::size_t>(jobs[j].s)];
        std::copy_n(q.retrieved.begin() + jobs[j].u * KR, KR, ids.begin() + j * KR);
    }
    for (std::size_t i = 0; i < ids.size(); i++) mask[i] = ids[i] != c_.pad_id;
    auto* d_ids = grow<std::int32_t>(g_enc_ids_, R);
    auto* d_mask = grow<std::uint8_t>(g_enc_mask_, R);
    be_.upload(d_ids, ids.data(), ids.size() * sizeof(std::int32_t));
    be_.upload(d_mask, mask.data(), mask.size());
    // context: chunk u's cs rows of the first CCA layer's stream, repeated for each of its k neighbours
    float* ctx = grow<float>(g_enc_ctx_, M * cs * Cd);
    for (int64_t j = 0; j < J; j++)
        for (int64_t n = 0; n < k_; n++)
            be_.copy(ctx + (j * k_ + n) * cs * Cd, ctx_.f() + (jobs[j].s * L_ + jobs[j].u * cs) * Cd,
                     static_cast<std::size_t>(cs * Cd) * sizeof(float));
    backend::Carver count;
    backend::carve_encoder(count, c_, M, r_);
    auto* arena = grow<char>(g_enc_arena_, static_cast<int64_t>(count.used));
    backend::Carver carver{arena};
    const auto acts = backend::carve_encoder(carver, c_, M, r_);
    float* E = grow<float>(g_E_, R * Cd);
    backend::encoder_forward(be_, E, acts, d_ids, d_mask, ctx, M, r_, p_, c_, table_view(rot_r_, r_, c_.rot_dim()),
                             table_view(rot_cs_, cs, c_.rot_dim()));
    // each CCA layer's keys and values of E_u (nn/chunked_cross_attention.h's cca_context_forward over all J
    // chunks), copied into each sequence's chunk slot
    const nn::RotaryView kr_view = table_view(rot_kr_, KR, c_.rot_dim());
    float* kv = grow<float>(g_enc_kv_, 2 * R * HD);
    for (std::size_t li = 0; li < p_.decoder.size(); li++) {
        const auto& L = p_.decoder[li];
        if (!L.has_cca) continue;
        be_.linear_forward(kv, E, L.cca.to_k, nullptr, R, Cd, HD);
        be_.rotary_forward(kv, kv, kr_view, J, KR, H, Dh);
        be_.linear_forward(kv + R * HD, E, L.cca.to_v, nullptr, R, Cd, HD);
        for (int64_t j = 0; j < J; j++) {
            const int64_t at = jobs[j].s * chunks_ + jobs[j].u;
            const std::size_t bytes = static_cast<std::size_t>(KR * HD) * sizeof(float);
            be_.copy(cca_k_[li].f() + at * KR * HD, kv + j * KR * HD, bytes);
            be_.copy(cca_v_[li].f() + at * KR * HD, kv + R * HD + j * KR * HD, bytes);
        }
    }
    for (int64_t j = 0; j < J; j++) {
        const int64_t at = jobs[j].s * chunks_ + jobs[j].u;
        be_.upload(static_cast<std::uint8_t*>(cca_mask_.get()) + at * KR, mask.data() + j * KR,
                   static_cast<std::size_t>(KR));
    }
    for (const auto& job : jobs) seqs_[static_cast<std::size_t>(job.s)].encoded = job.u + 1;
}

}  // namespace retro
