// Implementation of chunk_build.h.
#include "data/chunk_build.h"

#include <omp.h>

#include <chrono>
#include <cmath>
#include <exception>
#include <filesystem>
#include <future>
#include <fstream>
#include <mutex>
#include <set>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/fingerprint.h"
#include "core/log.h"
#include "core/manifest.h"
#include "core/memory_budget.h"
#include "core/interrupt_note.h"
#include "core/output_folder.h"
#include "core/progress.h"
#include "core/terminal_text.h"
#include "core/shard.h"
#include "core/threads.h"
#include "data/block_reader.h"
#include "data/chunk_db_writer.h"
#include "data/chunk_layout.h"
#include "text/tokenizer.h"
#include "text/tokenizer_folder.h"

namespace fs = std::filesystem;

namespace retro {
namespace {

constexpr const char* kCheckpoint = "progress.json";
// The checkpoint's params (every input file with its size and time: ~150 bytes a file) go to a file of their own,
// written once as the run starts; progress.json, rewritten at every checkpoint, holds the position and that file's
// fingerprint. Before session 54 progress.json held the params itself, rewritten whole each time (a corpus of a million
// files: 150 MB every 10 s); such a checkpoint still resumes. The file is named by the xxh3 of its bytes,
// progress.params.FINGERPRINT.json, so that progress.json always names a file that exists: a resume that records its
// params again under another spelling of the same files writes a new file, and the old one is removed only once a
// progress.json names the new (a kill between the two writes lost the run when one name was rewritten: a review).
std::string checkpoint_params_name(const std::string& fingerprint) { return "progress.params." + fingerprint + ".json"; }

// Every progress.params.*.json in `dir` but `keep`.
void remove_checkpoint_params(const std::string& dir, const std::string& keep = "") {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
        const std::string name = e.path().filename().string();
        if (name.rfind("progress.params.", 0) == 0 && name != keep) fs::remove(e.path(), ec);
    }
}

void check_options(const ChunkOptions& o) {
    if (o.chunk_size < 1 || o.chunk_size > (1 << 20)) user_error_in("--chunk-size", "must be in [1, 1048576]");
    if (o.seq_len < o.chunk_size || o.seq_len % o.chunk_size != 0)
        user_error_in("--seq-len", "must be a positive multiple of --chunk-size (" + std::to_string(o.chunk_size) + ")",
                      "pass e.g. --seq-len " + std::to_string(o.chunk_size * 32));
    if (o.block_docs < 1) user_error_in("--block-docs", "must be at least 1");
    if (o.block_bytes < 1) user_error_in("--block-bytes", "must be at least 1");
    if (!(o.checkpoint_seconds >= 0 && std::isfinite(o.checkpoint_seconds)))   // NaN fails every comparison
        user_error_in("--checkpoint-every", cat(o.checkpoint_seconds, " is not a number of seconds"),
                      "give 0 to save after every block");
    // each thread holds up to two blocks in flight: the text and its ids (~3 bytes per text byte); blamed on --threads
    // where it asks for more threads than the machine has (--threads 1000 was blamed on --block-bytes)
    const bool threads_to_blame = thread_count() > hardware_threads();
    memory_require(threads_to_blame ? "--threads" : "--block-bytes", double(o.block_bytes) * 6 * thread_count(),
                   "input blocks of " + memory_format_bytes(double(o.block_bytes)) + " on " + std::to_string(thread_count()) + " threads",
                   threads_to_blame ? cat("fewer --threads (this machine has ", hardware_threads(), ")")
                                    : std::string("a smaller --block-bytes (the default is 4 MiB)"));
    if (o.out.empty()) user_error_in("--out", "is required");
}

// Removes what a previous run wrote into `dir` (only RetroKit's own file names).
void remove_previous_outputs(const std::string& dir) {
    // the manifest first: a --force stopped midway leaves no folder that says it is finished with arrays missing (its
    // --resume said "already complete": a helper's kill soak, session 68)
    std::vector<std::string> names = {"manifest.json"};
    for (const auto& n : ChunkDbWriter::output_names()) names.push_back(n);
    names.push_back(kCheckpoint);
    for (const auto& n : names) {
        fs::remove(fs::path(dir) / n);
        fs::remove(fs::path(dir) / (n + ".tmp"));
    }
    remove_checkpoint_params(dir);
}

// The line Ctrl-C or SIGTERM prints (core/interrupt_note.h): the folder keeps finished parts from the run's first
// checkpoint (progress.json) on; before it, --resume starts over (it said "keeps its finished parts" then too).
void install_interrupt_note(const ToolContext& ctx, const ChunkOptions& o, bool checkpointed) {
    if (ctx.tool != "retro-chunk") return;   // (not retro-bench's timed runs)
    if (checkpointed)
        interrupt_note_install(ctx.tool, o.out,
                               o.force ? "continue with the same command, --resume in place of --force"
                                       : "continue with the same command and --resume");
    else
        interrupt_note_install_line(ctx.tool + ": interrupted before its first checkpoint; " + terminal_text(o.out, true) +
                                    " keeps nothing yet: run the same command again" +
                                    (o.force ? "" : " with --resume (it starts over)"));
}

// Sets up the output folder; returns the checkpoint to resume from (null json: fresh start), or
// sets `complete` when --resume finds a finished database.
nlohmann::json prepare_out_dir(const ToolContext& ctx, const ChunkOptions& o, bool& complete) {
    std::error_code ec;
    complete = false;
    if (o.force && o.resume)   // --force would remove the parts --resume means to keep
        user_error_in("--resume and --force", "contradict each other: --force starts over, --resume continues",
                      "give one of them");
    if (fs::exists(o.out, ec) && !fs::is_directory(o.out, ec)) user_error_in(o.out, "exists and is not a folder");
    std::vector<OutputInput> inputs{{"--tokenizer", o.tokenizer}};
    for (const auto& in : o.inputs) inputs.push_back({"the corpus", in});
    output_folder_guard(o.out, ctx.tool, inputs, false);   // --force removes only the database's own files
    bool non_empty = fs::is_directory(o.out, ec) && !fs::is_empty(o.out, ec);
    if (non_empty && !o.force && !o.resume) {
        if (fs::exists(fs::path(o.out) / "manifest.json", ec))   // (a finished database: nothing for --resume to continue)
            user_error_in(o.out, "already exists and is not empty: it holds a finished database",
                          "pass --force to replace it, or choose another --out (--resume checks it is this command's and "
                          "does nothing)");
        user_error_in(o.out, "already exists and is not empty",
                      "pass --force to replace it, --resume to continue a killed run, or choose another --out");
    }
    fs::create_directories(o.out, ec);
    if (ec) user_error_in(o.out, "cannot create folder: " + ec.message());
    install_interrupt_note(ctx, o, false);
    if (o.force) remove_previous_outputs(o.out);
    if (!o.resume) return nullptr;
    if (fs::exists(fs::path(o.out) / "manifest.json")) {
        complete = true;
        return nullptr;
    }
    std::string cp = (fs::path(o.out) / kCheckpoint).string();
    if (!fs::exists(cp)) return nullptr;   // killed before the first checkpoint: start again
    nlohmann::json checkpoint = json_read_file(cp);   // (listed for the tool frame's message on a field of the wrong type)
    // the params beside it (since session 54), held to the fingerprint progress.json records of them
    if (checkpoint.is_object() && !checkpoint.contains("params") && checkpoint.contains("params_fingerprint")) {
        const std::string pp = (fs::path(o.out) / checkpoint_params_name(checkpoint.value("params_fingerprint", std::string()))).string();
        if (!fs::exists(pp))
            user_error_in(pp, "missing: progress.json's checkpoint records its inputs and parameters there",
                          "start again with --force");
        if (fingerprint_file(pp) != checkpoint.value("params_fingerprint", std::string()))
            user_error_in(pp, "is not the file progress.json's checkpoint was written with (its fingerprint differs)",
                          "start again with --force");
        checkpoint["params"] = json_read_file(pp);
    }
    install_interrupt_note(ctx, o, true);
    return checkpoint;
}

// What must match for a checkpoint to be continued: everything that changes the output bytes.
nlohmann::json checkpoint_params(const nlohmann::json& parameters, const std::string& tok_path,
                                 const std::vector<CorpusFile>& files) {
    nlohmann::json p = parameters;
    p.erase("on_error");   // lines before a malformed one are the same either way
    p["tokenizer_fingerprint"] = fingerprint_file(tok_path);
    // each input by its absolute path (the same file named from another folder is the same input), size and
    // modification time: an input edited in place keeping its size (a line "fixed" as an error said) would otherwise
    // continue from blocks of its old text, under a manifest fingerprinting the new
    nlohmann::json in = nlohmann::json::array();
    for (const auto& f : files)
        in.push_back({{"path", fs::absolute(f.path).lexically_normal().string()},
                      {"given", f.path},   // as sources.jsonl records it (not compared: checkpoint_inputs_match)
                      {"size", fs::file_size(f.path)},
                      {"modified_ns", static_cast<std::int64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                                   fs::last_write_time(f.path).time_since_epoch())
                                                                   .count())}});
    p["inputs"] = in;
    return p;
}

// A checkpoint's params as compared for --resume: each input by its real path (a linked corpus folder, or the folder
// named from elsewhere, is the same input), without the spelling it was given as (checked on its own, below).
nlohmann::json checkpoint_params_compared(nlohmann::json p) {
    if (!p.is_object() || !p.contains("inputs") || !p["inputs"].is_array()) return p;
    for (auto& f : p["inputs"]) {
        if (!f.is_object()) continue;
        f.erase("given");
        std::error_code ec;
        if (f.contains("path") && f["path"].is_string()) f["path"] = fs::weakly_canonical(f["path"].get<std::string>(), ec).string();
    }
    return p;
}

// Encodes every document of a block on all threads; ids[i] belongs to block.docs[i].
void encode_block(const Tokenizer& tok, InputBlock& block, std::vector<std::vector<int>>& ids) {
    std::int64_t n = static_cast<std::int64_t>(block.docs.size());
    ids.resize(block.docs.size());
    std::exception_ptr first;
    std::mutex mutex;
#pragma omp parallel for schedule(dynamic, 1) num_threads(thread_count())
    for (std::int64_t i = 0; i < n; ++i) {
        try {
            ids[i] = tok.encode(block.docs[i].text);
            std::string().swap(block.docs[i].text);
        } catch (...) {
            std::lock_guard<std::mutex> lock(mutex);
            if (!first) first = std::current_exception();
        }
    }
    if (first) std::rethrow_exception(first);
}

// Whether a finished database's manifest records these parameters, this tokenizer and these corpus files.
// What differs between this command and the finished database `done` (its manifest), as a refusal names it; ""
// when it is this command's database.
std::string database_difference(const nlohmann::json& done, const nlohmann::json& parameters, const std::string& tok_path,
                                const std::vector<CorpusFile>& files) {
    if (std::string d = json_first_difference(done.value("parameters", nlohmann::json()), parameters, "parameters"); !d.empty())
        return d;
    if (manifest_input(done, "tokenizer", "fingerprint") != fingerprint_file(tok_path)) {
        const std::string was = manifest_input(done, "tokenizer", "path");
        if (path_resolved(tok_path) == path_resolved(was))   // (it said "X is not the one it was made with (X)")
            return "the tokenizer " + tok_path + " has changed since the database was made (retrained or replaced)";
        return "the tokenizer " + tok_path + " is not the one it was made with (" + was + ")";
    }
    return corpus_inputs_difference(done, files, "the database");
}

void write_manifest(const ToolContext& ctx, const ChunkOptions& o, const nlohmann::json& parameters,
                    const std::string& tok_path, const std::vector<CorpusFile>& files, const CorpusCounts& c,
                    const ChunkDbCounts& k) {
    Manifest m(ctx);
    m.parameters() = parameters;
    m.add_input("tokenizer", tok_path);
    for (const auto& f : files) m.add_input("corpus", f.path);
    m.extra()["corpus"] = {{"files", c.files},
                           {"documents", c.documents},
                           {"bytes", c.bytes},
                           {"empty_skipped", c.empty_skipped},
                           {"malformed_skipped", c.malformed_skipped},
                           {"invalid_utf8_replaced", c.invalid_utf8_replaced}};
    m.extra()["stats"] = chunk_stats_json(k, o.chunk_size);
    m.extra()["threads"] = thread_count();
    for (const auto& name : ChunkDbWriter::output_names()) m.add_output(o.out, name);
    m.write(o.out);
}

}  // namespace

void chunk_parse_shard(const std::string& text, ChunkOptions& opts) {
    const Shard s = shard_parse(text);
    opts.shard_index = s.index;
    opts.shard_count = s.count;
}

namespace {

// --resume of a finished database: the tokenizer fingerprint its manifest records ("" otherwise), so that the old
// model a stopped retro-tokenizer --force left, byte for byte the one recorded, is still read and the database found
// complete (text/tokenizer_folder.h; a helper's review, session 70)
std::string resumed_tokenizer_fingerprint(const ChunkOptions& o) {
    std::error_code ec;
    if (!o.resume || !fs::exists(fs::path(o.out) / "manifest.json", ec)) return "";
    try {
        return manifest_input(json_read_file((fs::path(o.out) / "manifest.json").string()), "tokenizer", "fingerprint");
    } catch (const std::exception&) {   // (a damaged manifest: named where the resume reads it)
        return "";
    }
}

}  // namespace

void chunk_corpus(const ToolContext& ctx, const ChunkOptions& o) {
    check_options(o);
    std::string tok_path = tokenizer_resolve_path(o.tokenizer);
    Tokenizer tok(tok_path, resumed_tokenizer_fingerprint(o));
    DType dtype = tok.vocab_size() <= 65536 ? DType::U16 : DType::I32;
    auto files = corpus_list_files(o.inputs, o.corpus);

    bool complete = false;
    NewOutputFolder new_out(o.out);   // an empty corpus, refused at the end, leaves no folder behind
    nlohmann::json checkpoint = prepare_out_dir(ctx, o, complete);
    nlohmann::json parameters = {{"chunk_size", o.chunk_size},       {"seq_len", o.seq_len},
                                 {"rows_per_seq", o.seq_len / o.chunk_size},
                                 {"block_docs", o.block_docs},       {"block_bytes", o.block_bytes},
                                 {"shard_index", o.shard_index},     {"shard_count", o.shard_count},
                                 {"glob", o.corpus.glob},            {"text_key", o.corpus.text_key},
                                 {"on_error", o.corpus.on_error == OnError::SKIP ? "skip" : "fail"},
                                 {"token_dtype", dtype_name(dtype)}, {"vocab_size", tok.vocab_size()},
                                 {"special_ids", {{"pad", 0}, {"unk", 1}, {"bos", 2}, {"eos", 3}}}};
    if (complete) {   // --resume of a finished database: nothing to do, if it is this command's database
        if (const std::string d = database_difference(manifest_read(o.out), parameters, tok_path, files); !d.empty())
            user_error_in(o.out, "already holds a complete database made from other inputs, tokenizer or parameters: " + d,
                          "choose another --out, or pass --force to replace it");
        // a kill between the manifest and the checkpoint's removal left the checkpoint in the finished folder for good
        // (the interrupt campaign, session 55)
        std::error_code ec;
        fs::remove(fs::path(o.out) / kCheckpoint, ec);
        remove_checkpoint_params(o.out);
        manifest_refuse_missing_outputs(o.out, "retro-chunk");
        log_info(o.out + " is already complete (manifest.json exists); nothing to resume");
        return;
    }
    nlohmann::json cp_params = checkpoint_params(parameters, tok_path, files);
    std::string cp_path = (fs::path(o.out) / kCheckpoint).string();
    const nlohmann::json* state = nullptr;
    BlockPlan plan{o.block_docs, o.block_bytes, o.shard_index, o.shard_count, 0};
    if (!checkpoint.is_null()) {
        nlohmann::json was = checkpoint.value("params", nlohmann::json());
        // a checkpoint of a version before session 47 records each input as [path as given, size]: held to those
        if (was.is_object() && was.value("inputs", nlohmann::json()).is_array() && !was["inputs"].empty() &&
            was["inputs"][0].is_array()) {
            nlohmann::json legacy = cp_params;
            legacy["inputs"] = nlohmann::json::array();
            for (const auto& f : files) legacy["inputs"].push_back({f.path, fs::file_size(f.path)});
            if (was == legacy) was = cp_params;
        }
        if (was != cp_params && checkpoint_params_compared(was) == checkpoint_params_compared(cp_params)) {
            // the same files under another spelling (a linked folder, a path relative to another folder): sources.jsonl
            // records each file as given, and the database would hold both spellings
            const nlohmann::json& was_in = was["inputs"];
            for (std::size_t i = 0; i < was_in.size(); i++)
                if (was_in[i].contains("given") && was_in[i]["given"] != cp_params["inputs"][i]["given"])
                    user_error_in(cp_path, cat("records the corpus file '", was_in[i]["given"].get<std::string>(),
                                               "' as the stopped run named it; this run names it '",
                                               cp_params["inputs"][i]["given"].get<std::string>(),
                                               "' (sources.jsonl records each file as given)"),
                                  "resume with the corpus named as the stopped run named it, from the folder it ran in, or "
                                  "start again with --force");
            was = cp_params;   // (a checkpoint of a version that did not record the spelling: the same files)
        }
        if (was != cp_params) {
            was = checkpoint_params_compared(was);   // (real paths in the messages below: a new file is new however named)
            const nlohmann::json cp_compared = checkpoint_params_compared(cp_params);
            // the same files, one of them changed since (an edit in place): named as such
            const nlohmann::json& was_in = was.is_object() ? was.value("inputs", nlohmann::json()) : nlohmann::json();
            const nlohmann::json& now_in = cp_compared["inputs"];
            nlohmann::json was_rest = was, now_rest = cp_compared;
            if (was_rest.is_object()) was_rest.erase("inputs");
            now_rest.erase("inputs");
            // files added to or gone from the corpus since: named (the difference printed both lists cut to the same
            // prefix, a new file nowhere in sight)
            if (was_rest == now_rest && was_in.is_array()) {
                std::set<std::string> was_paths, now_paths;
                for (const auto& f : was_in)
                    if (f.is_object()) was_paths.insert(f.value("path", std::string()));
                for (const auto& f : now_in) now_paths.insert(f.value("path", std::string()));
                for (const auto& p : now_paths)
                    if (!was_paths.count(p))
                        user_error_in(p, "is new in the corpus since the stopped run listed it: the blocks to come would "
                                         "not be the ones it numbered",
                                      "move it out of the corpus and resume (--glob is part of the job), or start again with --force");
                for (const auto& p : was_paths)
                    if (!now_paths.count(p))
                        user_error_in(p, "was read by the stopped run and is no longer in the corpus",
                                      "put it back and resume, or start again with --force");
            }
            if (was_rest == now_rest && was_in.is_array() && was_in.size() == now_in.size())
                for (std::size_t i = 0; i < now_in.size(); i++)
                    if (was_in[i].is_object() && was_in[i].value("path", std::string()) == now_in[i]["path"] && was_in[i] != now_in[i])
                        user_error_in(now_in[i]["path"].get<std::string>(),
                                      "has changed since the stopped run listed it (its size or modification time differs): the "
                                      "blocks it read may hold its old text, and the block plan its old size",
                                      "start again with --force");
            user_error_in(cp_path, "was written by a run with other inputs, tokenizer or parameters: " +
                                       json_first_difference(was, cp_compared, "params"),
                          "repeat the first run's command with --resume (inputs unchanged), or start again with --force");
        }
        state = &checkpoint.at("writer");
        plan.first_block = checkpoint.at("next_block").get<std::int64_t>();
        // (-1 resumed "at input block -1" and wrote 647 documents from 400 files, exit 0)
        if (plan.first_block < 0 || (plan.first_block == 0 && state->at("docs").get<std::int64_t>() != 0))
            user_error_in(cp_path, cat("records next_block ", plan.first_block, " after ", state->at("docs").get<std::int64_t>(),
                                       " documents, which do not agree"),
                          "start again with --force");
        log_info("resuming at input block " + std::to_string(plan.first_block) + " (" +
                 std::to_string(state->at("docs").get<std::int64_t>()) + " documents done)");
    }
    fs::remove(fs::path(o.out) / "manifest.json");

    ChunkDbWriter writer(o.out, dtype, o.chunk_size, o.seq_len / o.chunk_size, state);
    std::int64_t total_bytes = 0;
    for (const auto& f : files) total_bytes += static_cast<std::int64_t>(fs::file_size(f.path));
    Progress progress("chunking", total_bytes, "B");
    // the params once (under their fingerprint's name), the position at every checkpoint
    const std::string params_text = cp_params.dump(1) + "\n";
    const std::string params_fingerprint = fingerprint_bytes(params_text.data(), params_text.size());
    const std::string params_name = checkpoint_params_name(params_fingerprint);
    const std::string params_path = (fs::path(o.out) / params_name).string();
    if (!fs::exists(params_path)) write_file_atomic(params_path, params_text);
    bool params_named = false;   // a progress.json names params_name: the other params files can go
    auto save = [&](std::int64_t next_block) {
        nlohmann::json cp = {{"params_fingerprint", params_fingerprint}, {"next_block", next_block}, {"writer", writer.state()}};
        write_file_atomic(cp_path, cp.dump(1) + "\n");
        if (!params_named) {
            remove_checkpoint_params(o.out, params_name);
            params_named = true;
            install_interrupt_note(ctx, o, true);
        }
        if (writer.counts().docs > 0) new_out.keep();   // resumable work from here
    };
    auto last_save = std::chrono::steady_clock::now();
    std::int64_t next_block = plan.first_block;
    // Block b is written (chunked, appended, flushed, checkpointed) on a second thread while block b+1 is
    // encoded, so the serial writing overlaps the parallel encoding. The bytes written do not change.
    auto write_block = [&](InputBlock& blk, std::vector<std::vector<int>>& blk_ids) {
        std::vector<std::int32_t> rows;
        for (std::size_t i = 0; i < blk.docs.size(); ++i) {
            rows.clear();
            chunk_append_rows(blk_ids[i], o.chunk_size, rows);
            writer.append_document(rows.data(), static_cast<std::int64_t>(rows.size()) / o.chunk_size,
                                   static_cast<std::int64_t>(blk_ids[i].size()) + 2, std::move(blk.docs[i].source));
        }
        writer.flush();
        next_block = blk.index + 1;
        progress.set(blk.input_bytes_done);
        auto now = std::chrono::steady_clock::now();
        if (std::chrono::duration<double>(now - last_save).count() >= o.checkpoint_seconds) {
            save(next_block);
            last_save = now;
        }
    };
    BlockReader reader(files, o.corpus, plan);
    InputBlock block, writing;
    std::vector<std::vector<int>> ids, writing_ids;
    std::future<void> pending;
    while (reader.next(block)) {
        encode_block(tok, block, ids);
        if (pending.valid()) pending.get();   // rethrows the writer's error
        std::swap(block, writing);
        std::swap(ids, writing_ids);
        pending = std::async(std::launch::async, [&] { write_block(writing, writing_ids); });
    }
    if (pending.valid()) pending.get();
    progress.set(total_bytes);
    progress.finish();
    const CorpusCounts& counts = reader.counts();
    if (o.shard_count > 1 && reader.blocks() < o.shard_count && counts.documents > 0)   // (a walk-through, session 58)
        log_warn(cat("the corpus is ", reader.blocks(), " input block(s) of --block-docs ", o.block_docs, " / --block-bytes ",
                     o.block_bytes, ", fewer than the ", o.shard_count, " shards: ",
                     writer.counts().docs == 0 ? "this shard holds no document" : "some shards hold no document",
                     "; lower them (the same in every shard) to spread the corpus"));
    if (counts.documents == 0)
        user_error_in(o.inputs.front(), "the corpus holds no non-empty document (" + std::to_string(counts.files) +
                                            " files, " + std::to_string(counts.empty_skipped) + " empty skipped)");
    // the whole corpus in one database (no --shard): every document read is in it, or the resume point was wrong
    if (o.shard_count <= 1 && writer.counts().docs != counts.documents) {
        if (!checkpoint.is_null())
            user_error_in(cp_path, cat("resumed a database that would hold ", writer.counts().docs, " documents of the corpus's ",
                                       counts.documents, ": its resume point does not agree with the kept files"),
                          "start again with --force");
        RETRO_CHECK(false, "the database holds ", writer.counts().docs, " documents, the corpus ", counts.documents);
    }
    save(next_block);   // a run killed while committing resumes from here
    writer.commit();
    write_manifest(ctx, o, parameters, tok_path, files, counts, writer.counts());
    fs::remove(cp_path);
    remove_checkpoint_params(o.out);
    const ChunkDbCounts& k = writer.counts();
    log_info("wrote " + o.out + ": " + std::to_string(k.docs) + " documents, " + std::to_string(k.chunks) +
             " chunks, " + std::to_string(k.seqs) + " sequences, " + std::to_string(k.tokens) + " tokens (" +
             std::to_string(counts.empty_skipped) + " empty skipped, " + std::to_string(counts.malformed_skipped) +
             " malformed skipped, " + std::to_string(counts.invalid_utf8_replaced) + " invalid UTF-8 replaced)");
}

}  // namespace retro
