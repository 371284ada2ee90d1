// The work behind `retro-tokenizer`: train into a folder (tok.model + manifest.json), and the
// streaming encode/decode filters (stdin -> stdout, one document per line, ids as text).
#pragma once
#include <iosfwd>
#include <string>
#include <vector>

#include "core/tool.h"
#include "text/corpus.h"
#include "text/tokenizer.h"

namespace retro {

// `model` may be a tok.model file or a folder holding one.
std::string tokenizer_resolve_path(const std::string& model);

void tokenizer_train_to_folder(const ToolContext& ctx, const std::vector<std::string>& inputs,
                               const CorpusOptions& corpus, const TokenizerTrainOptions& opts,
                               const std::string& out_dir, bool force);

struct EncodeOptions {
    bool pieces = false;    // print pieces instead of ids
    bool bos_eos = false;   // wrap each line in bos ... eos
};

// Reads lines from `in`, writes one encoded line per input line; batches run on all threads.
void tokenizer_encode_stream(const Tokenizer& tok, std::istream& in, std::ostream& out, const EncodeOptions& opts);
// Reads lines of whitespace-separated ids; writes one decoded line each.
void tokenizer_decode_stream(const Tokenizer& tok, std::istream& in, std::ostream& out);

}  // namespace retro
