// The special tokens of a Hugging Face tokenizer folder, and the split of a text on them (HF's added-tokens trie),
// shared by WordPiece (wordpiece.h), XLM-R's sentencepiece tokenizer (xlmr_tokenizer.h: its five fixed spellings and
// the files' added tokens) and RoBERTa's byte-level BPE (roberta_bpe.h). The named tokens wrap a text (cls ... sep) or stand for padding, unknown pieces and masks; every
// special token and added token written in a text is split out of it first, the longest match at each position, and
// maps to its own id.
#pragma once
#include <map>
#include <set>
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
    // The ids the tokenizer files give added tokens (tokenizer.json's added_tokens, tokenizer_config.json's
    // added_tokens_decoder, added_tokens.json): the id of one the vocabulary lacks (tokenizer.add_tokens(...) after
    // training, the model's embeddings resized to hold it).
    std::map<std::string, int> added_ids;
    // An added token's "lstrip" / "rstrip" as the files write them (an AddedToken object): it also takes the white
    // space before / after it. Absent: the tokenizer's default (false; RoBERTa's <mask>: lstrip).
    struct Strip {
        bool left = false, right = false;
    };
    std::map<std::string, Strip> strip;
    // Added tokens the files mark "normalized": true (what add_tokens writes for a non-special token): HF matches them
    // in the normalised text, their own spelling normalised too (WordPiece follows this: wordpiece.h).
    std::set<std::string> normalized;
    static SpecialTokens fairseq();   // <s> </s> <unk> <pad> <mask>, bos/eos <s> </s> (RoBERTa, XLM-R)
    static SpecialTokens mpnet();     // fairseq's with BERT's [UNK] (MPNetTokenizer's unk_token)
    // Every token split out: the five named ones and `added`, sorted, each once (empty names left out).
    std::vector<std::string> split_set() const;
    // `defaults` with the named tokens and added tokens DIR's tokenizer files give (special_tokens_map.json, then
    // tokenizer_config.json, added_tokens.json, then tokenizer.json's added_tokens); UserError naming a file that is not
    // JSON or gives an id that is not a non-negative integer.
    //
    // Not followed: an added token's "single_word"; and "normalized" by the BPE and sentencepiece tokenizers (their
    // tokens are matched as written; WordPiece matches a normalized one in the normalised text, as HF).
    static SpecialTokens from_dir(const std::string& dir, const SpecialTokens& defaults);
    // A token's id: `vocab_id` where the vocabulary holds it (>= 0), else added_ids' entry, else -1.
    int id_of(const std::string& token, int vocab_id) const;
};

// One piece of a text split on special tokens: a run of plain text (special < 0), or special token `special`.
struct SpecialSplit {
    std::string_view text;
    int special = -1;   // index into the `tokens` given to split_special_tokens
};

// `text` cut at every occurrence of `tokens` (UTF-8, matched byte for byte, the longest at each position, leftmost
// first); empty runs of plain text are left out. A token whose `strip[k].left` (`.right`) is set also takes the white
// space before (after) it (RoBERTa's <mask>: AddedToken(lstrip=True)); `strip` may be empty (none strips).
std::vector<SpecialSplit> split_special_tokens(std::string_view text, const std::vector<std::string>& tokens,
                                               const std::vector<SpecialTokens::Strip>& strip = {});

// first, `pieces` cut to max_length - 2, last: the ids of one text as a tokenizer wraps it ([CLS] ... [SEP], <s> ... </s>).
std::vector<int> wrap_truncated(int first, std::vector<int> pieces, int last, int max_length);

}  // namespace retro
