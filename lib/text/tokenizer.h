// The sentencepiece model shared by the LM and the database (ARCHITECTURE.md Decision 3), with
// fixed special ids pad=0 unk=1 bos=2 eos=3. Loading refuses a model with other special ids.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "text/corpus.h"
#include "text/sentencepiece_cuts.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace retro {

inline constexpr int TOKEN_PAD = 0, TOKEN_UNK = 1, TOKEN_BOS = 2, TOKEN_EOS = 3;

class Tokenizer {
public:
    // Throws UserError naming the file. `vouched_fingerprint`: the fingerprint a caller already held the file to (a
    // database's record of its tokenizer), which lets it be read from a folder a stopped training marks unfinished
    // (text/tokenizer_folder.h).
    explicit Tokenizer(const std::string& model_path, const std::string& vouched_fingerprint = "");
    ~Tokenizer();
    Tokenizer(Tokenizer&&) noexcept;
    Tokenizer& operator=(Tokenizer&&) noexcept;

    // The ids of `text` (thread-safe): sentencepiece's over the whole text, given to it in parts of at most
    // max_part_bytes where the model allows an exact cut (text/sentencepiece_cuts.h: bounded memory on a long text).
    // A stretch with no cut for more than 16 MiB is encoded at once with a warning (once) of the memory it takes.
    std::vector<int> encode(std::string_view text, std::size_t max_part_bytes = kEncodePartBytes) const;
    std::vector<int> encode_whole(std::string_view text) const;   // sentencepiece's Encode as is (the reference)
    const SentencepieceCuts& cuts() const { return cuts_; }
    std::vector<std::string> encode_pieces(std::string_view text) const;   // encode's pieces, cut as encode cuts
    std::string decode(const std::vector<int>& ids) const;    // special ids decode to nothing
    int vocab_size() const;
    std::string piece(int id) const;
    const std::string& path() const { return path_; }

private:
    std::string path_;
    void warn_uncut(std::size_t longest) const;
    std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
    SentencepieceCuts cuts_;
    std::unique_ptr<std::atomic<bool>> warned_uncut_ = std::make_unique<std::atomic<bool>>(false);
};

struct TokenizerTrainOptions {
    int vocab_size = 8000;
    std::string model_type = "unigram";   // unigram | bpe
    std::int64_t max_sentences = 2'000'000;
    double character_coverage = 0.9995;
    bool byte_fallback = true;            // any byte sequence round-trips exactly
    std::uint64_t seed = 1234;
    int threads = 0;
};

// The longest sentence the trainer is given, and sentencepiece's max_sentence_length: a longer line (a document
// without line breaks, a minified file) is cut into pieces of at most this many bytes at whitespace, where
// sentencepiece would skip it whole and a corpus of such lines would train on nothing.
constexpr std::size_t kTrainSentenceBytes = 16384;

struct TokenizerTrainResult {
    std::int64_t sentences_seen = 0, sentences_used = 0;
    std::int64_t long_lines_split = 0;   // lines over kTrainSentenceBytes, trained on as pieces of at most that size
    int vocab_size = 0;
    CorpusCounts counts;
    std::string model_bytes;   // serialized model proto
};

// Reads the corpus (reservoir-sampling at most max_sentences lines, so memory stays bounded) and
// trains a model. Identity normalisation keeps encode->decode exact.
// UserError naming the option when --vocab-size, --character-coverage or --max-sentences is outside what the trainer
// takes: checked before the corpus is listed or read.
void tokenizer_train_options_check(const TokenizerTrainOptions& opts);
TokenizerTrainResult tokenizer_train(const std::vector<CorpusFile>& files, const CorpusOptions& corpus,
                                     const TokenizerTrainOptions& opts);

}  // namespace retro
