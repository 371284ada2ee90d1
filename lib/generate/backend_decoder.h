// BackendDecoder: generate/cached_decoder.h's KV-cached RETRO inference over an nn::NnBackend (issue 21:
// `retro-generate --device cuda`), with the same interface and the same arithmetic (the model's layers of
// model/backend_layers.h on the new rows; logits equal a full recompute to fp32 rounding). Every cache lives in the
// backend's memory at full length, allocated once: per decoder layer the self-attention keys (rotated) and values
// [S, max_seq_len, HD]; per CCA layer each chunk's keys and values of its k·r retrieved tokens [S, chunks, k·r, HD]
// with one pad mask [S, chunks, k·r]; the first CCA layer's residual rows (the encoder's context) [S, max_seq_len,
// dec_dim]. A step is prepared (every host decision and upload: the new ids, their positions and rotary rows, the
// CCA selection, the copy head's candidates), then runs the layers on those buffers only (so a graph can replay it:
// set_graphs), and downloads the logits of the rows asked for; the FAISS search of the caller stays on the host, as
// does the copy head's candidate search (config copy_head: its gates are added on the backend).
// provides: BackendDecoder
#pragma once
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/layer_params.h"
#include "model/backend_layers.h"
#include "model/params.h"
#include "nn/decode_program.h"
#include "nn/nn_backend.h"

namespace retro {

struct DecodeRows;   // generate/decode_rows.h

class BackendDecoder {
public:
    // `params`: the model's weights in `be`'s memory (ParamLayout of `config`); both must outlive the decoder.
    BackendDecoder(const RetroConfig& config, const float* params, nn::NnBackend& be, std::int64_t sequences,
                   bool retrieval);
    BackendDecoder(const BackendDecoder&) = delete;
    BackendDecoder& operator=(const BackendDecoder&) = delete;

    // The bytes of backend memory the caches of `sequences` take (besides the weights and a step's buffers).
    static std::size_t cache_bytes(const RetroConfig& config, std::int64_t sequences, bool retrieval);
    // An upper bound on a step's buffers: every sequence fed max_seq_len tokens at once (the prompt step), and the
    // encoder over all their chunks.
    static std::size_t step_bytes_bound(const RetroConfig& config, std::int64_t sequences, bool retrieval);

    // CachedDecoder's interface (generate/cached_decoder.h), word for word.
    std::int64_t sequences() const { return static_cast<std::int64_t>(seqs_.size()); }
    bool retrieval() const { return retrieval_; }
    std::int64_t length(std::int64_t s) const { return seqs_[static_cast<std::size_t>(s)].n; }
    std::int64_t neighbour_chunks(std::int64_t s) const {
        return static_cast<std::int64_t>(seqs_[static_cast<std::size_t>(s)].retrieved.size()) / (k_ * r_);
    }
    void add_neighbours(std::int64_t s, const std::int32_t* retrieved);
    void reset(std::int64_t s);
    void step(const std::vector<std::vector<std::int32_t>>& tokens, bool all_logits = false);
    // [rows, num_tokens], on the host: downloaded at the first call after a step (a caller that only draws the next
    // tokens, sample_last, never downloads them)
    const std::vector<float>& logits() const;
    // ids[j] = the next token of sequence seqs[j] drawn from its last row's logits with uniform u[j] (unread when
    // o.greedy), on the backend (NnBackend::sample_rows: on the GPU only the ids come back). Each seqs[j] advanced in
    // the last step. Only ids below `vocab` are drawn (0: num_tokens; a tokenizer's vocabulary smaller than the
    // model's: ids it cannot decode are never drawn).
    void sample_last(const nn::SamplingParams& o, const std::vector<std::int64_t>& seqs, const std::vector<double>& u,
                     std::vector<std::int32_t>& ids, std::int64_t vocab = 0);
    std::int64_t last_row(std::int64_t s) const { return last_row_[static_cast<std::size_t>(s)]; }

    // Graphs (NnBackend::begin_capture; CUDA graphs on the GPU; off by default): a decode step in which every
    // advancing sequence feeds one row, its logits wanted and no chunk finishing, is captured once and replayed while
    // its key holds (the buffers, the rows' sequences and whether each reads a chunk), so a token
    // costs one graph launch instead of one launch per op. The text is the same as without.
    void set_graphs(bool on) { use_graphs_ = on; }
    std::int64_t graph_captures() const { return graph_captures_; }
    std::int64_t graph_launches() const { return graph_launches_; }
    // With graphs on, how a graph-eligible step runs (nn/decode_program.h): off (a captured graph), interpret (its
    // ops recorded and called one by one, each phase's in reverse order: the fused kernel's phases checked), fused
    // (the backend's one-kernel step, where it takes the recording; else a captured graph). Default:
    // RETRO_DECODE_PROGRAM's, else off. program_steps() counts the steps run from a recording (interpreted or
    // fused), fused_steps() those of them fused (graph_launches() counts captured graphs only); program_fallback()
    // says why the last recording was not fused ("" when it was). Where the device refuses a fused step's launch
    // (nn::FusedLaunchRefused: nothing ran), the decoder warns, runs the step as a captured graph and, in fused mode,
    // captures graphs from then on (program_fallback() names the refusal; the backend fuses nothing more, so later
    // decoders on it do not warn again). As a captured graph, a fused step bakes in the
    // backend's state when it is made (the GEMM-input mode, the device): change neither while decoding.
    void set_decode_program(nn::DecodeProgramMode m) {
        if (m == program_mode_) return;
        program_mode_ = m;
        graph_.reset();   // the replay made in the other mode
        program_.reset();
    }
    nn::DecodeProgramMode decode_program() const { return program_mode_; }
    std::int64_t program_steps() const { return program_steps_; }
    std::int64_t fused_steps() const { return fused_steps_; }
    const std::string& program_fallback() const { return program_why_; }
    // the last recording's op count and grid barriers (nn::decode_barriers: phases after the first); 0 before one
    std::int64_t program_ops() const { return program_ops_; }
    std::int64_t program_barriers() const { return program_barriers_; }
    // The last step's replay (its graph, fused step or interpreted program) launched `times` more times back to back,
    // timed between two synchronizes: seconds per replay, the device's time for a step without the host's work
    // between tokens (preparing, uploading, drawing, downloading). Replaying is idempotent (the same inputs: the
    // same cache rows rewritten with the same values, the same outputs). -1 when the last step was not replayed.
    double time_replays(int times);

private:
    struct Sequence {
        std::int64_t n = 0;                      // positions fed so far
        std::vector<std::int32_t> retrieved;     // [chunks, k, r]
        std::int64_t encoded = 0;                // chunks whose keys/values are in the CCA caches
        std::vector<std::int32_t> tokens;        // config copy_head: the ids fed so far (the head's history)
    };
    // A grow-only buffer in backend memory.
    struct Grow {
        nn::BackendBuffer buf;
        std::size_t bytes = 0;
    };
    // What a step's compute reads, decided and uploaded by prepare_step (backend_decoder.cpp).
    struct StepPlan {
        struct Segment {   // CCA rows of one (sequence, chunk), consecutive in the selection
            std::int64_t first, rows, s, u;
        };
        std::int64_t R = 0, Rs = 0, out_rows = 0;            // rows fed, rows that read a chunk, rows with logits
        std::vector<std::int64_t> row_begin, n0;             // per sequence: its rows; positions fed before the step
        bool one_row_each = false, encode = false;           // attention_decode; a chunk finishes (encoder runs)
        bool cca_every_row = false;                          // every row reads a chunk: sel and unsel are 0..R-1
        bool pick_every_row = false;                         // the logits' rows are 0..R-1: pick is the identity
        std::int32_t* ids = nullptr;
        std::int64_t *pos = nullptr, *seq = nullptr, *ctx_rows = nullptr, *sel = nullptr, *unsel = nullptr,
                     *pick = nullptr;
        std::int64_t *cca_slot = nullptr, *cca_last = nullptr;   // a decode step's CCA: each selected row's chunk slot
                                                                  // and last key (attention_decode); null otherwise
        nn::CopyCandidate* cand = nullptr;                   // config copy_head: [out_rows, k]
        nn::RotaryView rot, qrot;                            // rows at their positions; CCA queries
        std::vector<Segment> segments;
        float *e = nullptr, *x = nullptr, *xn = nullptr, *norm = nullptr, *y = nullptr, *x1 = nullptr, *x2 = nullptr,
              *q = nullptr, *o = nullptr, *xs = nullptr, *ys = nullptr, *probs = nullptr, *lg = nullptr;
        float* decode_ws = nullptr;                          // attention_decode's workspace (one_row_each)
        std::uint32_t* decode_counters = nullptr;            // and its counters (zero between calls)
        backend::FfSaved ff;
        std::optional<std::vector<std::int64_t>> graph_key;   // set when a graph can run the step
    };
    // A step's inputs packed into one host block, each piece 256-byte aligned (one upload a step).
    struct StepBlock {
        std::vector<char> bytes;
        template <typename T>
        std::size_t add(const T* data, std::int64_t count) {
            const std::size_t at = (bytes.size() + 255) / 256 * 256, n = static_cast<std::size_t>(count) * sizeof(T);
            bytes.resize(at + n);
            if (n) std::memcpy(bytes.data() + at, data, n);
            return at;
        }
    };
    template <typename T>
    T* grow(Grow& g, std::int64_t count);
    void prepare_step(const DecodeRows& rows, bool all_logits);
    // the step's compute on `ops`: the backend, or a DecodeProgramRecorder listing it
    template <class Ops>
    void run_step(Ops& ops);
    void encode_finished_chunks(const std::vector<std::int64_t>& row_begin);
    template <class Ops>
    void cca_rows(Ops& ops, float* out, const float* x, const DecoderLayerParams<float>& L, std::size_t layer);
    // a graph-eligible step's replay: made (captured, or recorded and fused) when its key is new
    void make_replay();
    bool launch_fused_step();

    RetroConfig c_;
    nn::NnBackend& be_;
    RetroParams<float> p_;
    bool retrieval_ = false;
    std::int64_t k_ = 0, r_ = 0, first_cca_ = -1, L_ = 0, chunks_ = 0;
    std::vector<Sequence> seqs_;
    std::vector<nn::BackendBuffer> kc_, vc_, cca_k_, cca_v_;   // per decoder layer (CCA ones only for CCA layers)
    nn::BackendBuffer cca_mask_, ctx_, rot_r_, rot_cs_, rot_kr_;
    std::vector<std::int64_t> row_seq_, row_pos_;
    mutable std::vector<float> logits_;
    mutable bool logits_pending_ = false;   // a step's logits not yet downloaded into logits_
    std::vector<std::int64_t> last_row_;
    Grow g_e_, g_x_, g_xn_, g_norm_, g_y_, g_x1_, g_x2_, g_q_, g_o_, g_g_, g_probs_,
        g_xs_, g_ys_, g_logits_, g_enc_ids_, g_enc_mask_, g_enc_ctx_, g_E_,
        g_enc_arena_, g_enc_kv_, g_step_, g_decode_ws_, g_decode_counters_;
    std::uint64_t grow_epoch_ = 0;   // counts reallocations (a graph's buffer addresses are in its key)
    StepPlan plan_;
    bool use_graphs_ = false;
    std::unique_ptr<nn::BackendGraph> graph_;   // declared after the buffers it uses: released first
    std::vector<std::int64_t> graph_key_;
    std::int64_t graph_captures_ = 0, graph_launches_ = 0;
    nn::DecodeProgramMode program_mode_ = nn::DecodeProgramMode::off;
    std::optional<nn::DecodeProgram> program_;   // the interpreted recording (interpret mode), for graph_key_
    std::string program_why_;
    std::string fused_refused_;   // the device's refusal of a fused step's launch: graphs from then on
    std::int64_t program_steps_ = 0, fused_steps_ = 0, program_ops_ = 0, program_barriers_ = 0;
    bool replay_fused_ = false;   // graph_ is the backend's fused step
};

}  // namespace retro
