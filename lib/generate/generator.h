// `retro-generate`: prompts in, text out, retrieving for every finished chunk (RETRO.md C.2, ARCHITECTURE.md
// Decision 6). Loads a run (config.json + weights), the tokenizer, and with retrieval the index + db, checks
// they belong together, then decodes prompts in groups of --batch-size with a CachedDecoder:
//   ids = [bos] + encode(prompt); neighbours for every complete prompt chunk; one step over the prompt;
//   then per token: sample (generate/sampler.h), stop at eos or at the length limit; when the length becomes a
//   multiple of the chunk size, retrieve for that chunk (one search a sequence: batch invariance) before
//   the token is fed, so the chunk's last token already reads its neighbours (the chunk grid of B.6).
// Each prompt has its own random stream (seed, prompt index): its random numbers do not depend on the batch, and on
// the CPU nor do its logits (CachedDecoder is batch-invariant, and retrieval searches a prompt's chunks in a call of
// their own), so its text depends on nothing but the prompt and the seed; on a backend (the GPU) the prompts of a
// group share each GEMM, and only --batch-size 1 does that (docs/generate.md).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/cuda_device.h"
#include "generate/chunk_retriever.h"
#include "generate/sampler.h"
#include "nn/decode_weights_bf16.h"
#include "model/retro.h"
#include "nn/nn_backend.h"

namespace retro {

class Tokenizer;

struct GenerateOptions {
    std::string run;                 // run folder: config.json, model.safetensors, manifest.json
    std::string checkpoint;          // another .safetensors, or a checkpoint folder holding model.safetensors
    std::string index, db;           // retrieval (index optional with no_retrieval)
    std::string index_default_why;   // why the run's records gave no --index (retrieval_defaults.h), for the refusal
    std::string tokenizer;           // override; default: the db's tokenizer
    bool no_retrieval = false;
    bool allow_other_db = false;     // retrieve from a db other than the run's training db (same tokenizer)
    bool verify = true;              // re-hash the run's weights and index.faiss against their manifests
    std::int64_t max_tokens = 128;
    SamplerOptions sampler;
    std::uint64_t seed = 0;
    bool stop_at_eos = true;
    std::int64_t batch_size = 8;
    int nprobe = 0, ef_search = 0;
    std::string device = "cpu";      // cpu (CachedDecoder), cuda (BackendDecoder on the GPU; FAISS search stays on
                                     // the CPU), or host-backend (testing: BackendDecoder on the CPU ops)
    // with a backend device: decode steps as captured graphs (BackendDecoder::set_graphs); unset = on there (since
    // session 20, when the H200 ran them: the same text, ~12 % less time a token), set = asked for or refused
    std::optional<bool> cuda_graphs;
    // fp32 (exact), or bf16: on the CPU the decode step's linears read bf16 copies of the weights (half the bytes a
    // token reads; generate/cached_decoder.h), activations and sums stay fp32
    std::string dtype = "fp32";
};

struct ChunkNeighbours {
    std::int64_t chunk = 0;          // chunk index u in the sequence (positions u*cs .. u*cs + cs - 1, bos = 0)
    std::vector<std::int32_t> query; // the chunk's ids
    Retrieval found;
};

struct GenerateResult {
    std::string prompt, completion;
    std::vector<std::int32_t> prompt_ids, ids;   // prompt_ids starts with bos; ids = generated tokens
    std::string stop;                            // "eos", "max_tokens" or "max_seq_len"
    std::vector<ChunkNeighbours> neighbours;
};

struct GenerateCallbacks {
    // New text of prompt `i` as it grows (complete UTF-8 only).
    std::function<void(std::int64_t i, const std::string& text)> on_text;
    std::function<void(std::int64_t i, const ChunkNeighbours& n)> on_retrieval;
    std::function<void(std::int64_t i, const GenerateResult& r)> on_done;
};

// Bytes the CPU decoder takes: the weights, and per sequence decoded together the caches CachedDecoder keeps at full
// length (self-attention keys and values per decoder layer, the encoder context, the CCA keys and values of every
// chunk's k·r retrieved tokens per CCA layer) and a row of logits. retro-generate's and retro-bench generate's memory
// checks.
double decode_memory_bytes(const RetroConfig& c, std::int64_t batch);

class Generator {
public:
    explicit Generator(const GenerateOptions& o);
    ~Generator();
    const RetroConfig& config() const { return model_->config(); }
    const Tokenizer& tokenizer() const { return *tokenizer_; }
    const ChunkRetriever* retriever() const { return retriever_.get(); }
    bool retrieval() const { return retriever_ != nullptr; }

    // Decodes every prompt. UserError naming the first prompt that is empty or leaves no room to generate (its tokens
    // with bos reach max_seq_len), before any is decoded.
    std::vector<GenerateResult> generate(const std::vector<std::string>& prompts, const GenerateCallbacks& cb = {});
    // Where each prompt of the next generate() came from ("prompts.jsonl:3"), for its errors; default "prompt N".
    void set_prompt_names(std::vector<std::string> names) { prompt_names_ = std::move(names); }
    // The random stream of each prompt of the next generate() (default: its position): a resumed batch decodes the
    // prompts left with the streams they had in the whole file, so its text is the uninterrupted run's.
    void set_prompt_streams(std::vector<std::int64_t> streams) { prompt_streams_ = std::move(streams); }
    std::int64_t tokens_made() const { return tokens_made_; }
    std::int64_t retrievals() const { return retrievals_; }

private:
    std::vector<std::string> prompt_names_;
    std::vector<std::int64_t> prompt_streams_;
    // bos + the tokens of prompts[i], or UserError naming it (prompt_names_) when empty or too long
    std::vector<std::int32_t> prompt_ids(const std::vector<std::string>& prompts, std::int64_t i) const;
    // how errors name prompt i: its id in a prompts file, "prompt" for a single one, else "prompt N"
    std::string prompt_label(const std::vector<std::string>& prompts, std::int64_t i) const;
    void generate_group(const std::vector<std::string>& prompts, std::int64_t first, std::int64_t count,
                        std::vector<GenerateResult>& out, const GenerateCallbacks& cb);
    void setup_device();
    template <typename Decoder>
    void decode_group(Decoder& dec, const std::vector<std::string>& prompts, std::int64_t first, std::int64_t count,
                      std::vector<GenerateResult>& out, const GenerateCallbacks& cb);

    GenerateOptions o_;
    std::unique_ptr<RetroModel<float>> model_;
    std::unique_ptr<Tokenizer> tokenizer_;
    std::unique_ptr<ChunkRetriever> retriever_;
    std::unique_ptr<nn::DecodeWeightsBf16> bf16_weights_;   // --dtype bf16
    std::int64_t tokens_made_ = 0, retrievals_ = 0;
    // --device cuda / host-backend: the backend and the weights in its memory (destroyed in reverse)
    std::unique_ptr<CudaStreamOwner> stream_;
    std::unique_ptr<nn::NnBackend> backend_;
    nn::BackendBuffer weights_;
};

// The weights a Generator with options `o` reads: RUN/model.safetensors, or --checkpoint's (a folder's
// model.safetensors, or the file); UserError when there are none (an unfinished run or checkpoint).
std::string generate_weights_path(const GenerateOptions& o);

// The text a Generator shows for chunk `id` of db (decoded ids).
std::string chunk_text(const ChunkDb& db, const Tokenizer& tok, std::int64_t id);

}  // namespace retro
