// A tokenizer folder, as `retro-tokenizer train` writes it: tok.model + manifest.json, and while a training writes
// them its state.json mark, under which every reader refuses the model; and the path of the model given either the
// folder or the file. (The encode/decode filters: text/tokenizer_stream.h.)
// provides: tokenizer_resolve_path, tokenizer_train_to_folder, tokenizer_refuse_unfinished,
//           tokenizer_refuse_missing_unfinished
#pragma once
#include <string>
#include <vector>

#include "core/tool_context.h"
#include "text/corpus.h"
#include "text/tokenizer.h"

namespace retro {

// `model` may be a tok.model file or a folder holding one.
std::string tokenizer_resolve_path(const std::string& model);

// The mark `retro-tokenizer train` writes into its folder before it removes the old manifest, and removes after the
// new one is written ({"tool": "retro-tokenizer", "run": "a training"}): tok.model beside it and no manifest.json is
// a model being written, or left by a training stopped before its end.
inline constexpr const char* kTokenizerStateFile = "state.json";

// Throws UserError naming `model_path` (a tok.model, read as `bytes`) when the folder that holds the file (a link
// followed) has that mark and no manifest.json: a run writing it now (named, "wait for it to end") or one stopped
// before its end ("run it again with --resume"). Run by Tokenizer's constructor after it read the bytes, so that a
// model read while a training replaced it is judged by the folder as it is after the read; every tool refuses such a
// model. A tok.model in a folder without the mark (one made by hand, or by spm_train) passes, as do bytes whose
// fingerprint is `vouched_fingerprint` (a database's record of its tokenizer: the old model a stopped --force left).
void tokenizer_refuse_unfinished(const std::string& model_path, const std::string& bytes,
                                 const std::string& vouched_fingerprint = "");
// The same for a model path that does not exist: refused naming the training that stopped before writing it.
void tokenizer_refuse_missing_unfinished(const std::string& model_path);

// Trains into out_dir. An existing tokenizer is refused unless `force` (trained again) or `resume`: kept where its
// manifest records this command's parameters and corpus files ("already complete; nothing to resume"), refused
// naming the difference otherwise; a folder without a finished tokenizer is trained into.
void tokenizer_train_to_folder(const ToolContext& ctx, const std::vector<std::string>& inputs,
                               const CorpusOptions& corpus, const TokenizerTrainOptions& opts,
                               const std::string& out_dir, bool force, bool resume = false);

}  // namespace retro
