#include "generate/generator.h"

#include <algorithm>
#include <filesystem>

#include "core/error.h"
#include "core/fingerprint.h"
#include "core/heap.h"
#include "core/log.h"
#include "core/manifest.h"
#include "data/run_tokenizer.h"
#include "core/memory_budget.h"
#include "core/output_folder.h"
#include "generate/backend_decoder.h"
#include "generate/cached_decoder.h"
#include "generate/next_tokens.h"
#include "nn/nn_backend_cuda.h"
#include "nn/nn_backend_host.h"
#include "model/params.h"
#include "text/tokenizer.h"
#include "text/tokenizer_folder.h"

namespace fs = std::filesystem;

namespace retro {

namespace {


// Holds back a trailing incomplete character (a byte-fallback sequence still being generated decodes to
// U+FFFD) so streamed text is never taken back.
std::size_t stable_prefix(const std::string& s) {
    static const std::string repl = "\xEF\xBF\xBD";
    std::size_t end = s.size();
    while (end >= repl.size() && s.compare(end - repl.size(), repl.size(), repl) == 0) end -= repl.size();
    return end;
}

std::vector<int> as_int(const std::vector<std::int32_t>& v) { return {v.begin(), v.end()}; }

// A retrieved neighbour's ids within the model's vocabulary [0, V), else the database's row named: a chunks.npy
// rewritten while retro-generate read it said only "neighbours: retrieved token id 34915 outside the vocabulary"
// (a helper's audit, session 69). `tokens`: the k neighbours' r ids each (a row, then its continuation row).
void retrieved_ids_check(const std::int32_t* tokens, const Retrieval& found, std::int64_t r, std::int64_t V,
                         const ChunkDb& db) {
    for (std::size_t n = 0; n < found.ids.size(); ++n)
        for (std::int64_t t = 0; t < r; ++t) {
            const std::int32_t id = tokens[static_cast<std::int64_t>(n) * r + t];
            if (id >= 0 && id < V) continue;
            // (the row or its continuation: under "match" alignment the window starts inside the row, so which of the
            // two is not said)
            user_error_in((fs::path(db.dir()) / "chunks.npy").string(),
                          cat("the neighbour at row ", found.ids[n], " (or its continuation, the row after) holds token id ", id,
                              ", outside the model's vocabulary [0, ", V, ")"),
                          "retrieve from the database the model was trained with, as it was made (make it again with "
                          "retro-chunk if it was changed)");
        }
}

}  // namespace

std::string generate_weights_path(const GenerateOptions& o) {
    if (o.checkpoint.empty()) {
        const fs::path p = fs::path(o.run) / "model.safetensors";
        if (!fs::exists(p))
            user_error_in(o.run, "has no model.safetensors (training not finished?)",
                          "pass --checkpoint RUN/checkpoints/step_N (the latest with a DONE file)");
        return p.string();
    }
    if (fs::is_directory(o.checkpoint)) {
        const fs::path p = fs::path(o.checkpoint) / "model.safetensors";
        if (!fs::exists(p)) user_error_in(o.checkpoint, "holds no model.safetensors", "pass a checkpoint folder or a .safetensors file");
        if (fs::exists(fs::path(o.checkpoint) / "state.json") && !fs::exists(fs::path(o.checkpoint) / "DONE"))
            user_error_in(o.checkpoint, "is an unfinished checkpoint (no DONE file)", "pass an earlier checkpoint");
        return p.string();
    }
    if (!fs::exists(o.checkpoint)) user_error_in(o.checkpoint, "does not exist");
    return o.checkpoint;
}

std::string chunk_text(const ChunkDb& db, const Tokenizer& tok, std::int64_t id) {
    std::vector<std::int32_t> ids;
    db.rows(id, id + 1, ids);
    return tok.decode(as_int(ids));
}

Generator::~Generator() = default;

double decode_memory_bytes(const RetroConfig& c, std::int64_t batch) {
    double cca_layers = 0;
    for (std::int64_t l = 1; l <= c.dec_depth; ++l) cca_layers += c.dec_has_cross(l) ? 1 : 0;
    const double T = double(c.max_seq_len), I = double(c.inner_dim());
    const double chunks = T / double(c.chunk_size), kr = double(c.num_neighbours) * double(c.retrieved_len());
    const double per_seq = double(c.dec_depth) * T * I * 2 + T * double(c.dec_dim) + cca_layers * chunks * kr * I * 2 +
                           double(c.num_tokens);
    return (double(ParamLayout(c).total()) + double(batch) * per_seq) * 4;
}

// --device cuda / host-backend: the backend, the weights uploaded once, and the GPU's memory checked for the caches
// of a group of --batch-size sequences (generate/backend_decoder.h).
void Generator::setup_device() {
    const RetroConfig& c = model_->config();
    const std::size_t need = model_->params().size() * sizeof(float) +
                             BackendDecoder::cache_bytes(c, o_.batch_size, !o_.no_retrieval) +
                             BackendDecoder::step_bytes_bound(c, o_.batch_size, !o_.no_retrieval);
    if (o_.device == "cuda") {
        cuda_require("--device", "retro-generate", "generate on the CPU (--device cpu)");
        if constexpr (kCudaBuilt) {
            if (need > cuda_free_bytes())
                user_error_in("--batch-size", cat("decoding ", o_.batch_size, " sequences of up to ", c.max_seq_len,
                                                  " tokens needs ", memory_format_bytes(double(need)),
                                                  " on the GPU (weights, caches, a prompt step's buffers), the GPU has ",
                                                  memory_format_bytes(double(cuda_free_bytes())), " free"),
                              "a smaller --batch-size");
            stream_ = std::make_unique<CudaStreamOwner>();
            backend_ = nn::cuda_nn_backend(stream_->get());
        }
    } else if (o_.device == "host-backend") {
        backend_ = std::make_unique<nn::HostNnBackend>();
    } else {
        user_error_in("--device", "\"" + o_.device + "\" is not a device", "use cpu or cuda");
    }
    weights_ = nn::BackendBuffer(*backend_, model_->params().size() * sizeof(float));
    backend_->upload(weights_.get(), model_->params().data(), model_->params().size() * sizeof(float));
}

Generator::Generator(const GenerateOptions& o) : o_(o) {
    if (o.max_tokens < 1) user_error_in("--max-tokens", "must be at least 1");
    heap_keep_freed_memory();   // every token frees and reallocates the same step buffers
    if (o.batch_size < 1) user_error_in("--batch-size", "must be at least 1");
    if (o.cuda_graphs.value_or(false) && o.device == "cpu")
        user_error_in("--cuda-graphs", "runs the GPU decoder", "add --device cuda");
    sampler_validate(o.sampler);
    if (o.dtype != "fp32" && o.dtype != "bf16") user_error_in("--dtype", "'" + o.dtype + "' is not fp32 or bf16");
    if (o.dtype == "bf16" && o.device != "cpu")
        user_error_in("--dtype bf16", "reads bf16 weights in the CPU decoder; the GPU decoder runs fp32 weights",
                      "drop --dtype, or decode on the CPU");
    if (o.dtype == "bf16" && !nn::bf16_decode_available())
        user_error_in("--dtype bf16", "needs a CPU with AVX-512 (F, BW, VL) or AVX2 and FMA, which this one lacks", "drop --dtype");
    const fs::path config_path = fs::path(o.run) / "config.json";
    if (!fs::exists(o.run)) user_error_in(o.run, "does not exist", "pass a run folder written by retro-train");
    if (!fs::is_directory(o.run)) user_error_in(o.run, "is a file, not a run folder", "pass the folder retro-train wrote");
    if (!fs::exists(config_path))
        user_error_in(o.run, "has no config.json", "pass a run folder written by retro-train");
    if (o.checkpoint.empty()) refuse_unfinished_run(o.run, "--checkpoint");
    // before the config sizes anything: an edited num_tokens is named as a changed file, not as a memory shortfall
    if (o.verify && o.checkpoint.empty()) manifest_verify_outputs_if_any(o.run, {"config.json", "model.safetensors"});
    if (o.verify && !o.checkpoint.empty())   // (its folder, or its model.safetensors named as a file)
        named_weights_verify(fs::is_directory(o.checkpoint) ? (fs::path(o.checkpoint) / "model.safetensors").string()
                                                            : o.checkpoint);
    const RetroConfig config = RetroConfig::load(config_path.string());
    memory_require("--batch-size", o.device == "cpu" ? decode_memory_bytes(config, o.batch_size) +
                                                           (o.dtype == "bf16" ? double(ParamLayout(config).total()) * 2 : 0.0)
                                                     : double(ParamLayout(config).total()) * 4,   // caches on the GPU
                   "decoding " + std::to_string(o.batch_size) + " sequences of up to " + std::to_string(config.max_seq_len) +
                       " tokens together",
                   "a smaller --batch-size");
    model_ = std::make_unique<RetroModel<float>>(config);
    const std::string weights_path = generate_weights_path(o);
    params_load(weights_path, model_->params(), model_->layout(), config);
    // a --checkpoint of another run (or its folder's weights named as a file) is held to what its own records say, as
    // the run folder is below: a checkpoint's state.json (retrieval, tokenizer), a run's manifest (retrieval)
    const fs::path holder = fs::path(weights_path).parent_path();
    nlohmann::json ck_state, ck_manifest;
    if (!o.checkpoint.empty() && fs::exists(holder / "state.json")) ck_state = json_read_file((holder / "state.json").string());
    if (!o.checkpoint.empty() && fs::exists(holder / "manifest.json")) ck_manifest = manifest_read(holder.string());
    if (o.dtype == "bf16") {
        bf16_weights_ = linear_weights_bf16(*model_);
    }
    if (o.device != "cpu") setup_device();

    // which databases and tokenizer the run was trained with
    nlohmann::json run_manifest;
    if (fs::exists(fs::path(o.run) / "manifest.json")) run_manifest = manifest_read(o.run);
    const std::string run_db_fp = manifest_input(run_manifest, "db", "fingerprint");
    const std::string run_db_path = manifest_input(run_manifest, "db", "path");
    nlohmann::json run_db_manifest;
    if (!run_db_path.empty() && fs::exists(fs::path(run_db_path) / "manifest.json"))
        run_db_manifest = manifest_read(run_db_path);

    nlohmann::json db_manifest;
    if (!o.db.empty()) {
        db_manifest = manifest_read(o.db);
        if (const std::string tool = db_manifest.value("tool", ""); tool != "retro-chunk")
            user_error_in((fs::path(o.db) / "manifest.json").string(),
                          "was written by " + (tool.empty() ? std::string("an unknown tool") : tool) + ", not retro-chunk",
                          "pass the chunk database (retro-chunk's folder) as --db and the index as --index");
        const auto cs = db_manifest.value("parameters", nlohmann::json::object()).value("chunk_size", 0);
        if (cs != config.chunk_size)
            user_error_in(o.db, cat("has chunk size ", cs, "; the model (", config_path.string(), ") uses ",
                                    config.chunk_size),
                          run_db_path.empty() ? cat("pass a database chunked with --chunk-size ", config.chunk_size)
                                              : cat("pass the run's database (", run_db_path,
                                                    ") or one chunked with --chunk-size ", config.chunk_size));
        if (!run_db_fp.empty() && folder_fingerprint(db_manifest) != run_db_fp) {
            const std::string run_tok = db_tokenizer_fingerprint(run_db_manifest);
            // the training database itself, made again since (another run's --force): said so, not "another database"
            const bool same_folder = !run_db_path.empty() && path_resolved(o.db) == path_resolved(run_db_path);
            if (!run_tok.empty() && run_tok != db_tokenizer_fingerprint(db_manifest))
                user_error_in(o.db, same_folder ? "was made again with another tokenizer since " + o.run + " was trained on it"
                                                : "uses another tokenizer than the database " + o.run + " was trained on (" +
                                                      run_db_path + ")",
                              same_folder ? "make it again with the tokenizer the run was trained with, or pass a database "
                                            "chunked with it"
                                          : "pass the run's database, or a database chunked with the same tokenizer");
            if (run_tok.empty() && !o.allow_other_db)
                user_error_in(o.db, "is not the database " + o.run + " was trained on (fingerprints differ; " +
                                        (run_db_path.empty()          ? std::string("the run records no database")
                                         : run_db_manifest.is_null() ? run_db_path + " cannot be read to compare tokenizers"
                                                                     : run_db_path + " records no tokenizer to compare") +
                                        ")",
                              "pass the run's database, or --allow-other-db if this one uses the same tokenizer");
            log_info(same_folder ? "retrieving from " + o.db + ", made again since " + o.run + " was trained on it (same tokenizer)"
                                 : "retrieving from " + o.db + ", not the training database (same tokenizer)");
        }
    }

    std::string tok_path = o.tokenizer;
    if (tok_path.empty() && !db_manifest.is_null()) tok_path = manifest_input(db_manifest, "tokenizer", "path");
    if (tok_path.empty() && !run_db_manifest.is_null()) tok_path = manifest_input(run_db_manifest, "tokenizer", "path");
    if (tok_path.empty()) user_error_in("--tokenizer", "no tokenizer known", "pass --db (its tokenizer is used) or --tokenizer");
    tok_path = tokenizer_resolve_path(tok_path);
    if (!fs::exists(tok_path)) tokenizer_refuse_missing_unfinished(tok_path);   // a training stopped before the model
    if (o.tokenizer.empty() && !fs::exists(tok_path))   // recorded by the database's manifest, moved since
        user_error_in(tok_path, "does not exist: the tokenizer the database's manifest names has moved or was removed",
                      "pass --tokenizer with where it is now");
    const std::string tok_fp_expected =
        !db_manifest.is_null() ? db_tokenizer_fingerprint(db_manifest) : db_tokenizer_fingerprint(run_db_manifest);
    const std::string tok_fp = fingerprint_file(tok_path);
    if (!tok_fp_expected.empty() && tok_fp != tok_fp_expected) {
        if (o.tokenizer.empty())   // the one the database records, retrained or replaced since (as retro-chunk says it)
            user_error_in(tok_path, "has changed since the database was chunked with it (retrained or replaced)",
                          "make the database again with it (retro-chunk --force), or restore the tokenizer it was made with");
        user_error_in(tok_path, "is not the tokenizer the database was chunked with (fingerprint differs)",
                      "pass the database's tokenizer, or leave --tokenizer out (the one the database records is used)");
    }
    if (ck_state.is_object() && ck_state.contains("tokenizer_fingerprint") && ck_state["tokenizer_fingerprint"].is_string() &&
        !ck_state["tokenizer_fingerprint"].get<std::string>().empty() && ck_state["tokenizer_fingerprint"] != tok_fp)
        user_error_in(o.checkpoint, "was trained on the ids of another tokenizer than " + tok_path +
                                        " (its state.json's tokenizer_fingerprint)",
                      "pass the database (or --tokenizer) the checkpoint's run was trained with");
    // the fingerprint the database (or the checkpoint) records, which tok_fp was held to: an old model a stopped
    // retro-tokenizer --force left is still read (text/tokenizer_folder.h)
    std::string ck_tok_fp;
    if (ck_state.is_object() && ck_state.contains("tokenizer_fingerprint") && ck_state["tokenizer_fingerprint"].is_string())
        ck_tok_fp = ck_state["tokenizer_fingerprint"].get<std::string>();
    tokenizer_ = std::make_unique<Tokenizer>(tok_path, !tok_fp_expected.empty() ? tok_fp_expected : ck_tok_fp);
    if (tokenizer_->vocab_size() > config.num_tokens)
        user_error_in(tok_path, cat("has ", tokenizer_->vocab_size(), " pieces; the model's num_tokens is ",
                                    config.num_tokens));

    if (!o.no_retrieval) {
        // a run trained without retrieval has CCA layers and an encoder that never learnt (retro-train --no-retrieval);
        // retrieving through them would only add noise to its text
        const nlohmann::json* run_params =
            run_manifest.is_object() && run_manifest.contains("parameters") ? &run_manifest["parameters"] : nullptr;
        if (run_params && run_params->is_object() && run_params->contains("no_retrieval") &&
            (*run_params)["no_retrieval"] == true)
            user_error_in(o.run, "was trained with --no-retrieval: its CCA layers and encoder are untrained",
                          "add --no-retrieval, or retro-fit it with retrieval first (retro-train --init-from " + o.run + ")");
        const bool ck_untrained =
            (ck_state.is_object() && ck_state.value("no_retrieval", false) == true) ||
            (ck_manifest.is_object() && ck_manifest.value("parameters", nlohmann::json::object()).value("no_retrieval", false) == true);
        if (ck_untrained)
            user_error_in(o.checkpoint, "was trained with --no-retrieval: its CCA layers and encoder are untrained",
                          "add --no-retrieval, or pass a checkpoint of a run trained with retrieval");
        if (o.index.empty() || o.db.empty())   // (generate_run fills both from the run's records where it can)
            user_error_in("--index", "retrieval needs an index and its database, and " + o.run +
                                         "'s records lead to none (" +
                                         (o.index_default_why.empty() ? "its neighbours folder, or the index they were "
                                                                        "searched in, is not there"
                                                                      : o.index_default_why) + ")",
                          "pass --index and --db, or --no-retrieval");
        if (config.first_cca_layer() == 0) {
            log_warn("the model has no CCA layers: generating without retrieval");
        } else {
            RetrieverOptions ro;
            ro.index = o.index;
            ro.db = o.db;
            ro.verify = o.verify;
            ro.k = static_cast<int>(config.num_neighbours);
            ro.nprobe = o.nprobe;
            ro.ef_search = o.ef_search;
            ro.alignment = neighbour_alignment_from_string(config.neighbour_alignment);
            ro.min_match = static_cast<int>(config.neighbour_min_match);
            ro.pad = config.pad_id;
            retriever_ = std::make_unique<ChunkRetriever>(ro, tokenizer_.get());
        }
    }
    // Weights from outside RetroKit (a run folder of config.json alone beside a RETRO-pytorch state_dict): nothing
    // records the ids they were trained on, and another tokenizer's ids read here as other words — RP's own data
    // pipeline uses bert-base-cased ids, which no RetroKit tokenizer gives (docs/retro-pytorch.md). Said last, once
    // nothing more can be refused (a refusal is one line).
    const bool ids_recorded = run_manifest.is_object() || ck_manifest.is_object() ||
                              (ck_state.is_object() && ck_state.contains("tokenizer_fingerprint"));
    if (!ids_recorded) outside_weights_warning(o.run, tok_path, tokenizer_->vocab_size(), config.num_tokens);
}

std::string Generator::prompt_label(const std::vector<std::string>& prompts, std::int64_t i) const {
    const auto at = static_cast<std::size_t>(i);
    return at < prompt_names_.size() ? prompt_names_[at] : prompts.size() == 1 ? std::string("prompt") : cat("prompt ", i + 1);
}

std::vector<std::int32_t> Generator::prompt_ids(const std::vector<std::string>& prompts, std::int64_t i) const {
    const auto at = static_cast<std::size_t>(i);
    const std::string where = prompt_label(prompts, i);
    if (prompts[at].empty()) user_error_in(where, "is empty", "give some text to continue");
    // Refused by its size before it is tokenised: sentencepiece's lattice over a long text takes ~200 bytes of memory
    // a byte (a 10 MB prompt cost 2.5 GB and 4 s before its token count refused it; 100 MB would not fit). No text of
    // max_seq_len tokens is longer than this: a piece is at most 16 characters (64 bytes), times 4 for the runs of
    // whitespace the normaliser folds into one.
    const std::int64_t byte_cap = std::max<std::int64_t>(std::int64_t(1) << 20, config().max_seq_len * 64 * 4);
    if (static_cast<std::int64_t>(prompts[at].size()) > byte_cap)
        user_error_in(where, cat("is ", prompts[at].size(), " bytes, more than retro-generate tokenises for a model of max_seq_len ",
                                 config().max_seq_len, " (", byte_cap, " bytes: 256 a token)"),
                      "shorten the prompt");
    const auto ids = tokenizer_->encode(prompts[at]);
    std::vector<std::int32_t> out;
    out.reserve(ids.size() + 1);
    out.push_back(TOKEN_BOS);
    out.insert(out.end(), ids.begin(), ids.end());
    const std::int64_t n = static_cast<std::int64_t>(out.size());
    if (n >= config().max_seq_len)
        user_error_in(where, cat("has ", n, " tokens (with bos); the model's max_seq_len is ", config().max_seq_len,
                                 ", which leaves no room to generate"),
                      "shorten the prompt");
    return out;
}

std::vector<GenerateResult> Generator::generate(const std::vector<std::string>& prompts, const GenerateCallbacks& cb) {
    std::vector<GenerateResult> out(prompts.size());
    const std::int64_t P = static_cast<std::int64_t>(prompts.size());
    // every prompt encoded and checked before the first is decoded: one bad line late in a file ends the run at once,
    // not part way
    for (std::int64_t i = 0; i < P; i++) out[static_cast<std::size_t>(i)].prompt_ids = prompt_ids(prompts, i);
    for (std::int64_t first = 0; first < P; first += o_.batch_size)
        generate_group(prompts, first, std::min(o_.batch_size, P - first), out, cb);
    return out;
}

void Generator::generate_group(const std::vector<std::string>& prompts, std::int64_t first, std::int64_t count,
                               std::vector<GenerateResult>& out, const GenerateCallbacks& cb) {
    if (backend_) {
        BackendDecoder dec(config(), weights_.f(), *backend_, count, retrieval());
        dec.set_graphs(o_.cuda_graphs.value_or(true));
        decode_group(dec, prompts, first, count, out, cb);
    } else {
        CachedDecoder<float> dec(*model_, count, retrieval(), bf16_weights_.get());
        decode_group(dec, prompts, first, count, out, cb);
    }
}

template <typename Decoder>
void Generator::decode_group(Decoder& dec, const std::vector<std::string>& prompts, std::int64_t first,
                             std::int64_t count, std::vector<GenerateResult>& out, const GenerateCallbacks& cb) {
    const RetroConfig& c = config();
    const std::int64_t cs = c.chunk_size, V = c.num_tokens, k = c.num_neighbours, r = c.retrieved_len();
    const std::int64_t vocab = std::min<std::int64_t>(V, tokenizer_->vocab_size());
    std::vector<std::vector<std::int32_t>> seq(static_cast<std::size_t>(count)), feed(seq.size());
    std::vector<std::int64_t> limit(seq.size());
    std::vector<SplitMix64> rng;
    std::vector<std::string> base_text(seq.size());
    std::vector<std::size_t> shown(seq.size(), 0);
    for (std::int64_t s = 0; s < count; s++) {
        const std::int64_t i = first + s;
        auto& res = out[static_cast<std::size_t>(i)];
        res.prompt = prompts[static_cast<std::size_t>(i)];
        const std::int64_t n = static_cast<std::int64_t>(res.prompt_ids.size());
        seq[static_cast<std::size_t>(s)] = res.prompt_ids;
        limit[static_cast<std::size_t>(s)] = std::min(n + o_.max_tokens, c.max_seq_len);
        const std::int64_t stream =
            static_cast<std::size_t>(i) < prompt_streams_.size() ? prompt_streams_[static_cast<std::size_t>(i)] : i;
        rng.emplace_back(o_.seed * 0x9E3779B97F4A7C15ULL + static_cast<std::uint64_t>(stream));
        base_text[static_cast<std::size_t>(s)] = tokenizer_->decode(as_int(res.prompt_ids));
    }

    // neighbours for the chunks listed (sequence, chunk; a sequence's chunks together), searched a sequence at a time:
    // the calls a prompt decoded alone makes, so its neighbours do not depend on the batch (the embedder pads a batch
    // to its longest chunk, FAISS's exhaustive search switches to sgemm from 20 queries)
    auto retrieve_one = [&](const std::pair<std::int64_t, std::int64_t>* todo, std::int64_t n) {
        std::vector<std::int32_t> chunks(static_cast<std::size_t>(n * cs)), tokens(static_cast<std::size_t>(n * k * r));
        for (std::int64_t j = 0; j < n; j++) {
            const auto& q = seq[static_cast<std::size_t>(todo[j].first)];
            std::copy_n(q.begin() + todo[j].second * cs, cs, chunks.begin() + j * cs);
        }
        std::vector<Retrieval> found;
        retriever_->retrieve(chunks.data(), n, tokens.data(), found);
        retrievals_ += n;
        for (std::int64_t j = 0; j < n; j++) {
            const std::int64_t s = todo[j].first;
            retrieved_ids_check(tokens.data() + j * k * r, found[static_cast<std::size_t>(j)], r, V, retriever_->db());
            dec.add_neighbours(s, tokens.data() + j * k * r);
            ChunkNeighbours cn;
            cn.chunk = todo[j].second;
            cn.query.assign(chunks.begin() + j * cs, chunks.begin() + (j + 1) * cs);
            cn.found = std::move(found[static_cast<std::size_t>(j)]);
            if (cb.on_retrieval) cb.on_retrieval(first + s, cn);
            out[static_cast<std::size_t>(first + s)].neighbours.push_back(std::move(cn));
        }
    };
    auto retrieve = [&](const std::vector<std::pair<std::int64_t, std::int64_t>>& todo) {
        for (std::size_t a = 0; a < todo.size();) {
            std::size_t e = a;
            while (e < todo.size() && todo[e].first == todo[a].first) e++;
            retrieve_one(todo.data() + a, static_cast<std::int64_t>(e - a));
            a = e;
        }
    };

    std::vector<std::pair<std::int64_t, std::int64_t>> todo;
    if (retrieval())
        for (std::int64_t s = 0; s < count; s++)
            for (std::int64_t u = 0; u < static_cast<std::int64_t>(seq[static_cast<std::size_t>(s)].size()) / cs; u++)
                todo.push_back({s, u});
    retrieve(todo);
    dec.step(seq);

    std::vector<std::uint8_t> active(seq.size(), 1);
    std::vector<std::int64_t> drawing;   // the active sequences, each advanced by the last step
    std::vector<std::int32_t> drawn(seq.size(), -1), ids;
    for (;;) {
        todo.clear();
        bool any = false;
        // every active sequence's next token at once, where the logits are (on the GPU only the ids come back)
        drawing.clear();
        for (std::int64_t s = 0; s < count; s++)
            if (active[static_cast<std::size_t>(s)]) drawing.push_back(s);
        // (only ids the tokenizer has: a model trained with a tokenizer smaller than its num_tokens can still give the
        // ids beyond some probability)
        next_tokens(dec, V, vocab, o_.sampler, drawing,
                    [&](std::int64_t s) { return rng[static_cast<std::size_t>(s)].uniform(); }, ids);
        for (std::size_t j = 0; j < drawing.size(); j++) {
            if (ids[j] < 0 || ids[j] >= vocab)   // a row of logits that is not finite (nn::sample_row, next_tokens)
                user_error_in(generate_weights_path(o_),
                              cat("gives logits that are not finite (NaN or infinite) for ",
                                  prompt_label(prompts, first + drawing[j]), " after ",
                                  out[static_cast<std::size_t>(first + drawing[j])].ids.size(), " generated tokens"),
                              "the weights are damaged or training diverged: check the run's losses, or use an earlier "
                              "checkpoint");
            drawn[static_cast<std::size_t>(drawing[j])] = ids[j];
        }
        for (std::int64_t s = 0; s < count; s++) {
            auto& f = feed[static_cast<std::size_t>(s)];
            f.clear();
            if (!active[static_cast<std::size_t>(s)]) continue;
            auto& q = seq[static_cast<std::size_t>(s)];
            auto& res = out[static_cast<std::size_t>(first + s)];
            const std::int32_t t = drawn[static_cast<std::size_t>(s)];
            if (t == TOKEN_EOS && o_.stop_at_eos) {
                res.stop = "eos";
                active[static_cast<std::size_t>(s)] = 0;
                continue;
            }
            q.push_back(t);
            res.ids.push_back(t);
            tokens_made_++;
            if (cb.on_text) {
                const std::string full = tokenizer_->decode(as_int(q));
                const std::string& base = base_text[static_cast<std::size_t>(s)];
                const std::string completion =
                    full.compare(0, base.size(), base) == 0 ? full.substr(base.size()) : tokenizer_->decode(as_int(res.ids));
                const std::size_t stable = stable_prefix(completion);
                auto& sh = shown[static_cast<std::size_t>(s)];
                if (stable > sh) {
                    cb.on_text(first + s, completion.substr(sh, stable - sh));
                    sh = stable;
                }
            }
            const std::int64_t n = static_cast<std::int64_t>(q.size());
            if (n >= limit[static_cast<std::size_t>(s)]) {
                res.stop = n >= c.max_seq_len && static_cast<std::int64_t>(res.ids.size()) < o_.max_tokens ? "max_seq_len" : "max_tokens";
                active[static_cast<std::size_t>(s)] = 0;
                continue;
            }
            f.push_back(t);
            any = true;
            if (retrieval() && n % cs == 0) todo.push_back({s, n / cs - 1});
        }
        if (!any) break;
        retrieve(todo);
        dec.step(feed);
    }
    for (std::int64_t s = 0; s < count; s++) {
        auto& res = out[static_cast<std::size_t>(first + s)];
        const std::string full = tokenizer_->decode(as_int(seq[static_cast<std::size_t>(s)]));
        const std::string& base = base_text[static_cast<std::size_t>(s)];
        res.completion = full.compare(0, base.size(), base) == 0 ? full.substr(base.size()) : tokenizer_->decode(as_int(res.ids));
        if (cb.on_text && res.completion.size() > shown[static_cast<std::size_t>(s)])
            cb.on_text(first + s, res.completion.substr(shown[static_cast<std::size_t>(s)]));
        if (cb.on_done) cb.on_done(first + s, res);
    }
}

}  // namespace retro
