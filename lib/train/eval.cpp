#include "train/eval.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <memory>
#include <random>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "core/error.h"
#include "core/log.h"
#include "core/manifest.h"
#include "core/output_folder.h"
#include "core/memory_budget.h"
#include "core/npy.h"
#include "core/progress.h"
#include "model/params.h"
#include "model/retro.h"
#include "text/token_bytes.h"
#include "text/tokenizer.h"
#include "data/run_tokenizer.h"
#include "train/chunk_overlap.h"
#include "train/data.h"
#include "train/train_memory.h"

namespace fs = std::filesystem;

namespace retro {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// `weights_option`: the option that takes a checkpoint of `run` instead ("--weights"), "" where none does (the
// baseline: --weights replaces the evaluated run's weights)
std::unique_ptr<RetroModel<float>> load_model(const std::string& run, const std::string& weights_in,
                                              RetroConfig& config, bool verify, const std::string& weights_option) {
    if (!fs::is_directory(run) || !fs::exists(fs::path(run) / "config.json"))
        user_error_in(run, fs::is_directory(run) ? "is not a retro-train run (no config.json)" : "is not a folder",
                      "give a folder retro-train wrote");
    if (weights_in.empty()) refuse_unfinished_run(run, weights_option);
    std::string weights = weights_in.empty() ? (fs::path(run) / "model.safetensors").string() : weights_in;
    // (a run still training, or stopped before its end, was named above with its fix: this is a folder of no run)
    if (weights_in.empty() && !fs::exists(weights))
        user_error_in(run, "has no model.safetensors", "give a folder retro-train finished");
    if (fs::is_directory(weights)) weights = (fs::path(weights) / "model.safetensors").string();   // a checkpoint folder
    if (verify && weights_in.empty()) manifest_verify_outputs_if_any(run, {"config.json", "model.safetensors"});
    // --weights of a checkpoint (its folder or its model.safetensors): held to the fingerprints its state.json
    // records, as retro-generate --checkpoint and --resume hold it (a changed byte was evaluated without a word)
    const fs::path holder = fs::path(weights).parent_path();
    if (!weights_in.empty() && fs::exists(holder / "state.json") && !fs::exists(holder / "DONE"))
        log_warn(holder.string() + " has no DONE: a checkpoint still being written, or cut short by a kill");
    if (verify && !weights_in.empty()) named_weights_verify(weights);
    config = RetroConfig::load((fs::path(run) / "config.json").string());
    auto model = std::make_unique<RetroModel<float>>(config);
    params_load(weights, model->params(), model->layout(), config);
    return model;
}

// The share of documents held out: --val-fraction, or the run's as its manifest records (0.05 without a manifest:
// a run still training, or weights from elsewhere). A larger share than the run's makes the "val" split hold
// documents it trained on: said. `source` gets where the share came from, for the log line.
double resolve_val_fraction(const EvalOptions& o, std::string& source) {
    double run_fraction = std::numeric_limits<double>::quiet_NaN();
    if (fs::exists(fs::path(o.run) / "manifest.json")) {
        const nlohmann::json params = manifest_read(o.run).value("parameters", nlohmann::json::object());
        if (params.contains("val_fraction") && params["val_fraction"].is_number())
            run_fraction = params["val_fraction"].get<double>();
    }
    if (std::isnan(o.val_fraction)) {
        source = std::isnan(run_fraction) ? o.run + " records none: the default" : o.run + "'s";
        return std::isnan(run_fraction) ? 0.05 : run_fraction;
    }
    source = "--val-fraction";
    if (o.val_fraction < 0 || o.val_fraction >= 1) user_error_in("--val-fraction", "must be in [0, 1)");
    if (o.split == "val" && !std::isnan(run_fraction) && o.val_fraction > run_fraction)
        log_warn(cat("--val-fraction ", o.val_fraction, " holds out more documents than ", o.run, " did (",
                     run_fraction, "): part of the val split is text the run trained on"));
    return o.val_fraction;
}

// A val or train split of another database than the one the run trained on is not the run's split: its documents are
// numbered and held out by position in that database, so its "val" may be text the run trained on (a corpus chunked
// again with a file added in front shifts every document). Said, not refused: --split all on another corpus is a
// held-out figure, and a copy of the database (the same fingerprint) is the same.
void warn_other_database(const EvalOptions& o) {
    if (o.split == "all" || !fs::exists(fs::path(o.run) / "manifest.json") || !fs::exists(fs::path(o.db) / "manifest.json"))
        return;
    const nlohmann::json run = manifest_read(o.run);
    const std::string trained_on = manifest_input(run, "db", "fingerprint");
    if (!trained_on.empty() && trained_on != folder_fingerprint(manifest_read(o.db)))
        log_warn(cat(o.db, " is not the database ", o.run, " trained on (", manifest_input(run, "db"),
                     "): its ", o.split, " split is by its own documents' positions, not the ones the run held out; ",
                     "--split all evaluates all of it"));
}

// Byte lengths of the database's tokens, at least `vocab` of them (empty when its tokenizer cannot be opened: no
// bpb). A tokenizer smaller than the model's vocabulary (a small corpus) leaves the ids past its own at 0 bytes: the
// database's tokens, all from it, never take them.
std::vector<std::int32_t> database_token_bytes(const ChunkDb& db, int vocab) {
    try {
        // missing, or not the one the database was chunked with: no bpb
        Tokenizer tok(db.tokenizer_checked(""), db.tokenizer_fingerprint());
        std::vector<std::int32_t> bytes = token_byte_lengths(tok);
        bytes.resize(std::max(bytes.size(), static_cast<std::size_t>(vocab)), 0);
        return bytes;
    } catch (const UserError&) {
        return {};
    }
}

// A random derangement of [0, n) (Sattolo's algorithm: one cycle, so no chunk keeps its own neighbours).
std::vector<std::int64_t> derangement(std::int64_t n, std::uint64_t seed) {
    std::vector<std::int64_t> p(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; i++) p[i] = i;
    std::mt19937_64 rng(seed);
    for (std::int64_t i = n - 1; i > 0; i--) {
        std::uniform_int_distribution<std::int64_t> pick(0, i - 1);
        std::swap(p[i], p[pick(rng)]);
    }
    return p;
}

// Cross-entropy (nats) of each label of the last forward; -1 where the label is a pad.
void label_losses(const RetroModel<float>& model, const RetroBatch& batch, std::int32_t pad, std::vector<double>& out) {
    const std::int64_t B = batch.B, n = batch.n, V = model.config().num_tokens;
    const float* logits = model.logits().data();
    out.assign(static_cast<std::size_t>(B * n), -1.0);
    for (std::int64_t b = 0; b < B; b++)
        for (std::int64_t i = 0; i < n; i++) {
            const std::int32_t label = batch.seq[b * (n + 1) + i + 1];
            if (label == pad) continue;
            const float* z = logits + (b * n + i) * V;
            double mx = z[0];
            for (std::int64_t v = 1; v < V; v++) mx = std::max(mx, static_cast<double>(z[v]));
            double sum = 0;
            for (std::int64_t v = 0; v < V; v++) sum += std::exp(static_cast<double>(z[v]) - mx);
            out[b * n + i] = mx + std::log(sum) - static_cast<double>(z[label]);
        }
}

struct Mode {
    std::string name;
    RetroModel<float>* model;
    bool retrieval, shuffled;
};

}  // namespace

std::vector<std::int64_t> sample_sequences(const std::vector<std::int64_t>& split, std::int64_t count,
                                           const std::string& how) {
    const auto S = static_cast<std::int64_t>(split.size());
    if (count <= 0 || count >= S) return split;
    if (how == "first") return {split.begin(), split.begin() + count};
    // sequence floor(i * S / count) for i < count: distinct (S > count), in split order, the first one included
    std::vector<std::int64_t> out;
    out.reserve(static_cast<std::size_t>(count));
    for (std::int64_t i = 0; i < count; i++)   // (i * S in 128 bits: it may pass 2^63)
        out.push_back(split[static_cast<std::size_t>(static_cast<__int128>(i) * S / count)]);
    return out;
}

EvalReport train_eval(const EvalOptions& o) {
    if (o.split != "val" && o.split != "train" && o.split != "all")
        user_error_in("--split", "must be val, train or all, got \"" + o.split + "\"");
    if (o.batch_size <= 0) user_error_in("--batch-size", "must be positive");
    if (o.max_batches < 0) user_error_in("--max-batches", "must be 0 (every sequence) or positive");
    if (o.sample != "spread" && o.sample != "first")
        user_error_in("--sample", "must be spread or first, got \"" + o.sample + "\"");
    if (o.overlap_with != "own" && o.overlap_with != "read")
        user_error_in("--overlap-with", "must be own or read, got \"" + o.overlap_with + "\"");
    for (double a : o.alphas)
        if (!(a > 0 && a <= 1)) user_error_in("--alphas", cat("each alpha must be in (0, 1], got ", a));
    RetroConfig config, base_config;
    auto model = load_model(o.run, o.weights, config, o.verify, "--weights");
    std::unique_ptr<RetroModel<float>> baseline;
    if (!o.baseline.empty()) {
        baseline = load_model(o.baseline, "", base_config, o.verify, "");
        if (base_config.num_tokens != config.num_tokens || base_config.chunk_size != config.chunk_size ||
            base_config.pad_id != config.pad_id)
            user_error_in((fs::path(o.baseline) / "config.json").string(),
                          "has another vocabulary, chunk size or pad id than " + o.run,
                          "compare runs trained on the same database");
    }
    // ids of another tokenizer would be scored as if they were this model's: the numbers look right and mean nothing
    const RunTokenizer run_tok = run_tokenizer(o.run);
    if (fs::exists(fs::path(o.db) / "manifest.json"))
        require_same_tokenizer(o.db, db_tokenizer_fingerprint(manifest_read(o.db)),
                               "the database " + o.run + " was trained on (" + run_tok.db + ")", run_tok.fingerprint,
                               "evaluate on a database chunked with the run's tokenizer");
    if (!o.baseline.empty())
        require_same_tokenizer(o.baseline, run_tokenizer(o.baseline).fingerprint, o.run + " (its database's)", run_tok.fingerprint,
                               "compare runs trained on databases of the same tokenizer");
    std::string val_source;
    const double val_fraction = resolve_val_fraction(o, val_source);
    warn_other_database(o);
    const double held_out = o.split == "all" ? 0.0 : val_fraction;
    // The split must hold sequences and a batch must fit: refused before a search (--index) can take minutes.
    const auto check_split = [&](const RetroData& d, bool knn) {
        const auto& split = o.split == "train" || o.split == "all" ? d.train_seqs() : d.val_seqs();
        if (split.empty()) user_error_in(o.db, "has no sequences in the " + o.split + " split", "try --split all");
        memory_require("--batch-size", train_memory_bytes(config, o.batch_size, d.seq_len(), knn),
                       "evaluating batches of " + std::to_string(o.batch_size) + " sequences", "a smaller --batch-size");
    };
    if (o.search_neighbours) check_split(RetroData(o.db, "", config, held_out, RetroData::Verify::kNone), true);
    const std::string neighbours = o.search_neighbours ? o.search_neighbours(config) : o.neighbours;
    // eval reads the rows of the sequences it evaluates (a split, or --max-batches of them): the layout is read whole
    RetroData data(o.db, neighbours, config, held_out, o.verify ? RetroData::Verify::kLayout : RetroData::Verify::kNone);
    const bool knn = !neighbours.empty();
    check_split(data, knn);
    std::string continuation_note;   // logged after the checks below
    if (knn && o.weights.empty() && fs::exists(fs::path(o.run) / "manifest.json")) {
        const nlohmann::json params = manifest_read(o.run).value("parameters", nlohmann::json::object());
        if (params.is_object() && params.contains("no_retrieval") && params["no_retrieval"] == true)
            log_warn(o.run + " was trained with --no-retrieval: its retrieval rows run CCA layers and an encoder that "
                             "never learnt (compare it with a retro-fitted run instead)");
        else if (params.is_object() && !params.contains("neighbour_continuation"))
            continuation_note = unrecorded_continuation_note((fs::path(o.run) / "manifest.json").string(), "this eval",
                                                             static_cast<int>(config.chunk_size));
        else if (params.is_object() && params.value("neighbour_continuation_from_step", std::int64_t(0)) > 0)
            continuation_note = cat(o.run, " read RetroKit's older neighbour continuations (before 2026-12-06) up to ",
                                    "its checkpoint at step ", params["neighbour_continuation_from_step"].dump(),
                                    ", resumed since; this eval reads RETRO-pytorch's (docs/formats.md)");
    }
    const auto& split_seqs = o.split == "train" || o.split == "all" ? data.train_seqs() : data.val_seqs();
    const std::vector<std::int64_t> seqs = sample_sequences(split_seqs, o.max_batches * o.batch_size, o.sample);

    const ChunkDb& db = data.db();
    const std::int64_t N = db.chunk_count(), cs = db.chunk_size(), n = data.seq_len();
    const std::int32_t pad = config.pad_id;
    const auto token_bytes = database_token_bytes(db, config.num_tokens);

    EvalReport rep;
    rep.run = o.run;
    rep.db = o.db;
    rep.knn = neighbours;
    rep.baseline = o.baseline;
    rep.split = o.split;
    rep.val_fraction = val_fraction;
    rep.sequences = static_cast<std::int64_t>(seqs.size());
    rep.split_sequences = static_cast<std::int64_t>(split_seqs.size());
    rep.sample = seqs.size() < split_seqs.size() ? o.sample : "all";
    rep.seq_len = n;
    rep.has_bytes = !token_bytes.empty();
    rep.has_overlap = knn;
    rep.overlap_with = o.overlap_with;
    std::vector<double> alphas = knn ? o.alphas : std::vector<double>{};
    std::sort(alphas.begin(), alphas.end());
    alphas.erase(std::unique(alphas.begin(), alphas.end()), alphas.end());
    if (alphas.empty() || alphas.back() != 1.0) alphas.push_back(1.0);

    std::vector<Mode> modes;
    if (knn) modes.push_back({"retrieval", model.get(), true, false});
    modes.push_back({"no retrieval", model.get(), false, false});
    if (knn && o.shuffled) modes.push_back({"shuffled neighbours", model.get(), true, true});
    if (baseline) modes.push_back({"baseline", baseline.get(), false, false});
    for (const auto& m : modes) rep.modes.push_back(m.name);
    rep.filters.resize(alphas.size());
    for (std::size_t f = 0; f < alphas.size(); f++) rep.filters[f].alpha = alphas[f];

    // r of every chunk a label points into, computed once from the chunk's own neighbours
    // only the chunks the split's labels point into (not one slot per database chunk)
    std::unordered_map<std::int64_t, float> overlap;
    const std::int64_t k = data.neighbours_per_chunk(), r_len = 2 * cs;
    std::vector<std::int32_t> chunk, retrieved(static_cast<std::size_t>(k * r_len));
    const bool read_overlap = o.overlap_with == "read";
    // `first`: row is its sequence's first chunk (with overlap_with "read" it reads no neighbours: r = 0)
    auto overlap_of = [&](std::int64_t row, std::int64_t doc_end, bool first) -> double {
        if (!knn || (read_overlap && first)) return 0;
        const auto [it, fresh] = overlap.try_emplace(row, -1.f);
        float& r = it->second;
        if (fresh) {
            chunk.clear();
            db.rows(row, row + 1, chunk);
            const std::int64_t source = read_overlap ? row - 1 : row;
            data.read_neighbours(source, doc_end, source, retrieved.data());
            r = static_cast<float>(chunk_overlap(chunk.data(), static_cast<int>(cs), retrieved.data(),
                                                 static_cast<int>(k), static_cast<int>(r_len), pad));
        }
        return r;
    };

    const std::size_t F = alphas.size();
    std::unordered_set<std::int64_t> seen;   // chunks counted (first mode)
    double overlap_sum = 0;
    std::vector<double> losses;
    RetroBatch batch;
    const bool keep_tokens = !o.token_losses.empty();
    std::vector<float> token_nats;   // [modes, sequences, n] with keep_tokens
    if (keep_tokens) {
        token_nats.assign(modes.size() * seqs.size() * static_cast<std::size_t>(n), std::numeric_limits<float>::quiet_NaN());
        rep.token_losses = o.token_losses;
        for (std::int64_t s : seqs) rep.sequence_first_chunks.push_back(db.seq_start(s));
    }
    // (as retro-generate says: weights neither the run nor the --weights file's own run records the ids of)
    if (run_tok.fingerprint.empty() && !fs::exists(fs::path(o.run) / "manifest.json") &&
        (o.weights.empty() || run_tokenizer(o.weights).fingerprint.empty())) {
        const nlohmann::json db_params = db.manifest().value("parameters", nlohmann::json::object());
        const std::int64_t pieces = db_params.is_object() ? db_params.value("vocab_size", std::int64_t{0}) : 0;
        outside_weights_warning(o.run, o.db + "'s tokenizer", pieces, config.num_tokens);
    }
    // (said, because it changes the train split's losses too: a comparison with another tool on the same neighbours
    // differs where a neighbour lies in a held-out document)
    if (held_out > 0 && knn)
        log_info(cat("held out: ", held_out, " of the documents (", val_source, ", a fixed hash): on any split a "
                     "neighbour inside them reads as none, so held-out text is never retrieved (--split all or "
                     "--val-fraction 0 holds none out)"));
    if (!continuation_note.empty()) log_info(continuation_note);
    const std::int64_t batches = (rep.sequences + o.batch_size - 1) / o.batch_size;
    Progress progress(cat("eval (", modes.size(), " modes x ", batches, " batches)"),
                      batches * static_cast<std::int64_t>(modes.size()), "batch passes");
    for (std::size_t mi = 0; mi < modes.size(); mi++) {
        const Mode& mode = modes[mi];
        data.set_neighbour_source(mode.shuffled ? derangement(N, o.shuffle_seed) : std::vector<std::int64_t>{});
        std::vector<double> nats(F, 0.0);
        double model_total = 0;
        std::int64_t model_labels = 0;
        for (std::size_t i = 0; i < seqs.size(); i += o.batch_size) {
            std::vector<std::int64_t> ids_b(seqs.begin() + i, seqs.begin() + std::min(seqs.size(), i + o.batch_size));
            data.make_batch(ids_b, mode.retrieval, batch);
            model_total += static_cast<double>(mode.model->forward(batch)) * static_cast<double>(mode.model->label_count());
            model_labels += mode.model->label_count();
            label_losses(*mode.model, batch, pad, losses);
            for (std::int64_t b = 0; b < batch.B; b++) {
                const std::int64_t c0 = db.seq_start(ids_b[b]), doc_end = db.doc_end(db.doc_of(c0));
                for (std::int64_t t = 0; t < n; t++) {
                    const double ce = losses[b * n + t];
                    if (ce < 0) continue;
                    if (keep_tokens)
                        token_nats[(mi * seqs.size() + i + static_cast<std::size_t>(b)) * static_cast<std::size_t>(n) +
                                   static_cast<std::size_t>(t)] = static_cast<float>(ce);
                    const std::int64_t row = c0 + (t + 1) / cs;   // the chunk of the predicted token
                    const double r = overlap_of(row, doc_end, row == c0);
                    const std::int32_t label = batch.seq[b * (n + 1) + t + 1];
                    for (std::size_t f = 0; f < F; f++) {
                        if (r > alphas[f]) continue;
                        nats[f] += ce;
                        if (mi == 0) {
                            rep.filters[f].labels++;
                            if (rep.has_bytes) rep.filters[f].bytes += token_bytes[static_cast<std::size_t>(label)];
                            if (!seen.count(row)) rep.filters[f].chunks++;
                        }
                    }
                    if (mi == 0 && seen.insert(row).second) {
                        overlap_sum += r;
                    }
                }
            }
            progress.add(1);
        }
        // the per-label losses must add up to the model's own loss
        if (model_labels != rep.filters.back().labels ||
            std::abs(nats.back() - model_total) > 1e-4 * std::max(1.0, std::abs(model_total)))
            throw InternalError(cat("eval: per-label losses (", nats.back(), " over ", rep.filters.back().labels,
                                    " labels) differ from the model's (", model_total, " over ", model_labels, ")"));
        for (std::size_t f = 0; f < F; f++) {
            const auto& flt = rep.filters[f];
            EvalFigures fig;
            fig.loss = flt.labels ? nats[f] / static_cast<double>(flt.labels) : kNaN;
            fig.perplexity = std::exp(fig.loss);
            fig.bpb = rep.has_bytes && flt.bytes ? nats[f] / std::log(2.0) / static_cast<double>(flt.bytes) : kNaN;
            rep.filters[f].modes.push_back(fig);
        }
    }
    progress.finish();
    data.set_neighbour_source({});
    if (keep_tokens)
        npy_save(o.token_losses, {static_cast<std::int64_t>(modes.size()), static_cast<std::int64_t>(seqs.size()), n},
                 token_nats.data());
    rep.mean_overlap = rep.all().chunks ? overlap_sum / static_cast<double>(rep.all().chunks) : 0;
    return rep;
}

double EvalReport::loss_minus(const std::string& a, const std::string& b) const {
    const auto ia = std::find(modes.begin(), modes.end(), a), ib = std::find(modes.begin(), modes.end(), b);
    if (ia == modes.end() || ib == modes.end()) return kNaN;
    return all().modes[ia - modes.begin()].loss - all().modes[ib - modes.begin()].loss;
}

namespace {
nlohmann::json number_or_null(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }
}  // namespace

nlohmann::json EvalReport::to_json() const {
    nlohmann::json j;
    j["run"] = run;
    j["db"] = db;
    j["knn"] = knn.empty() ? nlohmann::json(nullptr) : nlohmann::json(knn);
    j["baseline"] = baseline.empty() ? nlohmann::json(nullptr) : nlohmann::json(baseline);
    j["split"] = split;
    j["val_fraction"] = val_fraction;
    j["sequences"] = sequences;
    j["split_sequences"] = split_sequences;
    j["sample"] = sample;
    j["chunks"] = all().chunks;
    j["labels"] = all().labels;
    j["bytes"] = has_bytes ? nlohmann::json(all().bytes) : nlohmann::json(nullptr);
    j["mean_overlap"] = has_overlap ? nlohmann::json(mean_overlap) : nlohmann::json(nullptr);
    j["overlap_with"] = overlap_with;
    j["modes"] = modes;
    j["filters"] = nlohmann::json::array();
    for (const auto& f : filters) {
        nlohmann::json jf;
        jf["alpha"] = f.alpha;
        jf["chunks"] = f.chunks;
        jf["share"] = all().chunks ? static_cast<double>(f.chunks) / static_cast<double>(all().chunks) : 0.0;
        jf["labels"] = f.labels;
        jf["bytes"] = has_bytes ? nlohmann::json(f.bytes) : nlohmann::json(nullptr);
        for (std::size_t m = 0; m < modes.size(); m++)
            jf["modes"][modes[m]] = {{"loss", number_or_null(f.modes[m].loss)},
                                     {"perplexity", number_or_null(f.modes[m].perplexity)},
                                     {"bpb", number_or_null(f.modes[m].bpb)}};
        j["filters"].push_back(jf);
    }
    if (!token_losses.empty())
        j["token_losses"] = {{"file", token_losses}, {"shape", {modes.size(), sequence_first_chunks.size(), seq_len}},
                             {"sequence_first_chunks", sequence_first_chunks}};
    j["retrieval_gain"] = number_or_null(loss_minus("no retrieval", "retrieval"));
    j["shuffled_gain"] = number_or_null(loss_minus("no retrieval", "shuffled neighbours"));
    j["gain_over_baseline"] = number_or_null(loss_minus("baseline", "retrieval"));
    return j;
}

std::string EvalReport::to_text() const {
    std::ostringstream s;
    char line[256];
    s << "retro-train eval: " << run << " on " << db << " (" << split << " split";
    if (split != "all") s << " of --val-fraction " << val_fraction;
    s << ": " << sequences << " sequences";
    if (sample != "all") s << " of " << split_sequences << ", " << (sample == "spread" ? "spread over it" : "the first");
    s << ", " << all().chunks << " chunks, " << all().labels << " tokens";
    if (has_bytes) s << ", " << all().bytes << " bytes";
    s << ")\n";
    if (has_overlap) {
        std::snprintf(line, sizeof line, "overlap r with %s of %s: mean %.3f\n",
                      overlap_with == "read" ? "the neighbours CCA reads for each chunk (the previous chunk's)"
                                             : "each chunk's own neighbours",
                      knn.c_str(), mean_overlap);
        s << line;
    }
    std::snprintf(line, sizeof line, "%-8s %8s %7s   %-20s %8s %9s %7s %9s\n", "r <= a", "chunks", "share", "mode",
                  "loss", "ppl", "bpb", "gain");
    s << line;
    const auto no_retrieval = std::find(modes.begin(), modes.end(), "no retrieval") - modes.begin();
    for (const auto& f : filters) {
        for (std::size_t m = 0; m < modes.size(); m++) {
            const auto& fig = f.modes[m];
            std::string alpha = m ? "" : (f.alpha == 1.0 ? std::string("1 (all)") : cat(f.alpha));
            std::string chunks = m ? "" : cat(f.chunks);
            char share[16] = "";
            if (!m) std::snprintf(share, sizeof share, "%.1f%%", all().chunks ? 100.0 * f.chunks / all().chunks : 0.0);
            char bpb[16] = "-", gain[16] = "";
            if (std::isfinite(fig.bpb)) std::snprintf(bpb, sizeof bpb, "%.4f", fig.bpb);
            if (static_cast<std::ptrdiff_t>(m) != no_retrieval && std::isfinite(fig.loss))
                std::snprintf(gain, sizeof gain, "%+.4f", f.modes[no_retrieval].loss - fig.loss);
            std::snprintf(line, sizeof line, "%-8s %8s %7s   %-20s %8.4f %9.2f %7s %9s\n", alpha.c_str(), chunks.c_str(),
                          share, modes[m].c_str(), fig.loss, fig.perplexity, bpb, gain);
            s << line;
        }
    }
    s << "gain = loss without retrieval - loss of the mode (nats/token; > 0: the mode helps)\n";
    return s.str();
}

}  // namespace retro
