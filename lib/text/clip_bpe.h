// CLIP's byte-level BPE tokenizer (vocab.json + merges.txt), id for id as transformers'
// CLIPTokenizer (the tokenizers-backed one) encodes a text:
//   NFC --> every run of white space -> one space --> lower case (per character, as Rust's
//   char::to_lowercase) --> pieces by CLIP's regex  's|'t|'re|'ve|'m|'ll|'d|\p{L}+|\p{N}|[^\s\p{L}\p{N}]+
//   --> each piece's UTF-8 bytes as GPT-2's byte-to-unicode characters, "</w>" on the last -->
//   BPE merges, lowest rank first (leftmost on ties; byte_bpe.h) --> ids; <|startoftext|> ids <|endoftext|>,
//   the pieces truncated to max_length - 2.
// Not handled: the special-token spellings written in a text (encoded as plain characters).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "text/byte_bpe.h"

namespace retro {

class ClipBpeTokenizer {
public:
    // Reads dir/vocab.json and dir/merges.txt; UserError naming a missing or malformed file.
    explicit ClipBpeTokenizer(const std::string& dir);
    // [bos] pieces [eos], at most max_length ids (max_length >= 2).
    std::vector<int> encode(const std::string& text, int max_length = 77) const;
    int bos_id() const { return bos_; }
    int eos_id() const { return eos_; }
    int vocab_size() const { return bpe_.vocab_size(); }

private:
    ByteLevelBpe bpe_;   // vocab.json, merges.txt, "</w>" on a piece's last symbol
    int bos_ = -1, eos_ = -1, unk_ = -1;
    std::string dir_;
};

}  // namespace retro
