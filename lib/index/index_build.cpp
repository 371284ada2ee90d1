// Implementation of index_build.h. A run writes OUT/state.json first (what is being built, so
// --resume and merge can check they continue the same job), then parts, then the final files,
// and manifest.json last.
#include "index/index_build.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <fstream>

#include "core/atomic_file.h"
#include "core/cuda_device.h"
#include "core/error.h"
#include "core/interrupt_note.h"
#include "core/log.h"
#include "core/manifest.h"
#include "core/disk_space.h"
#include "core/memory_budget.h"
#include "core/npy.h"
#include "core/output_folder.h"
#include "core/progress.h"
#include "data/chunk_db.h"
#include "embed/model_folder.h"
#include "index/bm25_index_build.h"
#include "index/faiss_index.h"
#include "index/hnsw_build.h"
#include "index/index_memory.h"
#include "text/tokenizer.h"
#include "text/tokenizer_folder.h"

namespace fs = std::filesystem;

namespace retro {
namespace {

std::string state_path(const std::string& dir) { return (fs::path(dir) / "state.json").string(); }

// The tokenizer a bert, t5 or clip embedder decodes chunk ids with.
std::unique_ptr<Tokenizer> db_tokenizer(const ChunkDb& db, const std::string& override_path) {
    return std::make_unique<Tokenizer>(db.tokenizer_checked(override_path), db.tokenizer_fingerprint());
}

std::unique_ptr<Embedder> make_embedder(const IndexBuildOptions& opts, const ChunkDb& db, const Tokenizer* tok,
                                        const std::string& out) {
    if (opts.embedder == "bow") {
        std::string idf_path = (fs::path(out) / "idf.npy").string();
        if (opts.resume && fs::exists(idf_path)) {
            nlohmann::json j = BowEmbedder(opts.bow, std::vector<float>(std::size_t(1) << opts.bow.hash_bits)).to_json();
            return bow_embedder_from_json(j, out);
        }
        return std::make_unique<BowEmbedder>(opts.bow, bow_fit_idf(db, opts.bow));   // (its idf.npy saved once the job is checked)
    }
    if (opts.embedder == "bert") return make_bert_embedder(opts.bert, tok);
    if (opts.embedder == "t5") return make_t5_embedder({opts.bert.model_dir, opts.bert.max_length, opts.bert.batch}, tok);
    if (opts.embedder == "clip") return make_clip_embedder({opts.bert.model_dir, opts.bert.max_length, opts.bert.batch}, tok);
    user_error_in("--embedder", "must be bow, bert, t5 or clip, not '" + opts.embedder + "'");
}

void embed_blocks(const ChunkDb& db, const Embedder& emb, const BlockParts& parts, const Shard& shard, DType dtype) {
    auto todo = parts.pending(shard);
    if (todo.empty()) log_info(parts.nothing_pending(shard, "embedded"));
    if (const std::string line = parts.resuming_line(todo.size(), shard, "embedded"); !line.empty()) log_info(line);
    std::int64_t rows = 0;
    for (auto b : todo) rows += parts.block_end(b) - parts.block_begin(b);
    Progress progress("embedding chunks", rows, "chunks");
    std::vector<std::int32_t> tokens;
    std::vector<float> out;
    std::vector<std::uint16_t> half;
    const int cs = db.chunk_size(), d = emb.dim();
    for (auto b : todo) {
        std::int64_t b0 = parts.block_begin(b), b1 = parts.block_end(b), n = b1 - b0;
        tokens.clear();
        out.assign(static_cast<std::size_t>(n * d), 0.0f);
        for (std::int64_t r = b0; r < b1; r += 4096) {   // embed in slices so the bar moves
            std::int64_t e = std::min(b1, r + 4096);
            std::size_t at = tokens.size();
            db.rows(r, e, tokens);
            emb.embed(tokens.data() + at, e - r, cs, out.data() + (r - b0) * d);
            progress.add(e - r);
        }
        if (dtype == DType::F16) {
            half.resize(out.size());
            for (std::size_t i = 0; i < out.size(); ++i) half[i] = f32_to_f16(out[i]);
            npy_save(parts.part_path(b), DType::F16, {n, d}, half.data());
        } else {
            npy_save(parts.part_path(b), {n, static_cast<std::int64_t>(d)}, out.data());
        }
        parts.seal(b);
    }
    progress.finish();
}

// Reads rows [b, e) of an f32 or f16 embeddings array as f32.
void rows_f32(const NpyArray& emb, std::int64_t b, std::int64_t e, std::vector<float>& out) {
    const std::int64_t d = emb.dim(1);
    out.resize(static_cast<std::size_t>((e - b) * d));
    if (emb.dtype() == DType::F32) {
        std::copy(emb.data<float>() + b * d, emb.data<float>() + e * d, out.begin());
    } else {
        const auto* h = static_cast<const std::uint16_t*>(emb.raw());
        for (std::int64_t i = 0; i < (e - b) * d; ++i) out[static_cast<std::size_t>(i)] = f16_to_f32(h[b * d + i]);
    }
}

// An embedding block in memory: its f32 rows (and an f16 copy), its token ids.
void check_block_memory(std::int64_t block, std::int64_t chunks, int chunk_size, int d) {
    block = std::min(block, chunks);   // no block holds more chunks than the database
    memory_require("--block", double(block) * (double(d) * 6 + double(chunk_size) * 4),
                   "a block of " + std::to_string(block) + " chunks", "a smaller --block (65,536 is the default)");
}

// Concatenates the parts, trains and fills the index, writes the manifest.
void finalize(const ToolContext& ctx, const nlohmann::json& state, const std::vector<std::string>& part_files,
              const std::string& out, const std::string& db_dir) {
    DType dtype;
    dtype_from_name(state["embedding_dtype"].get<std::string>(), dtype);
    std::string emb_path = (fs::path(out) / "embeddings.npy").string();
    std::int64_t n = npy_concat_rows(part_files, emb_path, dtype);
    NpyArray emb(emb_path);
    const int d = static_cast<int>(emb.dim(1));
    std::string factory = state.value("factory", "");
    if (factory.empty()) factory = index_default_factory(n);
    std::int64_t n_train = index_training_count(factory, n);
    std::string note;
    std::string fitted = index_fit_factory(factory, n_train, note);
    index_check_trainable(factory, n_train);   // the factory asked for named (its PQ part is the fitted one's)
    if (!note.empty()) log_warn(note);
    index_check_sizes(fitted, n, d, n_train, "", 0, emb.dtype() != DType::F32);
    FaissIndex index(fitted, d);
    if (index.needs_training()) {
        std::vector<float> sample(static_cast<std::size_t>(n_train * d)), row;
        for (std::int64_t i = 0; i < n_train; ++i) {   // evenly spaced rows: deterministic
            // (in 128 bits: i * n passes 2^63 with a few billion rows and a sample of millions)
            const auto r = static_cast<std::int64_t>(static_cast<__int128>(i) * n / n_train);
            rows_f32(emb, r, r + 1, row);
            std::copy(row.begin(), row.end(), sample.begin() + i * d);
        }
        log_info("training " + fitted + " on " + std::to_string(n_train) + " of " + std::to_string(n) + " vectors");
        index.train(n_train, sample.data());
    }
    Progress progress("adding to the index", n, "vectors");
    std::vector<float> block;
    for (std::int64_t b = 0; b < n; b += 65536) {
        std::int64_t e = std::min(n, b + 65536);
        if (emb.dtype() == DType::F32) {   // straight from the mapping: no copy of the block (n x d x 4 more at the peak)
            index.add(e - b, emb.data<float>() + b * d);
        } else {
            rows_f32(emb, b, e, block);
            index.add(e - b, block.data());
        }
        progress.add(e - b);
    }
    progress.finish();
    std::int64_t fitted_nlist = index_factory_nlist(fitted);
    int nprobe = state.value("nprobe", 0);
    if (fitted_nlist > 0) {
        nprobe = nprobe <= 0 ? index_default_nprobe(fitted_nlist) : index_fit_nprobe(nprobe, fitted_nlist);
        index.set_nprobe(nprobe);
    }
    if (nprobe > 0 && fitted_nlist <= 0)
        log_warn(cat("--nprobe ", nprobe, ": the index (", fitted, ") has no inverted lists; nothing to set"));
    int ef = state.value("ef_search", 0);
    if (ef > 0 && !index.set_ef_search(ef)) {
        log_warn(cat("--ef-search ", ef, ": the index (", fitted, ") has no HNSW graph; nothing to set"));
        ef = 0;   // the manifest records what the index holds
    }
    index.save((fs::path(out) / "index.faiss").string());

    Manifest m(ctx);
    m.parameters() = state["parameters"];
    m.extra()["embedder"] = state["embedder"];
    m.extra()["index"] = {{"factory", fitted}, {"factory_asked", factory}, {"nlist", fitted_nlist},
                          {"nprobe", fitted_nlist > 0 ? nprobe : 0}, {"ef_search", ef}, {"note", note},
                          {"vectors", n}, {"dim", d}, {"metric", "inner_product"}};
    if (const std::string built = hnsw_builder_of(*index.raw()); !built.empty())
        m.extra()["index"]["hnsw_build"] = built;   // (RETRO_HNSW_BUILD=faiss gives other bytes: said, not hidden)
    m.add_input_folder("db", db_dir);
    m.add_output(out, "embeddings.npy");
    m.add_output(out, "index.faiss");
    if (fs::exists(fs::path(out) / "idf.npy")) m.add_output(out, "idf.npy");
    m.inputs_check();   // before the run's marks go: inputs made again meanwhile leave it unfinished (core/input_stamps.h)
    fs::remove(state_path(out));
    parts_remove(out);
    m.write(out);
    log_info("wrote " + out + ": " + std::to_string(n) + " vectors of dimension " + std::to_string(d) + ", index " + fitted);
}

// Two states' values of `key` as compared for --resume and merge: an index started before 2026-12-02 recorded no
// embedder.tokenizer_fingerprint (bert), one before 2026-12-03 no embedder.config_fingerprint, so where one side
// lacks one, neither is held to it.
std::pair<nlohmann::json, nlohmann::json> comparable(const char* key, nlohmann::json a, nlohmann::json b) {
    if (a.is_null() || b.is_null()) return {a, a};   // a key an older version did not record: nothing to compare
    if (std::string(key) == "embedder" && a.is_object() && b.is_object())
        for (const char* later : {"tokenizer_fingerprint", "config_fingerprint"})   // recorded since 2026-12-02, -03
            if (!a.contains(later) || !b.contains(later)) {
                a.erase(later);
                b.erase(later);
            }
    return {std::move(a), std::move(b)};
}

// `p` (parameters, or a state's field) with the factory as built: "" (the default) is the default's own name for
// `rows` vectors, so that `--index HNSW32` where HNSW32 is the default resumes a default build, and a refusal names it
// (it said `the folder's ""`).
nlohmann::json factory_named(nlohmann::json p, std::int64_t rows) {
    if (p.is_object() && p.contains("factory") && p["factory"] == "") p["factory"] = index_default_factory(rows);
    return p;
}

}  // namespace

void output_folder_refuse_existing(const std::string& tool, const std::string& out, bool force, bool resume) {
    if (force && resume)   // --force would clear the parts --resume means to keep
        user_error_in("--resume and --force", "contradict each other: --force starts over, --resume continues",
                      "give one of them");
    if (force || resume) return;
    for (const char* name : {"manifest.json", "state.json"})
        if (json_file_tool((fs::path(out) / name).string()) == tool) {
            // the folder of an interrupted merge or bm25 build (output_folder_prepare's mark) has nothing to resume
            // a finished folder and a killed run's each named as such, as retro-chunk names its database (both said
            // "already exists (fix: pass --force to replace it or --resume to continue it)", where --resume on a
            // finished one does nothing)
            const FolderOwner owner = folder_owner(out);
            const std::string what = tool == "retro-index" ? "index" : tool == "retro-knn" ? "neighbours folder" : tool + " output";
            if (owner.finished)
                user_error_in(out, "already exists: it holds a finished " + what,
                              "pass --force to replace it, or choose another --out (--resume checks it is this command's "
                              "and does nothing)");
            user_error_in(out, owner.resumable ? "already exists: it holds the parts of a " + tool + " run that was stopped"
                                               : "holds an interrupted " + tool + " run that cannot be resumed",
                          owner.resumable ? "pass --resume to continue it (the same command), or --force to start over"
                                          : "pass --force to make it again");
        }
}

bool output_folder_finished(const std::string& out, bool resume, bool force, const std::string& what,
                            const std::function<std::string(const nlohmann::json&)>& difference) {
    if (!resume || force || !fs::exists(fs::path(out) / "manifest.json")) return false;
    if (const std::string diff = difference(manifest_read(out)); !diff.empty())
        user_error_in(out, "already holds " + what + " of another job: " + diff,
                      "choose another --out, or pass --force to make it again");
    manifest_refuse_missing_outputs(out, json_file_tool((fs::path(out) / "manifest.json").string()));
    log_info(out + " is already complete (manifest.json exists); nothing to resume");
    return true;
}

void output_folder_prepare_check(const std::string& tool, const std::string& out, bool force, bool resume,
                                 const std::vector<OutputInput>& inputs, bool resumable) {
    if (resumable) output_folder_refuse_existing(tool, out, force, resume);   // (--force with --resume; the callers ran it already)
    std::error_code ec;
    const bool non_empty = fs::exists(out) && !fs::is_empty(out, ec);
    output_folder_guard(out, tool, inputs, force && non_empty);
    if (non_empty && !force && !resume)
        user_error_in(out, "already exists",
                      resumable ? "pass --force to replace it or --resume to continue it"
                                : "pass --force to make it again (it removes only " + tool + "'s files)");
    // before any work (retro-index's bow embedder reads the whole database next): the user's files --force would
    // leave, and a place no file can be made in (a read-only parent) came after that pass, beside its progress line
    // (a helper's walk, session 60)
    if (force && non_empty) output_folder_clear(out, tool, /*check_only=*/true);
    // (not for a finished folder's --resume, which writes nothing: an index on read-only storage says it is complete)
    if (const fs::path nearest = path_nearest_existing(out);
        fs::is_directory(nearest, ec) && !(resume && !force && fs::exists(fs::path(out) / "manifest.json", ec)))
        folder_writable_check(out, nearest);
    // a run whose folder cannot be resumed (a merge, a --kind bm25 build) left by Ctrl-C: --resume would take its
    // leftovers for a resumable run's parts
    if (const FolderOwner owner = folder_owner(out); resume && resumable && owner.tool == tool && !owner.finished &&
                                                     !owner.resumable)
        user_error_in(out, "holds an interrupted " + tool + " run that cannot be resumed (" +
                               json_read_file((fs::path(out) / "state.json").string()).value("run", std::string("a merge")) + ")",
                      "run that command again with --force, or this one with --force to start over");
}

void output_folder_prepare(const std::string& tool, const std::string& out, bool force, bool resume,
                           const std::vector<OutputInput>& inputs, bool resumable, const std::string& run) {
    output_folder_prepare_check(tool, out, force, resume, inputs, resumable);
    std::error_code ec;
    if (force && fs::exists(out) && !fs::is_empty(out, ec)) output_folder_clear(out, tool);
    const std::string state = (fs::path(out) / "state.json").string();
    fs::create_directories(fs::path(out) / "parts");
    // its mark from the start, so that the folder of an interrupted one is known as this tool's (no other tool writes
    // into it, and manifest_read says what it is); the run removes it as it writes its manifest
    if (!resumable) write_file_atomic(state, nlohmann::json{{"tool", tool}, {"resumable", false}, {"run", run}}.dump(2));
    if ((tool == "retro-index" || tool == "retro-knn") && run == "a merge" && !resumable)
        interrupt_note_install_line(merge_interrupt_note(tool, out));
    else if (tool == "retro-index" || tool == "retro-knn")   // (not a caller's scratch run)
        interrupt_note_install(tool, out,
                               !resumable ? std::string()
                               : force    ? std::string("continue with the same command, --resume in place of --force")
                                          : std::string("continue with the same command and --resume"));
}

void index_build(const ToolContext& ctx, const IndexBuildOptions& given) {
    // --model as the folder the embedder reads (absolute; a Hub id or cache folder as its snapshot), so that a rerun
    // with --resume compares it with the recorded one whatever the spelling
    IndexBuildOptions opts = given;
    if (opts.kind == "dense" && opts.embedder != "bow" && !opts.bert.model_dir.empty())
        opts.bert.model_dir = embedder_model_folder(opts.embedder, opts.bert.model_dir);
    if (opts.kind == "bm25") return bm25_index_build(ctx, opts);
    if (opts.kind != "dense") user_error_in("--kind", "must be dense or bm25, not '" + opts.kind + "'");
    index_check_search_options(opts.nprobe, opts.ef_search);
    ChunkDb db(opts.db);
    if (opts.embedding_dtype != DType::F32 && opts.embedding_dtype != DType::F16)
        user_error_in("--embedding-dtype", "must be f32 or f16");
    if (opts.block < 1) user_error_in("--block", "must be positive");
    if (opts.embedder == "bow" && opts.bow.dim < 1) user_error_in("--dim", "must be positive");   // (before the fit reads the database)
    if (opts.bert.device == "cuda") {
        if (opts.embedder != "bert") user_error_in("--device cuda", "only the bert embedder runs on the GPU", "use --embedder bert, or drop --device");
        cuda_require("--device cuda", "retro-index", "embed on the CPU (--device cpu)");
    }
    if (db.chunk_count() == 0) user_error_in(opts.db, "holds no chunks");
    if (ctx.verify_inputs) db.verify(opts.shard.active() ? ChunkDb::Verify::kLayout : ChunkDb::Verify::kRows);
    db.check_arrays();   // 8 bytes a chunk, beside the chunks embedded: a bad database fails here, not at retro-knn
    {   // fail fast, before any work: sizes that do not fit, a factory FAISS rejects, too few chunks to train it
        std::string factory = opts.factory.empty() ? index_default_factory(db.chunk_count()) : opts.factory;
        if (factory.rfind("IDMap", 0) == 0)   // FAISS's IndexIDMap refuses add(): it wants ids with the vectors
            user_error_in("--index", "'" + factory + "': an IDMap index needs ids; retro-index numbers the vectors by chunk",
                          "drop the IDMap prefix");
        std::string note;
        const std::int64_t n_train = index_training_count(factory, db.chunk_count());
        const std::string fitted = index_fit_factory(factory, n_train, note);
        if (opts.embedder == "bow") {   // bert's and t5's dim is known once the config is read (below)
            index_check_sizes(fitted, db.chunk_count(), opts.bow.dim, n_train, "--dim", 0, opts.embedding_dtype != DType::F32);
            check_block_memory(opts.block, db.chunk_count(), db.chunk_size(), opts.bow.dim);
        }
        index_check_trainable(factory, n_train);   // the factory asked for named (its PQ part is the fitted one's)
        if (opts.embedder == "bow") FaissIndex probe(fitted, opts.bow.dim);
    }
    nlohmann::json params = {{"embedder", opts.embedder}, {"factory", opts.factory},
                             {"embedding_dtype", dtype_name(opts.embedding_dtype)}, {"block", opts.block},
                             {"nprobe", opts.nprobe}, {"ef_search", opts.ef_search}};
    const auto named_factory = [&](const nlohmann::json& p) { return factory_named(p, db.chunk_count()); };
    const auto index_difference = [&](const nlohmann::json& done) {
        if (done.value("kind", std::string()) == "bm25") return std::string("it is a BM25 index (--kind bm25)");
        // the database first: the default factory is named after its size (named_factory), so only for the same one
        if (manifest_input(done, "db", "fingerprint") != folder_fingerprint(db.manifest()))
            return "the database " + opts.db + " is not the one it was built from (" + manifest_input(done, "db", "path") + ")";
        if (std::string d = json_first_difference(named_factory(done.value("parameters", nlohmann::json::object())),
                                                  named_factory(params), "parameters");
            !d.empty())
            return d;
        const nlohmann::json embedder = done.value("embedder", nlohmann::json::object());
        if (opts.embedder == "bow" && embedder.value("dim", std::int64_t(0)) != opts.bow.dim)
            return cat("--dim is ", opts.bow.dim, ", the folder's ", embedder.value("dim", std::int64_t(0)));
        if (opts.embedder != "bow" && embedder.value("model", std::string()) != opts.bert.model_dir)
            return "--model is " + opts.bert.model_dir + ", the folder's " + embedder.value("model", std::string());
        if (opts.embedder == "bert" && embedder.value("prompt", std::string()) != bert_prompt(opts.bert))
            return "the prompt is \"" + bert_prompt(opts.bert) + "\", the folder's \"" + embedder.value("prompt", std::string()) + "\"";
        return std::string();
    };
    // the folder's refusals first (another tool's folder is named as such, not as an index of another job), then a
    // finished folder's --resume, then the embedder (--dim 0, a t5 or clip --model that is no model: refused here), and
    // only then --force's removal: a finished index was deleted before those refusals (a helper's pass, session 54)
    const std::vector<OutputInput> inputs = {{"the database", opts.db}};
    output_folder_prepare_check(ctx.tool, opts.out, opts.force, opts.resume, inputs, /*resumable=*/true);
    (void)disk_free_bytes(opts.out);   // a RETRO_DISK_FREE that is no size refused before the folder is made
    if (output_folder_finished(opts.out, opts.resume, opts.force, "a complete index", index_difference)) return;
    std::unique_ptr<Tokenizer> tok;
    if (opts.embedder != "bow") tok = db_tokenizer(db, opts.tokenizer);
    auto emb = make_embedder(opts, db, tok.get(), opts.out);
    if (opts.embedder != "bow") {   // now the dimension is known
        std::string factory = opts.factory.empty() ? index_default_factory(db.chunk_count()) : opts.factory, note;
        const std::int64_t n_train = index_training_count(factory, db.chunk_count());
        const std::string fitted = index_fit_factory(factory, n_train, note);
        index_check_sizes(fitted, db.chunk_count(), emb->dim(), n_train, "", 0, opts.embedding_dtype != DType::F32);
        check_block_memory(opts.block, db.chunk_count(), db.chunk_size(), emb->dim());
        FaissIndex probe(fitted, emb->dim());   // a factory FAISS rejects ("flat"), before the chunks are embedded
    }
    NewOutputFolder new_out(opts.out);   // a run refused below leaves no folder behind
    output_folder_prepare(ctx.tool, opts.out, opts.force, opts.resume, inputs);

    nlohmann::json state = {{"tool", "retro-index"},
                            {"db", fs::absolute(opts.db).lexically_normal().string()},
                            {"db_fingerprint", folder_fingerprint(db.manifest())},
                            {"rows", db.chunk_count()},
                            {"block", opts.block},
                            {"embedder", emb->to_json()},
                            {"embedding_dtype", dtype_name(opts.embedding_dtype)},
                            {"factory", opts.factory},
                            {"nprobe", opts.nprobe},
                            {"ef_search", opts.ef_search},
                            {"parameters", params}};
    if (opts.resume && fs::exists(state_path(opts.out))) {
        nlohmann::json old = json_read_file(state_path(opts.out));
        // another embedder first, by name (the first differing field would be its dim or batch)
        if (const std::string was = old["embedder"].is_object() ? old["embedder"].value("name", std::string()) : std::string();
            !was.empty() && was != opts.embedder)
            user_error_in(state_path(opts.out), "records another job: --embedder is " + opts.embedder + ", the folder's " + was,
                          "rerun with the folder's settings to resume it, or --force to start over");
        // (the index settings too: the finished-folder check refuses them, so an unfinished one does as well)
        for (const char* key : {"db_fingerprint", "rows", "block", "embedder", "embedding_dtype", "factory", "nprobe", "ef_search"})
            if (const auto [was, now] = comparable(key, named_factory({{key, old[key]}})[key], named_factory({{key, state[key]}})[key]);
                was != now)
                user_error_in(state_path(opts.out), "records another job: " + json_first_difference(was, now, key),
                              "rerun with the folder's settings to resume it, or --force to start over");
        state_check_same_shard(old, state_path(opts.out), opts.shard.index, opts.shard.count);
    }
    state["shard"] = state_shard_record(opts.shard.index, opts.shard.count);
    state["parts_sealed"] = true;   // block_parts.h: every part of this folder gets its seal
    write_file_atomic(state_path(opts.out), state.dump(2));
    // bow's fitted weights, once the resume check above has passed (a refused --resume left them in another job's folder)
    if (const auto* bow = dynamic_cast<const BowEmbedder*>(emb.get()); bow && !fs::exists(fs::path(opts.out) / "idf.npy"))
        bow->save_idf(opts.out);
    new_out.keep();   // from here the folder holds resumable blocks

    BlockParts parts(opts.out, "embeddings", db.chunk_count(), opts.block);
    {   // the disk: the parts still to embed, then (one run) embeddings.npy beside all of them, and the index
        const std::int64_t n = db.chunk_count();
        const double row = double(emb->dim()) * (opts.embedding_dtype == DType::F16 ? 2.0 : 4.0);
        double bytes = 0;
        for (const auto b : parts.pending(opts.shard)) bytes += double(parts.block_end(b) - parts.block_begin(b)) * row;
        if (!opts.shard.active()) {
            const std::string factory = opts.factory.empty() ? index_default_factory(n) : opts.factory;
            const std::int64_t n_train = index_training_count(factory, n);
            std::string note;
            bytes += double(n) * row + index_memory_bytes(index_fit_factory(factory, n_train, note), n, emb->dim(), n_train, false);
        }
        disk_space_warn(opts.out, bytes, opts.shard.active() ? "the embeddings' parts"
                                                              : "the embeddings' parts, embeddings.npy joined from them, the index");
    }
    embed_blocks(db, *emb, parts, opts.shard, opts.embedding_dtype);
    if (opts.shard.active()) {
        state_mark_shard_done(opts.out, opts.shard.index, opts.shard.count);
        log_info("shard " + std::to_string(opts.shard.index) + "/" + std::to_string(opts.shard.count) +
                 " done; join the shards with: retro-index merge SHARD_DIRS... --out DIR");
        return;
    }
    finalize(ctx, state, parts.collect({opts.out}), opts.out, opts.db);
}

void index_merge(const ToolContext& ctx, const std::vector<std::string>& shard_dirs, const std::string& out, bool force,
                 bool resume) {
    if (shard_dirs.empty()) user_error_in("merge", "needs the shard folders");
    merge_resume_force_refuse(resume, force);
    shards_check_complete(shard_dirs, "retro-index");
    nlohmann::json first = json_read_file(state_path(shard_dirs.front()));
    // the fingerprints older RetroKit versions did not record: the first value a shard records, and that shard
    std::map<std::string, std::pair<std::string, std::string>> later;
    for (const auto& d : shard_dirs) {
        nlohmann::json s = json_read_file(state_path(d));
        // (--nprobe and --ef-search too: the merged index took the first-named shard's, so the order of the shards
        // changed the index; a helper's pass, session 54)
        for (const char* key : {"db_fingerprint", "rows", "block", "embedder", "embedding_dtype", "factory", "nprobe", "ef_search"})
            if (const auto [here, there] = comparable(key, s[key], first[key]); here != there)
                user_error_in(state_path(d), "belongs to another job than " + shard_dirs.front() + ": " +
                                                 json_first_difference(there, here, key, "the first shard's"));
        // shards of older RetroKit versions record none; those that do must agree among themselves too
        const nlohmann::json& e = s["embedder"];
        for (const char* field : {"tokenizer_fingerprint", "config_fingerprint"}) {
            if (!e.is_object() || !e.contains(field) || !e[field].is_string()) continue;
            auto& [value, shard] = later[field];
            if (value.empty()) {
                value = e[field].get<std::string>();
                shard = d;
            } else if (e[field].get<std::string>() != value) {
                user_error_in(state_path(d), "belongs to another job than " + shard + " (embedder." + field + " differs)");
            }
        }
    }
    for (const auto& [field, found] : later)
        if (first["embedder"].is_object()) first["embedder"][field] = found.first;
    std::vector<OutputInput> shards;
    for (const auto& d : shard_dirs) shards.push_back({"shard", d});
    // the database the manifest will record is the one the shards embedded (one chunked again in place since was
    // recorded beside the old chunks' vectors: a review, session 55)
    recorded_folder_check(state_path(shard_dirs.front()), "the database", first.value("db", std::string()),
                          first.value("db_fingerprint", std::string()),
                          "run the shards again over the database as it is now (the same retro-index commands with --force)");
    if (resume) {   // a finished index of this job (merged, or built by one run) is complete; an interrupted merge made again
        const auto difference = [&](const nlohmann::json& done) {
            if (done.value("kind", std::string()) == "bm25") return std::string("it is a BM25 index (--kind bm25)");
            if (manifest_input(done, "db", "fingerprint") != first.value("db_fingerprint", std::string()))
                return manifest_input(done, "db", "path") == first.value("db", std::string())
                           ? "it was built from the database " + first.value("db", std::string()) + " before it was made again"
                           : "its database (" + manifest_input(done, "db", "path") + ") is not the one the shards embedded (" +
                                 first.value("db", std::string()) + ")";
            const std::int64_t rows = first["rows"].get<std::int64_t>();
            if (std::string d = json_first_difference(factory_named(done.value("parameters", nlohmann::json::object()), rows),
                                                      factory_named(first["parameters"], rows), "parameters");
                !d.empty())
                return d;
            const auto [was, now] = comparable("embedder", done.value("embedder", nlohmann::json()), first["embedder"]);
            return json_first_difference(was, now, "embedder");
        };
        const MergeResume r = merge_resume_check(ctx.tool, out, force, shards, difference, {"embeddings.npy", "index.faiss", "idf.npy"});
        if (r == MergeResume::kDone) return;
        force = r == MergeResume::kRemake;   // the interrupted merge's files removed, as --force does
    }
    NewOutputFolder new_out(out);   // a merge refused below (a shard missing blocks) leaves no folder to block the rerun
    output_folder_prepare(ctx.tool, out, force, false, shards, /*resumable=*/false, "a merge");
    BlockParts parts(out, "embeddings", first["rows"].get<std::int64_t>(), first["block"].get<std::int64_t>());
    auto files = parts.collect(shard_dirs);
    if (fs::exists(fs::path(shard_dirs.front()) / "idf.npy"))
        copy_file_atomic((fs::path(shard_dirs.front()) / "idf.npy").string(), (fs::path(out) / "idf.npy").string());
    std::string db_dir = first.value("db", "");
    if (db_dir.empty()) user_error_in(state_path(shard_dirs.front()), "does not record the database folder");
    finalize(ctx, first, files, out, db_dir);
    new_out.keep();
}

}  // namespace retro
