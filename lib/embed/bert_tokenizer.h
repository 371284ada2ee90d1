// The tokenizer of a `bert` embedder model folder, chosen from its files, as transformers' AutoTokenizer would load it:
//   WordPiece             BERT, DistilBERT, ELECTRA, MPNet (vocab.txt, or a fast tokenizer's tokenizer.json)
//   XLM-R sentencepiece   model_type xlm-roberta, or tokenizer_class XLMRobertaTokenizer (sentencepiece.bpe.model)
//   RoBERTa byte BPE      model_type roberta, or tokenizer_class RobertaTokenizer (vocab.json + merges.txt)
// tokenizer_config.json's tokenizer_class decides first (a BERT model over XLM-R's vocabulary: multilingual MiniLM),
// then config.json's model_type, then the files present. Also the fingerprint an index records of it.
#pragma once
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "text/roberta_bpe.h"
#include "text/wordpiece.h"
#include "text/xlmr_tokenizer.h"

namespace retro {

enum class BertTokenizerKind { WORDPIECE, XLMR_SENTENCEPIECE, ROBERTA_BPE };

// config.json's model_type where the file is readable JSON with one; "bert" otherwise (bert_config_read names the
// problems).
std::string bert_folder_model_type(const std::string& dir);
BertTokenizerKind bert_tokenizer_kind(const std::string& dir);
// UserError naming the first tokenizer file of the folder's kind that is missing, with the fix.
void bert_tokenizer_require_files(const std::string& dir);
// The file the tokenizer is read from (vocab.txt or tokenizer.json; sentencepiece.bpe.model; vocab.json); "" where
// the folder has none.
std::string bert_tokenizer_file(const std::string& dir);

// WordPiece (BERT's): xxh3-64 of vocab.txt's (or tokenizer.json's) fingerprint and the strip_accents and
// tokenize_chinese_chars WordPiece takes from tokenizer_config.json (strip_accents "unset" where not a boolean,
// tokenize_chinese_chars true; do_lower_case is the index's own lower_case field), then the special tokens where they
// are not BERT's five (SpecialTokens::from_dir). XLM-R: of "FP xlm-roberta", FP sentencepiece.bpe.model's. RoBERTa: of
// "FPV FPM roberta-bpe add_prefix_space=B", FPV and FPM vocab.json's and merges.txt's, then the special tokens where they
// are not RoBERTa's. Recorded beside the weights' fingerprint since 2026-12-02, so that an index is refused with
// another vocabulary as with other weights.
std::string bert_tokenizer_fingerprint(const std::string& dir);

class BertTextTokenizer;
// The same from `tokenizer`, DIR's tokenizer already built (it is not built again).
std::string bert_tokenizer_fingerprint(const std::string& dir, const BertTextTokenizer& tokenizer);

class BertTextTokenizer {
public:
    // `lower_case` 0/1 overrides WordPiece's do_lower_case (-1: the files'); the others have no such option.
    BertTextTokenizer(const std::string& dir, int lower_case);
    // cls pieces sep, truncated to at most max_length ids.
    std::vector<int> encode(std::string_view text, int max_length) const;
    std::vector<int> tokenize_ids(std::string_view text) const;   // the pieces alone
    int vocab_size() const;
    BertTokenizerKind kind() const { return static_cast<BertTokenizerKind>(t_.index()); }
    const WordPiece* wordpiece() const { return std::get_if<WordPiece>(&t_); }   // null for the other kinds
    bool lower_case() const { return wordpiece() && wordpiece()->options().lower_case; }
    // The tokens whose ids the tokenizer files gave, the vocabulary lacking them (tokens added after training).
    const std::vector<std::pair<std::string, int>>& file_ids() const {
        return std::visit([](const auto& t) -> const std::vector<std::pair<std::string, int>>& { return t.file_ids(); }, t_);
    }
    bool add_prefix_space() const {   // RoBERTa's option (false for the others)
        const RobertaBpeTokenizer* r = std::get_if<RobertaBpeTokenizer>(&t_);
        return r && r->add_prefix_space();
    }

    using Variant = std::variant<WordPiece, XlmrTokenizer, RobertaBpeTokenizer>;   // in BertTokenizerKind's order

private:
    Variant t_;
};

}  // namespace retro
