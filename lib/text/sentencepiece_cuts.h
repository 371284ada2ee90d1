// Encoding a long text in parts with a sentencepiece model, cut only where a segmentation of the whole breaks anyway.
// sentencepiece holds its whole input while it encodes it (unigram: a lattice of every position's candidate pieces;
// BPE: a symbol list and its agenda), about 76 bytes of memory a byte of text: a 41 MB single-line document took 3.2 GB
// on each thread (docs/chunk.md, "Long documents"). A text over kEncodePartBytes is given to it in parts of at most
// that size where the model allows a cut near there.
//
// Why a cut keeps the segmentation (the model's conditions checked once, at load):
// - The normaliser is the identity (no character map: every model retro-tokenizer trains): each character stays
//   itself, a space becomes '▁' (U+2581, escape_whitespaces), the text gets a leading '▁' (add_dummy_prefix), and
//   '▁' is a suffix of nothing (treat_whitespace_as_suffix off).
// - No piece holds '▁' past its first character, so no piece spans a '▁' after a text's start: every segmentation
//   (unigram's Viterbi path, BPE's merges, which only form pieces of the vocabulary) breaks before every '▁', and the
//   best one of the whole text is its spans' best ones side by side.
// - A cut at a single space (neither neighbour a space): the part after it, encoded alone, gets the dummy prefix '▁'
//   where the whole has that space's '▁' — the same span. remove_extra_whitespaces, where a model has it, keeps a
//   single space between two non-spaces; it strips a text's trailing '▁' (a '▁' of the text itself too), so then no
//   cut follows a '▁'.
// - A cut before an ASCII byte no piece holds (the line feed for retro-tokenizer's models, which never train on one,
//   and any other byte the corpus never taught the model), with byte fallback: each such byte is its own byte piece, so no piece spans it; the part starting there gets a dummy '▁' the whole has not, and
//   its first id, '▁' alone (no piece starts with '▁' and that byte), is dropped.
// BPE's ids are then the whole text's exactly (its merges compare scores, they sum none). Unigram's are in exact
// arithmetic, but sentencepiece sums the path's scores in float along the text, so where two segmentations of a span
// score alike (the same pieces in another order) or within its rounding, the whole text and a part can choose
// differently; along megabytes the rounding grows past real score differences, and the whole text's segmentation is
// the worse one under the model's own scores (measured, docs/chunk.md: 41 MB of prose on one line, whole 12,347,519
// ids, in parts 12,030,946). tests/test_tokenizer_long_text.cpp holds BPE to the same ids and unigram to a
// segmentation that decodes to the text and scores no lower than the whole's.
#pragma once
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace retro {

// The most of a text sentencepiece is given at once where the text can be cut.
inline constexpr std::size_t kEncodePartBytes = std::size_t{1} << 20;

class SentencepieceCuts {
public:
    SentencepieceCuts() = default;   // a model with no exact cuts: every text encoded whole
    // Reads the normaliser and trainer specs of the serialized ModelProto `model` and the vocabulary of `sp` (loaded
    // from it).
    SentencepieceCuts(const sentencepiece::SentencePieceProcessor& sp, std::string_view model);

    // "" where the model allows cuts, else which of the conditions above it breaks.
    const std::string& why_whole() const { return why_whole_; }

    // Calls part(text_of_part, drop_dummy) for each part of `text` in order, of at most max_part_bytes bytes where cuts
    // allow (a part with no cut within that size runs to the first cut after it, or to the text's end); drop_dummy:
    // the part starts at a byte no piece holds, and its encoding's first piece, the dummy prefix '▁' alone, is not the
    // text's. Returns the longest part's size.
    std::size_t for_each_part(std::string_view text, std::size_t max_part_bytes,
                              const std::function<void(std::string_view, bool)>& part) const;

    // The ids of `text`, encoded by encode_part(part, ids) in parts of at most max_part_bytes bytes where cuts allow
    // (a part with no cut within that size runs to the first cut after it, or to the text's end). *longest_part, when
    // given, is set to the longest part's size.
    std::vector<int> encode(std::string_view text, std::size_t max_part_bytes,
                            const std::function<void(std::string_view, std::vector<int>&)>& encode_part,
                            std::size_t* longest_part = nullptr) const;

    // The next cut after `start` (a part's first byte): the last one in (start, start + max_part_bytes], else the first
    // one after that; text.size() where there is none.
    std::size_t next_cut(std::string_view text, std::size_t start, std::size_t max_part_bytes) const;

private:
    // "" where the model allows cuts (free_byte_ and dummy_id_ then set), else why_whole_.
    std::string read_model(const sentencepiece::SentencePieceProcessor& sp, std::string_view model);
    bool is_cut(std::string_view text, std::size_t i) const;
    std::string why_whole_ = "no model";
    bool free_byte_[128] = {};   // ASCII bytes no piece holds, each with its byte piece (byte fallback on)
    bool remove_extra_whitespaces_ = true;
    int dummy_id_ = -1;          // the piece "▁"
};

}  // namespace retro
