// A model checkpoint's own sentencepiece model (T5's spiece.model), used as Hugging Face's T5
// tokenizer uses it: text -> sentencepiece ids (the model's own normaliser, e.g. NFKC and
// whitespace folding) -> truncated to max_length - 1 -> the eos id appended (</s>, id 1 in T5).
// Unlike text/tokenizer.h (the database's model, pad=0 unk=1 bos=2 eos=3) any special ids are
// accepted; the eos id must exist. Special-token spellings written in the text ("</s>",
// "<extra_id_0>") are encoded as plain text, where HF's tokenizer maps them to their ids.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

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
    const std::string& path() const { return path_; }

private:
    std::string path_;
    std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
};

}  // namespace retro
