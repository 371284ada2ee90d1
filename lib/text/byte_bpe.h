// GPT-2's byte-level BPE core, shared by CLIP's tokenizer (clip_bpe.h) and RoBERTa's (roberta_bpe.h):
// vocab.json (token -> id) and merges.txt (ranked symbol pairs, an optional "#version" first line); a pre-tokenised
// piece's UTF-8 bytes become GPT-2's bytes_to_unicode characters (printable bytes themselves, the others 256 + n),
// an end-of-word suffix goes on the last one (CLIP's "</w>"; none for GPT-2 and RoBERTa), then the merges apply
// lowest rank first, leftmost on ties (a heap: O(n log n) in the piece's length), and each symbol maps to its id.
#pragma once
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace retro {

class ByteLevelBpe {
public:
    // Reads vocab.json and merges.txt; UserError naming a missing (or Git LFS pointer) or malformed file, with
    // `owner` ("CLIP's BPE tokenizer") saying who needs them.
    ByteLevelBpe(const std::string& vocab_path, const std::string& merges_path, const std::string& owner,
                 std::u32string end_of_word);
    // The same from a fast tokenizer's tokenizer.json (transformers 5 saves no vocab.json and merges.txt): its
    // model.vocab and model.merges ("a b" strings or ["a", "b"] pairs) of a "BPE" model; UserError naming the file
    // where it is not one.
    static ByteLevelBpe from_tokenizer_json(const std::string& path, const std::string& owner, std::u32string end_of_word);
    // Appends the ids of one pre-tokenised piece (code points; its UTF-8 bytes are what is merged); a symbol the
    // vocabulary lacks gives `unk`.
    void encode_piece(std::u32string_view piece, int unk, std::vector<int>& ids) const;
    int token_id(const std::u32string& token) const;   // -1 when absent
    int vocab_size() const { return vocab_size_; }     // the largest id + 1
    const std::string& vocab_path() const { return vocab_path_; }

private:
    ByteLevelBpe(std::u32string end_of_word, std::string vocab_path);
    void read_vocab(const nlohmann::json& v, const std::string& path);   // token -> id
    void add_merge(const std::string& left, const std::string& right);     // the next rank
    void merge(const std::u32string& word, int unk, std::vector<int>& ids) const;
    std::unordered_map<std::u32string, int> vocab_;
    std::unordered_map<std::u32string, int> ranks_;   // "left right" (U+0020 between) -> merge rank
    char32_t byte_char_[256];
    std::u32string end_of_word_;
    int vocab_size_ = 0;
    std::string vocab_path_;
};

// The length of the contraction 's 't 're 've 'm 'll 'd at s[i] (the first alternatives of CLIP's and GPT-2's
// pre-tokeniser regexes; lower case only), 0 where none starts there.
std::size_t regex_contraction_length(const std::u32string& s, std::size_t i);

}  // namespace retro
