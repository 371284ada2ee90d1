// A tokenizer folder, as `retro-tokenizer train` writes it: tok.model + manifest.json; and the path of
// the model given either the folder or the file. (The encode/decode filters: text/tokenizer_stream.h.)
// provides: tokenizer_resolve_path, tokenizer_train_to_folder
#pragma once
#include <string>
#include <vector>

#include "core/tool_context.h"
#include "text/corpus.h"
#include "text/tokenizer.h"

namespace retro {

// `model` may be a tok.model file or a folder holding one.
std::string tokenizer_resolve_path(const std::string& model);

// Trains into out_dir. An existing tokenizer is refused unless `force` (trained again) or `resume`: kept where its
// manifest records this command's parameters and corpus files ("already complete; nothing to resume"), refused
// naming the difference otherwise; a folder without a finished tokenizer is trained into.
void tokenizer_train_to_folder(const ToolContext& ctx, const std::vector<std::string>& inputs,
                               const CorpusOptions& corpus, const TokenizerTrainOptions& opts,
                               const std::string& out_dir, bool force, bool resume = false);

}  // namespace retro
