// The special tokens of a Hugging Face tokenizer folder, and the split of a text on them (HF's added-tokens trie),
// shared by WordPiece (wordpiece.h), XLM-R's sentencepiece tokenizer (xlmr_tokenizer.h) and RoBERTa's byte-level BPE
// (roberta_bpe.h). The named tokens wrap a text (cls ... sep) or stand for padding, unknown pieces and masks; every
// special token and added token written in a text is split out of it first, the longest match at each position, and
// maps to its own id.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace retro {

// BERT's by default; MPNet's and RoBERTa's tokenizers (transformers' MPNetTokenizer, RobertaTokenizer,
// XLMRobertaTokenizer) wrap in <s> ... </s>. `added`: further tokens split out (tokenizer.json's added_tokens,
// tokenizer_config.json's added_tokens_decoder, bos/eos and additional_special_tokens).
struct SpecialTokens {
    std::string cls = "[CLS]", sep = "[SEP]", unk = "[UNK]", pad = "[PAD]", mask = "[MASK]";
    std::vector<std::string> added;
    static SpecialTokens fairseq();   // <s> </s> <unk> <pad> <mask>, bos/eos <s> </s> (RoBERTa, XLM-R)
    static SpecialTokens mpnet();     // fairseq's with BERT's [UNK] (MPNetTokenizer's unk_token)
    // Every token split out: the five named ones and `added`, sorted, each once (empty names left out).
    std::vector<std::string> split_set() const;
    // `defaults` with the named tokens and added tokens DIR's tokenizer files give (special_tokens_map.json, then
    // tokenizer_config.json, then tokenizer.json's added_tokens); UserError naming a file that is not JSON.
    static SpecialTokens from_dir(const std::string& dir, const SpecialTokens& defaults);
};

// One piece of a text split on special tokens: a run of plain text (special < 0), or special token `special`.
struct SpecialSplit {
    std::string_view text;
    int special = -1;   // index into the `tokens` given to split_special_tokens
};

// `text` cut at every occurrence of `tokens` (UTF-8, matched byte for byte, the longest at each position, leftmost
// first); empty runs of plain text are left out. A token whose `lstrip[k]` is set also takes the white space before
// it (RoBERTa's <mask>: AddedToken(lstrip=True)); `lstrip` may be empty.
std::vector<SpecialSplit> split_special_tokens(std::string_view text, const std::vector<std::string>& tokens,
                                               const std::vector<bool>& lstrip = {});

}  // namespace retro
