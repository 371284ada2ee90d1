// What sentencepiece's trainer says while it trains, turned into progress: its LOG(INFO) lines go to std::cerr, which
// the tools silenced (a minute of silence between "training" and "wrote" on a large corpus). SentencepieceTrainLog
// takes std::cerr for the training's length, shows a bar for the stage that takes the time (a unigram model's
// pruning of its seed pieces down to the vocabulary, a BPE model's merges), passes every line on as a debug line
// (--verbose) and sentencepiece's errors as warnings.
// provides: SentencepieceTrainProgress, SentencepieceTrainLog
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <streambuf>
#include <string>

#include "core/progress.h"

namespace retro {

// How far the trainer is, read from its log lines (sentencepiece 0.1.97's wording; lines it does not know are no
// progress). Unigram: "Initialized N seed sentencepieces", then "EM sub_iter=k size=S" as pruning takes S down to the
// vocabulary x 1.1 (unigram_model_trainer.cc's desired_vocab_size_): done = N - S of total N - target. BPE: "Added:
// ... size=S" counts the merged pieces of the vocabulary less its meta pieces and alphabet (both logged before).
class SentencepieceTrainProgress {
public:
    SentencepieceTrainProgress(std::string model_type, std::int64_t vocab_size);
    // Reads one line; true when it moved the progress (then stage(), done() and total() say where it is).
    bool feed(const std::string& line);
    const std::string& stage() const { return stage_; }   // "" until the stage with a bar starts
    std::int64_t done() const { return done_; }
    std::int64_t total() const { return total_; }

private:
    std::string model_type_, stage_;
    std::int64_t vocab_size_, meta_pieces_ = 0, alphabet_ = 0, seed_ = 0, done_ = 0, total_ = 0;
};

// Installs itself as std::cerr's buffer until finish() or its end; thread-safe.
class SentencepieceTrainLog : public std::streambuf {
public:
    SentencepieceTrainLog(std::string model_type, std::int64_t vocab_size);
    ~SentencepieceTrainLog() override;
    SentencepieceTrainLog(const SentencepieceTrainLog&) = delete;
    SentencepieceTrainLog& operator=(const SentencepieceTrainLog&) = delete;
    void finish();   // std::cerr restored, the bar's last line (after a training that succeeded)

protected:
    int overflow(int ch) override;
    std::streamsize xsputn(const char* s, std::streamsize n) override;

private:
    void restore();   // std::cerr's own buffer back, a last unfinished line read
    void take(const char* s, std::size_t n);   // with mutex_ held
    void line_done();
    std::mutex mutex_;
    std::string line_;
    SentencepieceTrainProgress progress_;
    std::unique_ptr<Progress> bar_;
    std::streambuf* saved_ = nullptr;
};

}  // namespace retro
