// retro-generate's batch output (--prompts in.jsonl --output out.jsonl): what may be written, when a finished file
// already answers a --resume, and the job a journal records (generate/generate_journal.h).
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "generate/generate_run.h"

namespace retro {

// Everything that decides a batch's text: the prompts as read (their fingerprint, not the file's bytes: --prompts may
// be a pipe), the weights by path, size and modification time, the database and index by their manifests'
// fingerprints, the tokenizer by its own, and every sampling and length option; not --batch-size or --threads, which
// change no text. A journal recording another job is refused.
nlohmann::json generate_journal_job(const GenerateRunOptions& cli, const std::vector<std::string>& prompts,
                                    const std::vector<nlohmann::json>& ids);

// UserError, before any work, when --output (a file: not "-") is the --prompts file or --prompts is its journal; is
// not a regular file (a folder, a device such as /dev/null, a pipe, a symbolic link: the final rename would replace
// it); lies inside the run, --db, --index or --checkpoint folder; or sits in a folder that is missing or not writable.
void generate_output_check(const GenerateRunOptions& cli);

// Whether `output` holds one line per prompt, in order, with the prompts and ids read (a run that finished).
bool generate_output_complete(const std::string& output, const std::vector<std::string>& prompts,
                              const std::vector<nlohmann::json>& ids);

}  // namespace retro
