// XLM-RoBERTa's tokenizer (transformers' XLMRobertaTokenizer over the checkpoint's sentencepiece.bpe.model, as
// multilingual-e5-*, paraphrase-multilingual-*, bge-m3 ship it): fairseq's ids around the sentencepiece ones —
//   <s> 0, <pad> 1, </s> 2, <unk> 3, sentencepiece piece k >= 1 -> k + 1 (its unknown, 0, -> <unk> 3),
//   <mask> = pieces + 1 —
// and a text encoded as <s> pieces </s>. The five special spellings are split out of the text first (HF's
// added-tokens trie, longest match) and map to their ids; each segment between them is encoded by sentencepiece on
// its own, with the model's own normaliser (NFKC, whitespace folding), as the pure-Python tokenizer does.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "text/special_tokens.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace retro {

class XlmrTokenizer {
public:
    // Throws UserError naming the file when it is missing, unreadable (a Git LFS pointer named so) or not a
    // sentencepiece model with the unknown piece at id 0.
    // `files`: the folder's special tokens (SpecialTokens::from_dir): added tokens beyond the five are split out too,
    // with the id the files give (else their piece's id + 1; else they are plain text).
    explicit XlmrTokenizer(const std::string& model_path, const SpecialTokens& files = SpecialTokens::fairseq());
    ~XlmrTokenizer();
    XlmrTokenizer(XlmrTokenizer&&) noexcept;
    XlmrTokenizer& operator=(XlmrTokenizer&&) noexcept;

    // Ids of `text` without <s> and </s>. Thread-safe.
    std::vector<int> tokenize_ids(std::string_view text) const;
    // <s> ids </s>, the ids truncated so that the whole is at most max_length (>= 2) long.
    std::vector<int> encode(std::string_view text, int max_length) const;
    int vocab_size() const;   // sentencepiece pieces + 2 (fairseq's shift of one, and <mask>), or past the added ids
    static constexpr int kBos = 0, kPad = 1, kEos = 2, kUnk = 3;
    int mask_id() const;      // pieces + 1
    const std::string& path() const { return path_; }
    // The added tokens beyond the five whose ids the tokenizer files gave (sentencepiece lacks them), sorted.
    const std::vector<std::pair<std::string, int>>& file_ids() const { return file_ids_; }

private:
    void encode_segment(std::string_view segment, std::vector<int>& ids) const;
    std::string path_;
    std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
    std::vector<std::string> specials_;   // <s> <pad> </s> <unk> <mask>, then the files' added tokens
    std::vector<int> special_ids_;
    std::vector<std::pair<std::string, int>> file_ids_;
};

}  // namespace retro
