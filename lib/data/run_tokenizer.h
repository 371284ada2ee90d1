// Which tokenizer a database or a run's ids come from, so that runs, databases and weights of different
// tokenizers are not mixed: the same token id means another piece under another tokenizer, and a model
// evaluated on or initialised from such ids gives numbers that look right and mean nothing (retro-generate
// refused it; retro-train eval, --baseline and --init-from did not).
// provides: db_tokenizer_fingerprint, run_tokenizer, require_same_tokenizer
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace retro {

// The fingerprint of the tokenizer a database was chunked with: retro-chunk records it among the manifest's
// inputs (role "tokenizer"); "" when the manifest is missing or records none.
std::string db_tokenizer_fingerprint(const nlohmann::json& db_manifest);

struct RunTokenizer {
    std::string fingerprint;   // "" where it cannot be told (no manifest yet, a database moved away or rebuilt since,
                               // a bare weights file)
    std::string db;            // the database the run trained on, as its manifest records it
};
// The tokenizer of the database the run at `path` trained on: `path` is a run folder, one of its checkpoints
// (RUN/checkpoints/step_N) or a file inside either (a weights file given to --init-from). From the run's manifest;
// for a run without one (stopped, or still training), from its finished checkpoints' state.json.
RunTokenizer run_tokenizer(const std::string& path);

// UserError naming `where` when both fingerprints are known and differ: "`where`: uses another tokenizer than
// `other_what`" with `fix`.
void require_same_tokenizer(const std::string& where, const std::string& fingerprint, const std::string& other_what,
                            const std::string& other_fingerprint, const std::string& fix);

}  // namespace retro
