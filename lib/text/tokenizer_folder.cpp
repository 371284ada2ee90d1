// Implementation of tokenizer_folder.h.
#include "text/tokenizer_folder.h"

#include <filesystem>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/fingerprint.h"
#include "core/interrupt_note.h"
#include "core/log.h"
#include "core/manifest.h"
#include "core/output_folder.h"
#include "core/terminal_text.h"
#include "core/threads.h"

namespace fs = std::filesystem;

namespace retro {

namespace {

// Whether `file` is retro-tokenizer's mark (whole), or the empty start of one a kill cut short (`partial_ok`).
bool is_state_mark(const fs::path& file, bool partial_ok) {
    std::error_code ec;
    if (partial_ok && fs::is_regular_file(file, ec) && fs::file_size(file, ec) == 0) return true;
    return json_file_tool(file.string()) == "retro-tokenizer";
}

// The mark removed, and a copy of it a kill left as it was written; never a state.json of anyone else's.
void remove_state_mark(const std::string& out_dir) {
    std::error_code ec;
    const fs::path mark = fs::path(out_dir) / kTokenizerStateFile, tmp = mark.string() + ".tmp";
    if (is_state_mark(mark, false)) fs::remove(mark, ec);
    if (is_state_mark(tmp, true)) fs::remove(tmp, ec);
}

// The folder that holds `model_path` itself (a link's target's: the mark is beside the file, not the link), and
// whether a retro-tokenizer training marks it unfinished: its state.json and no manifest.json.
struct ModelFolder {
    fs::path dir;
    bool unfinished = false;
};

ModelFolder model_folder(const std::string& model_path) {
    std::error_code ec;
    fs::path file = fs::canonical(model_path, ec);
    if (ec) file = fs::absolute(model_path, ec);   // (missing: its folder as named)
    ModelFolder f{file.parent_path(), false};
    if (f.dir.empty()) f.dir = ".";
    // finished where its manifest is there (a stale mark beside it is the next run's to remove)
    f.unfinished = !fs::exists(f.dir / "manifest.json", ec) && is_state_mark(f.dir / kTokenizerStateFile, false);
    return f;
}

[[noreturn]] void refuse_unfinished(const std::string& model_path, const fs::path& dir, bool has_model) {
    if (const std::string who = output_folder_writer(dir.string()); !who.empty())
        user_error_in(model_path, "is being written: a retro-tokenizer training is replacing it now (" + who + ")",
                      "wait for it to end");
    user_error_in(model_path,
                  has_model ? "is the model of a retro-tokenizer training stopped before its end (no manifest.json beside "
                              "it; its folder's state.json marks the training unfinished)"
                            : "does not exist: a retro-tokenizer training stopped before it wrote the model (its folder's "
                              "state.json marks the training unfinished)",
                  "finish it: run the same retro-tokenizer train command again with --resume");
}

}  // namespace

void tokenizer_refuse_unfinished(const std::string& model_path, const std::string& bytes,
                                 const std::string& vouched_fingerprint) {
    const ModelFolder f = model_folder(model_path);
    if (!f.unfinished) return;
    // the bytes a caller already held to its record (a database's tokenizer): an old model a stopped --force left
    if (!vouched_fingerprint.empty() && fingerprint_bytes(bytes.data(), bytes.size()) == vouched_fingerprint) return;
    refuse_unfinished(model_path, f.dir, true);
}

void tokenizer_refuse_missing_unfinished(const std::string& model_path) {
    if (const ModelFolder f = model_folder(model_path); f.unfinished) refuse_unfinished(model_path, f.dir, false);
}

std::string tokenizer_resolve_path(const std::string& model) {
    std::error_code ec;
    if (fs::is_directory(model, ec)) return (fs::path(model) / "tok.model").string();
    return model;
}

void tokenizer_train_to_folder(const ToolContext& ctx, const std::vector<std::string>& inputs,
                               const CorpusOptions& corpus, const TokenizerTrainOptions& opts,
                               const std::string& out_dir, bool force, bool resume) {
    tokenizer_train_options_check(opts);   // the options before the inputs
    if (force && resume)
        user_error_in("--resume and --force", "contradict each other: --force trains again, --resume keeps a finished one",
                      "give one of them");
    std::string model_path = (fs::path(out_dir) / "tok.model").string();
    std::vector<OutputInput> guarded;
    for (const auto& in : inputs) guarded.push_back({"the corpus", in});
    output_folder_guard(out_dir, ctx.tool, guarded, false);
    // the training writes its mark there as it ends (and removes it): a state.json of anyone else's (a checkpoint's,
    // the user's own) would be lost (a helper's review, session 70)
    if (const fs::path mark = fs::path(out_dir) / kTokenizerStateFile; fs::exists(mark) && !is_state_mark(mark, false))
        user_error_in(out_dir, "holds a state.json retro-tokenizer did not write (a checkpoint's, or your own), which a "
                               "training would replace with its mark",
                      "choose another --out (a folder of the tokenizer's own)");
    const nlohmann::json parameters = {{"vocab_size", opts.vocab_size},       {"model_type", opts.model_type},
                                       {"max_sentences", opts.max_sentences}, {"character_coverage", opts.character_coverage},
                                       {"byte_fallback", opts.byte_fallback}, {"seed", opts.seed},
                                       {"glob", corpus.glob},                 {"text_key", corpus.text_key},
                                       {"special_ids", {{"pad", 0}, {"unk", 1}, {"bos", 2}, {"eos", 3}}}};
    if (fs::exists(model_path) && !force && !resume && !fs::exists(fs::path(out_dir) / "manifest.json"))
        user_error_in(out_dir, fs::exists(fs::path(out_dir) / kTokenizerStateFile)
                                   ? "holds a tok.model without its manifest.json: a training stopped as it wrote them "
                                     "(its state.json marks it)"
                                   : "holds a tok.model without its manifest.json (a training stopped as it wrote them, or a "
                                     "model RetroKit did not train)",
                      "run the same command with --resume or --force to train it again (that tok.model is replaced), or "
                      "choose another --out");
    if (fs::exists(model_path) && !force && !resume)
        user_error_in(out_dir, "already holds a tokenizer", "pass --force to replace it, --resume to keep it where it is this "
                                                            "command's, or choose another --out");
    auto files = corpus_list_files(inputs, corpus);
    // --resume: a pipeline script run again keeps the tokenizer it made (training again, as --force did, made the
    // same model only while nothing changed, and orphaned the databases chunked with it otherwise)
    if (resume && fs::exists(model_path) && fs::exists(fs::path(out_dir) / "manifest.json")) {
        const nlohmann::json done = manifest_read(out_dir);
        std::string diff = json_first_difference(done.value("parameters", nlohmann::json()), parameters, "parameters");
        if (diff.empty()) diff = corpus_inputs_difference(done, files, "the tokenizer");
        if (!diff.empty())
            user_error_in(out_dir, "already holds a tokenizer made from other inputs or parameters: " + diff,
                          "choose another --out, or pass --force to train it again (databases chunked with the old "
                          "one are then refused with it)");
        // sentencepiece's model depends on the thread count: kept (it is this corpus's and these options' tokenizer, and
        // the databases chunked with it stay valid), with a word where this run's count differs
        const std::int64_t threads = opts.threads > 0 ? opts.threads : thread_count();
        if (done.contains("threads") && done["threads"].is_number_integer() && done["threads"].get<std::int64_t>() != threads)
            log_warn(cat(out_dir, " was trained on ", done["threads"].get<std::int64_t>(), " threads, this run has ", threads,
                         ": kept; training again here could give another model (--threads ", done["threads"].get<std::int64_t>(),
                         " gives the same)"));
        manifest_refuse_missing_outputs(out_dir, "retro-tokenizer train");
        remove_state_mark(out_dir);   // a run killed between its manifest and the mark's removal left it
        log_info(out_dir + " is already complete (manifest.json exists); nothing to resume");
        return;
    }
    // the folder made (and a file tried in it) before the training, which takes minutes on a large corpus; a refused
    // or failed run removes a folder it made
    NewOutputFolder made(out_dir);
    std::error_code ec;
    const bool made_here = !fs::exists(out_dir, ec);
    fs::create_directories(out_dir, ec);
    if (ec) user_error_in(out_dir, "cannot be made: " + ec.message(), "choose another --out");
    folder_writable_check(out_dir, out_dir);
    // Ctrl-C during the training (minutes on a large corpus) says so, rather than ending silently; Manifest::write
    // takes the line back once the folder is complete
    interrupt_note_install_line("retro-tokenizer: interrupted; no tokenizer was written to " + terminal_text(out_dir, true) +
                                (force && fs::exists(model_path) ? " (it keeps the one it held)" : "") +
                                ": run the same command again");
    if (made_here)   // (an empty --out was left behind, and deep/a of --out deep/a/b)
        interrupt_note_remove_empty(made.resolved(), made.outermost());
    TokenizerTrainResult r = tokenizer_train(files, corpus, opts);
    // the manifest's inputs (the corpus files hashed: seconds on a large corpus) before tok.model is written, so that a
    // kill leaves a folder without a model rather than a model without its manifest (one in ten kills of a helper's
    // pass did, and retro-chunk took the unrecorded model); under --force the old tokenizer stays whole, manifest and
    // all, until the new model replaces it (its manifest was removed before the hashing: a review, session 54)
    Manifest m(ctx);
    m.parameters() = parameters;
    m.extra()["corpus"] = {{"files", r.counts.files},
                           {"documents", r.counts.documents},
                           {"bytes", r.counts.bytes},
                           {"empty_skipped", r.counts.empty_skipped},
                           {"malformed_skipped", r.counts.malformed_skipped},
                           {"invalid_utf8_replaced", r.counts.invalid_utf8_replaced},
                           {"sentences_seen", r.sentences_seen},
                           {"long_lines_split", r.long_lines_split},
                           {"sentences_used", r.sentences_used}};
    m.extra()["vocab_size"] = r.vocab_size;
    // sentencepiece's trainer splits its work by thread, and the model can differ with their number
    m.extra()["threads"] = opts.threads > 0 ? opts.threads : thread_count();
    for (const auto& f : files) m.add_input("corpus", f.path);
    m.inputs_check();   // the corpus as the training read it, before the old tokenizer goes (core/input_stamps.h)
    // the mark first, then the manifest goes: from here to the new manifest the folder says it is unfinished, and the
    // tok.model it holds (the old one, or the new one without its record) is refused by every reader (Tokenizer's
    // constructor), where a kill between the model and its manifest left a whole model retro-chunk took (the kill
    // soak, session 68)
    write_file_atomic((fs::path(out_dir) / kTokenizerStateFile).string(),
                      nlohmann::json{{"tool", "retro-tokenizer"}, {"run", "a training"}}.dump(2) + "\n");
    // from here a stop leaves the folder marked unfinished: tok.model (the old one under --force, the new one, or none
    // yet) without its manifest (it said "no tokenizer was written": the helper's interrupt campaign, session 55; and
    // "holds tok.model" before there was one: session 70's soak)
    fs::remove(fs::path(out_dir) / "manifest.json");   // the folder is incomplete until it is rewritten
    interrupt_note_install_line("retro-tokenizer: interrupted; " + terminal_text(out_dir, true) +
                                " is unfinished (its state.json marks the training, and no tool reads its tok.model "
                                "without a manifest.json): run the same command again" +
                                (force ? ", --resume in place of --force" : " with --resume") + " (it trains again)");
    write_file_atomic(model_path, r.model_bytes);
    m.add_output(out_dir, "tok.model");
    m.write(out_dir);
    remove_state_mark(out_dir);   // after the manifest: a kill between the two leaves a finished folder (its manifest)
    log_info("wrote " + model_path + " (vocabulary " + std::to_string(r.vocab_size) + ", " +
             std::to_string(r.counts.documents) + (r.counts.documents == 1 ? " document, " : " documents, ") + std::to_string(r.counts.empty_skipped) +
             " empty skipped, " + std::to_string(r.counts.invalid_utf8_replaced) + " invalid UTF-8 sequences replaced)");
}

}  // namespace retro
