// Which tokenizer a database or a run's ids come from, so that runs, databases and weights of different
// tokenizers are not mixed: the same token id means another piece under another tokenizer, and a model
// evaluated on or initialised from such ids gives numbers that look right and mean nothing (retro-generate
// refused it; retro-train eval, --baseline and --init-from did not).
// provides: db_tokenizer_fingerprint, run_tokenizer, require_same_tokenizer, outside_weights_warning
#pragma once
#include <nlohmann/json.hpp>
#include <cstdint>
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

// The warning retro-generate and retro-train eval give weights from outside RetroKit (a run folder of config.json
// alone): nothing records the ids they were trained on, and another tokenizer's ids read here as other words
// (RETRO-pytorch's own pipeline uses bert-base-cased ids; docs/retro-pytorch.md). `tokenizer` names the tokenizer
// whose ids they must be; its piece count is said where it is not the config's num_tokens (0: unknown).
void outside_weights_warning(const std::string& run, const std::string& tokenizer, std::int64_t pieces,
                             std::int64_t num_tokens);

}  // namespace retro
