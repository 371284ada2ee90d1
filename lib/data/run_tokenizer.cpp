// Implementation of run_tokenizer.h.
#include "data/run_tokenizer.h"

#include <filesystem>

#include "core/error.h"
#include "core/log.h"
#include "core/manifest.h"

namespace fs = std::filesystem;

namespace retro {

std::string db_tokenizer_fingerprint(const nlohmann::json& db_manifest) {
    if (!db_manifest.is_object()) return "";
    return manifest_input(db_manifest, "tokenizer", "fingerprint");
}

namespace {

// The tokenizer fingerprint a finished checkpoint's state.json records (since session 47), or "".
std::string checkpoint_tokenizer(const fs::path& checkpoint) {
    std::error_code ec;
    if (!fs::exists(checkpoint / "DONE", ec)) return "";
    try {
        const nlohmann::json st = json_read_file((checkpoint / "state.json").string());
        return st.is_object() ? st.value("tokenizer_fingerprint", std::string()) : std::string();
    } catch (const std::exception&) {
        return "";   // an unreadable state tells nothing here; the reader of the weights names it
    }
}

// A run without a manifest (stopped or still training): what its checkpoints record (given one, that one; else the
// first finished one that records it — every checkpoint of a run read the same database).
std::string unfinished_run_tokenizer(const fs::path& run, const fs::path& checkpoint) {
    if (!checkpoint.empty()) return checkpoint_tokenizer(checkpoint);
    std::error_code ec;
    for (fs::directory_iterator it(run / "checkpoints", ec), end; !ec && it != end; it.increment(ec))
        if (const std::string fp = checkpoint_tokenizer(it->path()); !fp.empty()) return fp;
    return "";
}

}  // namespace

RunTokenizer run_tokenizer(const std::string& path) {
    std::error_code ec;
    fs::path run = fs::absolute(path, ec).lexically_normal(), checkpoint;
    if (run.filename().empty()) run = run.parent_path();                          // "run/checkpoints/step_5/"
    if (!fs::is_directory(run, ec)) run = run.parent_path();                       // a weights file
    if (run.parent_path().filename() == "checkpoints") {                          // a checkpoint
        checkpoint = run;
        run = run.parent_path().parent_path();
    }
    if (!fs::exists(run / "manifest.json", ec)) return {unfinished_run_tokenizer(run, checkpoint), ""};
    RunTokenizer out;
    try {
        const nlohmann::json m = manifest_read(run.string());
        if (m.value("tool", std::string()) != "retro-train") return {};
        out.db = manifest_input(m, "db", "path");
        if (out.db.empty() || !fs::exists(fs::path(out.db) / "manifest.json", ec)) return out;
        const nlohmann::json db = manifest_read(out.db);
        // the folder there now must be the one the run read: a database rebuilt since (another tokenizer, --force)
        // tells nothing about the run's ids
        if (folder_fingerprint(db) != manifest_input(m, "db", "fingerprint")) return out;
        out.fingerprint = db_tokenizer_fingerprint(db);
    } catch (const UserError&) {
        return {};   // an unreadable manifest tells nothing here; the reader of the weights names it
    }
    return out;
}

void outside_weights_warning(const std::string& run, const std::string& tokenizer, std::int64_t pieces,
                             std::int64_t num_tokens) {
    log_warn(cat(run, " records no training database or tokenizer (weights from outside RetroKit): they must have been "
                      "trained on the ids of ", tokenizer, ", or what they give is noise",
                 pieces > 0 && pieces != num_tokens
                     ? cat(" (its ", pieces, " pieces are not the model's num_tokens ", num_tokens, ")")
                     : std::string(),
                 "; RETRO-pytorch's own pipeline tokenises with bert-base-cased (docs/retro-pytorch.md)"));
}

void require_same_tokenizer(const std::string& where, const std::string& fingerprint, const std::string& other_what,
                            const std::string& other_fingerprint, const std::string& fix) {
    if (!fingerprint.empty() && !other_fingerprint.empty() && fingerprint != other_fingerprint)
        user_error_in(where, "uses another tokenizer than " + other_what, fix);
}

}  // namespace retro
