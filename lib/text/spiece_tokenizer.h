// A model checkpoint's own sentencepiece model (T5's spiece.model), used as Hugging Face's T5
// tokenizer uses it: text -> sentencepiece ids (the model's own normaliser, e.g. NFKC and
// whitespace folding) -> truncated to max_length - 1 -> the eos id appended (</s>, id 1 in T5).
// Unlike text/tokenizer.h (the database's model, pad=0 unk=1 bos=2 eos=3) any special ids are
// accepted; the eos id must exist. With special tokens set (set_special_tokens: the t5 embedder gives T5Tokenizer's,
// t5_special_tokens in embed/t5_embedder.cpp), their spellings written in the text ("</s>", "<extra_id_0>") are
// split out first and map to their ids, as HF's tokenizer does; without, they are plain text.
// The model file is a sentencepiece .model, or a tokenizer.json rebuilt into one (text/sentencepiece_json.h).
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "text/special_tokens.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace retro {

class SpieceTokenizer {
public:
    // Throws UserError naming the file when it is missing, unreadable or has no eos piece.
    explicit SpieceTokenizer(const std::string& model_path);
    ~SpieceTokenizer();
    SpieceTokenizer(SpieceTokenizer&&) noexcept;
    SpieceTokenizer& operator=(SpieceTokenizer&&) noexcept;

    // Pieces of `text`, at most max_length - 1 of them, then eos (max_length >= 2). Thread-safe.
    std::vector<int> encode(std::string_view text, int max_length) const;
    int vocab_size() const;
    int eos_id() const;
    int pad_id() const;   // -1 when the model has none
    int unk_id() const;
    // The id of the piece spelled exactly `piece`, -1 where the model has none (sentencepiece's own lookup answers
    // the unknown id).
    int piece_id(const std::string& piece) const;
    // Spellings split out of every text before sentencepiece (the longest at each position), each with its id and
    // its lstrip / rstrip.
    void set_special_tokens(const std::vector<std::pair<std::string, int>>& tokens,
                            const std::vector<SpecialTokens::Strip>& strip = {});
    const std::vector<std::pair<std::string, int>>& special_tokens() const { return specials_; }
    const std::string& path() const { return path_; }

private:
    void encode_segment(std::string_view segment, std::vector<int>& ids) const;
    std::string path_;
    std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
    std::vector<std::pair<std::string, int>> specials_;
    std::vector<std::string> special_spellings_;
    std::vector<SpecialTokens::Strip> special_strip_;
};

}  // namespace retro
