// Implementation of tokenizer.h over libsentencepiece 0.1.97.
#include "text/tokenizer.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <filesystem>
#include <random>
#include <regex>
#include <string_view>
#include <unordered_map>

#include "core/error.h"
#include "core/lfs_pointer.h"
#include "core/log.h"
#include "core/memory_budget.h"
#include "core/progress.h"
#include "core/threads.h"
#include "text/sentencepiece_load.h"
#include "text/sentencepiece_train_log.h"
#include "text/tokenizer_folder.h"

namespace retro {

Tokenizer::Tokenizer(const std::string& model_path, const std::string& vouched_fingerprint)
    : path_(model_path), sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {
    std::error_code ec;
    if (!std::filesystem::exists(model_path, ec)) {
        tokenizer_refuse_missing_unfinished(model_path);   // a training stopped before it wrote the model
        user_error_in(model_path, "no such tokenizer model", "train one with: retro-tokenizer train CORPUS --out DIR");
    }
    if (!std::filesystem::is_regular_file(model_path, ec))
        user_error_in(model_path, "is not a tokenizer model file (a device, a pipe or a folder)", "give a tok.model file");
    if (std::filesystem::file_size(model_path, ec) == 0)   // sentencepiece said "Internal: unk is not defined."
        user_error_in(model_path, "is empty (0 bytes), not a sentencepiece model", "train one with: retro-tokenizer train CORPUS --out DIR");
    refuse_lfs_pointer_file(model_path);
    // its character map checked, and the library's refusals (a status or an exception) one line naming the file
    const std::string bytes = sentencepiece_model_bytes(model_path);
    // a training stopped between this model and its manifest, or writing them now; after the read, so that bytes read
    // while a training replaced the file are judged by the folder as the read left it (a helper's race, session 70)
    tokenizer_refuse_unfinished(model_path, bytes, vouched_fingerprint);
    sentencepiece_load_bytes(*sp_, model_path, bytes, "train one with: retro-tokenizer train CORPUS --out DIR");
    const std::pair<int, const char*> want[] = {{TOKEN_PAD, "pad"}, {TOKEN_UNK, "unk"}, {TOKEN_BOS, "bos"}, {TOKEN_EOS, "eos"}};
    const int have[] = {sp_->pad_id(), sp_->unk_id(), sp_->bos_id(), sp_->eos_id()};
    for (int i = 0; i < 4; ++i)
        if (have[i] != want[i].first)
            user_error_in(model_path,
                          std::string("special ids must be pad=0 unk=1 bos=2 eos=3, but ") + want[i].second + "=" +
                              std::to_string(have[i]),
                          "train it with retro-tokenizer train, or with spm_train --pad_id=0 --unk_id=1 --bos_id=2 --eos_id=3");
    cuts_ = SentencepieceCuts(*sp_, bytes);
}

Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;

std::vector<int> Tokenizer::encode_whole(std::string_view text) const {
    std::vector<int> ids;
    auto status = sp_->Encode(absl::string_view(text.data(), text.size()), &ids);
    if (!status.ok()) throw InternalError("sentencepiece encode failed: " + status.ToString());
    return ids;
}

// A stretch of a text encoded at once beyond 16 MiB: a warning (once) of the memory sentencepiece takes for it.
void Tokenizer::warn_uncut(std::size_t longest) const {
    constexpr std::size_t kWarnUncutBytes = std::size_t{16} << 20;
    if (longest <= kWarnUncutBytes || warned_uncut_->exchange(true)) return;
    // measured: 76 bytes a byte on prose, 121 on a run of two letters (docs/chunk.md, "Long documents")
    const double bytes = static_cast<double>(longest);
    log_warn(cat(path_, ": a stretch of ", memory_format_bytes(bytes), " of a text had no place to cut it (",
                 cuts_.why_whole().empty() ? "no single space and no byte the model's pieces never hold"
                                           : "the model allows no cut: " + cuts_.why_whole(),
                 ") and was encoded at once: sentencepiece takes 76-121 bytes of memory a byte while it encodes, ",
                 memory_format_bytes(76 * bytes), " to ", memory_format_bytes(121 * bytes), " here"));
}

std::vector<int> Tokenizer::encode(std::string_view text, std::size_t max_part_bytes) const {
    std::size_t longest = 0;
    std::vector<int> ids = cuts_.encode(
        text, max_part_bytes, [&](std::string_view part, std::vector<int>& out) { out = encode_whole(part); }, &longest);
    warn_uncut(longest);
    return ids;
}

std::vector<std::string> Tokenizer::encode_pieces(std::string_view text) const {
    std::vector<std::string> pieces, part_pieces;
    const std::size_t longest = cuts_.for_each_part(text, kEncodePartBytes, [&](std::string_view part, bool drop_dummy) {
        auto status = sp_->Encode(absl::string_view(part.data(), part.size()), &part_pieces);
        if (!status.ok()) throw InternalError("sentencepiece encode failed: " + status.ToString());
        if (drop_dummy && (part_pieces.empty() || part_pieces[0] != "\xE2\x96\x81"))
            throw InternalError("a part of a long text cut before a byte no piece holds did not start with '▁'");
        pieces.insert(pieces.end(), std::make_move_iterator(part_pieces.begin() + (drop_dummy ? 1 : 0)),
                      std::make_move_iterator(part_pieces.end()));
    });
    warn_uncut(longest);
    return pieces;
}

std::string Tokenizer::decode(const std::vector<int>& ids) const {
    for (int id : ids)
        if (id < 0 || id >= sp_->GetPieceSize())
            user_error(path_, ": token id ", id, " is outside the vocabulary [0, ", sp_->GetPieceSize(), ")");
    std::string text;
    auto status = sp_->Decode(ids, &text);
    if (!status.ok()) throw InternalError("sentencepiece decode failed: " + status.ToString());
    return text;
}

int Tokenizer::vocab_size() const { return sp_->GetPieceSize(); }
std::string Tokenizer::piece(int id) const { return sp_->IdToPiece(id); }

namespace {
// Feeds the reservoir sample to the trainer.
class VectorIterator : public sentencepiece::SentenceIterator {
public:
    explicit VectorIterator(const std::vector<std::string>& v) : v_(v) {}
    bool done() const override { return i_ >= v_.size(); }
    void Next() override { ++i_; }
    const std::string& value() const override { return v_[i_]; }
    sentencepiece::util::Status status() const override { return sentencepiece::util::Status(); }

private:
    const std::vector<std::string>& v_;
    std::size_t i_ = 0;
};
// Cuts `line` into pieces of at most `max` bytes, each ending before a space or tab in its second half where there is
// one (the blank then starts the next piece, as a word's boundary does), else before a UTF-8 continuation byte (a
// character is never split), and calls emit(piece) for each.
template <typename Emit>
void split_long_line(std::string_view line, std::size_t max, Emit emit) {
    while (line.size() > max) {
        std::size_t cut = line.find_last_of(" \t", max);
        if (cut == std::string_view::npos || cut < max / 2) {
            cut = max;
            while (cut > 1 && (static_cast<unsigned char>(line[cut]) & 0xC0) == 0x80) cut--;
        }
        emit(line.substr(0, cut));
        line.remove_prefix(cut);
    }
    if (!line.empty()) emit(line);
}
}  // namespace

void tokenizer_train_options_check(const TokenizerTrainOptions& opts) {
    // (byte fallback's bound first: 0 to 7 were told "at least 8" and then 8 to 259 "at least 260")
    if (opts.byte_fallback && opts.vocab_size < 260)   // refused before the corpus is read, not after
        user_error_in("--vocab-size", cat(opts.vocab_size, " is below the 256 byte pieces and 4 special pieces byte fallback needs"),
                      "give 260 plus the corpus's distinct characters or more (8,000 to 64,000 is usual)");
    if (opts.vocab_size < 8) user_error_in("--vocab-size", "must be at least 8");
    // sentencepiece's unigram trainer starts from at most 1M seed pieces: a larger vocabulary can never be
    // reached, and a model's embedding table grows with it (vocabulary x model width)
    if (opts.vocab_size > 1'000'000)
        user_error_in("--vocab-size", "must be at most 1,000,000 (got " + std::to_string(opts.vocab_size) + ")",
                      "8,000 to 64,000 is usual");
    // sentencepiece's own range (trainer_interface.cc), refused before the corpus is read
    if (!(opts.character_coverage >= 0.98 && opts.character_coverage <= 1.0))
        user_error_in("--character-coverage", cat(opts.character_coverage, " is outside [0.98, 1]"),
                      "0.9995 (the default) for rich character sets, 1.0 for small ones");
    if (opts.max_sentences < 1)
        user_error_in("--max-sentences", "must be at least 1 (got " + std::to_string(opts.max_sentences) + ")",
                      "the default 2,000,000 keeps memory bounded");
    // sentencepiece's trainer takes an unsigned int: 2^32 + 1 trained as 1 while the manifest said 4294967297
    if (opts.seed > 0xFFFFFFFFull)
        user_error_in("--seed", cat(opts.seed, " is above 4,294,967,295, the largest seed sentencepiece's trainer takes"));
}

TokenizerTrainResult tokenizer_train(const std::vector<CorpusFile>& files, const CorpusOptions& corpus,
                                     const TokenizerTrainOptions& opts) {
    tokenizer_train_options_check(opts);
    if (opts.model_type != "unigram" && opts.model_type != "bpe")
        user_error_in("--model-type", "must be unigram or bpe, not '" + opts.model_type + "'");
    TokenizerTrainResult result;
    std::vector<std::string> sample;
    std::mt19937_64 rng(opts.seed);
    Progress progress("reading corpus", static_cast<std::int64_t>(files.size()), "files");
    for (const auto& f : files) {
        corpus_read_file(f, corpus, result.counts, [&](Document& doc) {
            std::size_t start = 0;
            while (start < doc.text.size()) {   // every non-empty line is a sentence
                std::size_t end = doc.text.find('\n', start);
                if (end == std::string::npos) end = doc.text.size();
                if (end > start && doc.text.find_first_not_of(" \t\r", start) < end) {
                    const std::string_view line(doc.text.data() + start, end - start);
                    if (line.size() > kTrainSentenceBytes) result.long_lines_split++;
                    split_long_line(line, kTrainSentenceBytes, [&](std::string_view piece) {
                        if (piece.find_first_not_of(" \t\r") == std::string_view::npos) return;   // blanks only
                        std::int64_t seen = result.sentences_seen++;
                        if (static_cast<std::int64_t>(sample.size()) < opts.max_sentences) {
                            sample.emplace_back(piece);
                        } else {   // reservoir sampling (Algorithm R)
                            std::uniform_int_distribution<std::int64_t> pick(0, seen);
                            std::int64_t j = pick(rng);
                            if (j < opts.max_sentences) sample[static_cast<std::size_t>(j)].assign(piece);
                        }
                    });
                }
                start = end + 1;
            }
        });
        progress.add(1);
    }
    progress.finish();
    result.sentences_used = static_cast<std::int64_t>(sample.size());
    if (sample.empty()) {
        const CorpusCounts& c = result.counts;
        const std::string counts = cat(c.files, c.files == 1 ? " file, " : " files, ", c.empty_skipped, " empty",
                                       c.malformed_skipped > 0 ? cat(", ", c.malformed_skipped, " skipped") : "");
        if (files.size() == 1) user_error_in(files.front().path, "holds no text to train on (" + counts + ")");
        user_error("the corpus holds no text to train on (", counts, ")");
    }
    std::unordered_map<std::string, std::string> kw{
        {"model_type", opts.model_type},
        {"vocab_size", std::to_string(opts.vocab_size)},
        {"character_coverage", std::to_string(opts.character_coverage)},
        {"pad_id", "0"}, {"unk_id", "1"}, {"bos_id", "2"}, {"eos_id", "3"},
        {"byte_fallback", opts.byte_fallback ? "true" : "false"},
        {"hard_vocab_limit", "false"},
        {"normalization_rule_name", "identity"},
        {"remove_extra_whitespaces", "false"},
        {"max_sentence_length", std::to_string(kTrainSentenceBytes)},
        {"num_threads", std::to_string(opts.threads > 0 ? opts.threads : thread_count())},
        {"minloglevel", "0"},   // every line, to SentencepieceTrainLog: progress, and --verbose's debug lines
    };
    log_info("training a " + opts.model_type + " tokenizer, vocabulary " + std::to_string(opts.vocab_size) + ", on " +
             std::to_string(sample.size()) + " of " + std::to_string(result.sentences_seen) + " sentences" +
             (result.long_lines_split > 0 ? cat(" (", result.long_lines_split, result.long_lines_split == 1 ? " line" : " lines", " over ", kTrainSentenceBytes,
                                                " bytes cut into pieces at blanks)")
                                          : std::string()));
    const auto train = [&] {
        sentencepiece::SetRandomGeneratorSeed(static_cast<unsigned int>(opts.seed));
        VectorIterator it(sample);
        SentencepieceTrainLog train_log(opts.model_type, opts.vocab_size);
        auto status = sentencepiece::SentencePieceTrainer::Train(kw, &it, &result.model_bytes);
        if (status.ok()) train_log.finish();
        return status;
    };
    auto status = train();
    // The whitespace mark U+2581 must be a piece: a corpus of long lines with few blanks (CJK, a run of letters) left
    // it below --character-coverage, and every blank and document start then decoded as a literal "▁" (a helper's
    // pass, session 54). Trained again with it required (sentencepiece's required_chars) only then, so that every
    // other corpus's model stays byte for byte what it was (the databases chunked with it hold its fingerprint).
    if (status.ok()) {
        sentencepiece::SentencePieceProcessor first;
        if (first.LoadFromSerializedProto(result.model_bytes).ok() && first.PieceToId("\xE2\x96\x81") == first.unk_id()) {
            log_info("the whitespace mark U+2581 fell below --character-coverage (long lines with few blanks): training again "
                     "with it required");
            kw["required_chars"] = "\xE2\x96\x81";
            status = train();
        }
    }
    if (!status.ok()) {
        // "Vocabulary size is smaller than required_chars": the characters that character_coverage keeps
        // (plus the special and byte pieces) do not fit in the vocabulary
        const std::string why = status.ToString();
        std::smatch m;
        static const std::regex required(R"(required_chars\. (\d+) vs (\d+))");
        if (std::regex_search(why, m, required))
            user_error_in("--vocab-size", cat(m[1].str(), " is smaller than the ", m[2].str(),
                                              " pieces the corpus's characters and the special pieces need"),
                          // below ~300 the 256 byte pieces and 4 special pieces are most of the need: coverage cannot help
                          std::stoll(m[2].str()) <= 300
                              ? cat("give --vocab-size ", m[2].str(), " or more (byte fallback alone takes 256 pieces)")
                          : opts.character_coverage > 0.98   // (at 0.98, the lowest allowed, it advised 0.98)
                              ? cat("give --vocab-size ", m[2].str(), " or more, or a lower --character-coverage (down to 0.98)")
                              : cat("give --vocab-size ", m[2].str(), " or more (--character-coverage is at its lowest, 0.98)"));
        user_error_in("", "tokenizer training failed: " + why,
                      why.find("required_chars") != std::string::npos
                          ? "a larger --vocab-size, or a lower --character-coverage"
                          : "a smaller --vocab-size, or more text");
    }
    sentencepiece::SentencePieceProcessor sp;
    if (!sp.LoadFromSerializedProto(result.model_bytes).ok()) throw InternalError("trained model does not load");
    result.vocab_size = sp.GetPieceSize();
    return result;
}

}  // namespace retro
