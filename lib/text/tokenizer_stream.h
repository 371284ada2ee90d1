// The streaming encode/decode filters behind `retro-tokenizer encode|decode`: one document per line in,
// one line of ids (or pieces) out, and back.
// provides: EncodeOptions, tokenizer_encode_stream, tokenizer_decode_stream
#pragma once
#include <iosfwd>
#include <string>

#include "text/tokenizer.h"

namespace retro {

struct EncodeOptions {
    bool pieces = false;    // print pieces instead of ids
    bool bos_eos = false;   // wrap each line in bos ... eos
};

// Reads lines from `in`, writes one encoded line per input line; batches run on all threads. `name` names `in` in a
// refusal (a file, or "standard input").
void tokenizer_encode_stream(const Tokenizer& tok, std::istream& in, std::ostream& out, const EncodeOptions& opts,
                             const std::string& name = "standard input");
// Reads lines of whitespace-separated ids; writes one decoded line each.
void tokenizer_decode_stream(const Tokenizer& tok, std::istream& in, std::ostream& out,
                             const std::string& name = "standard input");

}  // namespace retro
