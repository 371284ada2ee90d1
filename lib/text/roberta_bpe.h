// RoBERTa's tokenizer (vocab.json + merges.txt), id for id as transformers' RobertaTokenizer (the tokenizers-backed
// one, which sentence-transformers runs for all-distilroberta-v1, all-roberta-large-v1):
//   the special tokens split out of the text first (special_tokens.h; <mask> also takes the white space before it)
//   --> each run of plain text ("add_prefix_space": a space put before one that does not start with one) -->
//   pieces by GPT-2's regex  's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+  (no
//   normalisation, case kept) --> byte-level BPE without an end-of-word suffix (byte_bpe.h) --> <s> ids </s>,
//   the pieces truncated to max_length - 2.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "text/byte_bpe.h"
#include "text/special_tokens.h"

namespace retro {

class RobertaBpeTokenizer {
public:
    // Reads dir/vocab.json and dir/merges.txt (where neither is there, tokenizer.json's BPE model), and the special
    // tokens and add_prefix_space of tokenizer_config.json, as transformers' RobertaTokenizer; UserError naming a
    // missing or malformed file. With `follow_tokenizer_json_pipeline` (a generic fast tokenizer in tokenizer.json
    // alone, as ModernBERT's "PreTrainedTokenizerFast": embed/bert_tokenizer.cpp decides) it follows the file itself,
    // as transformers does: its normaliser (none or NFC), its ByteLevel pre-tokenizer's add_prefix_space, its BPE
    // model's unk_token, and the special tokens its post-processor wraps a text in (TemplateProcessing FIRST $A LAST,
    // or RobertaProcessing); anything else there is refused naming the file.
    explicit RobertaBpeTokenizer(const std::string& dir, bool follow_tokenizer_json_pipeline = false);
    std::vector<int> tokenize_ids(std::string_view text) const;   // without <s> and </s>
    std::vector<int> encode(std::string_view text, int max_length) const;
    int vocab_size() const;   // vocab.json's, or past the added tokens' ids
    int cls_id() const { return cls_; }
    int sep_id() const { return sep_; }
    bool add_prefix_space() const { return add_prefix_space_; }
    const std::string& vocab_path() const { return bpe_.vocab_path(); }
    // The special and added tokens whose ids the tokenizer files gave (vocab.json lacks them), sorted.
    const std::vector<std::pair<std::string, int>>& file_ids() const { return file_ids_; }

private:
    void follow_tokenizer_json(const std::string& path, const SpecialTokens& named);
    ByteLevelBpe bpe_;
    std::vector<std::string> specials_;   // split out of a text: those of SpecialTokens::split_set() the vocabulary has
    std::vector<int> special_ids_;
    std::vector<SpecialTokens::Strip> special_strip_;
    std::vector<std::pair<std::string, int>> file_ids_;
    int cls_ = -1, sep_ = -1, unk_ = -1;
    bool add_prefix_space_ = false;
    bool nfc_ = false;   // tokenizer.json's NFC normaliser
};

// GPT-2's pre-tokeniser regex over code points (exposed for tests).
std::vector<std::u32string> gpt2_pieces(const std::u32string& s);

}  // namespace retro
