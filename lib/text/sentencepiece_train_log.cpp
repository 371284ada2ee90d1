// Implementation of sentencepiece_train_log.h.
#include "text/sentencepiece_train_log.h"

#include <algorithm>
#include <iostream>
#include <regex>

#include "core/log.h"

namespace retro {

namespace {

// the number after `key` in `line` ("size=" in "EM sub_iter=0 size=3583 obj=..."), or -1
std::int64_t number_after(const std::string& line, const std::string& key) {
    const auto at = line.find(key);
    if (at == std::string::npos) return -1;
    std::int64_t v = 0;
    std::size_t i = at + key.size();
    if (i >= line.size() || line[i] < '0' || line[i] > '9') return -1;
    for (; i < line.size() && line[i] >= '0' && line[i] <= '9' && v < (std::int64_t{1} << 50); ++i) v = v * 10 + (line[i] - '0');
    return v;
}

}  // namespace

SentencepieceTrainProgress::SentencepieceTrainProgress(std::string model_type, std::int64_t vocab_size)
    : model_type_(std::move(model_type)), vocab_size_(vocab_size) {}

bool SentencepieceTrainProgress::feed(const std::string& line) {
    if (line.find("Adding meta_piece: ") != std::string::npos) {
        meta_pieces_++;
        return false;
    }
    if (const std::int64_t a = number_after(line, "Alphabet size="); a >= 0) {
        alphabet_ = a;
        return false;
    }
    if (model_type_ == "unigram") {
        if (const std::int64_t n = number_after(line, "Initialized "); n >= 0 && line.find("seed sentencepieces") != std::string::npos) {
            seed_ = n;
            const auto target = static_cast<std::int64_t>(static_cast<double>(vocab_size_) * 1.1);
            stage_ = "pruning the seed pieces";
            total_ = std::max<std::int64_t>(1, seed_ - target);
            done_ = 0;
            return true;
        }
        if (line.find("EM sub_iter=") == std::string::npos || stage_.empty()) return false;
        const std::int64_t size = number_after(line, "size=");
        if (size < 0) return false;
        done_ = std::clamp<std::int64_t>(seed_ - size, 0, total_);
        return true;
    }
    if (line.find("Added: ") == std::string::npos) return false;   // bpe
    const std::int64_t size = number_after(line, " size=");
    if (size < 0) return false;
    if (stage_.empty()) {
        stage_ = "merging pieces";
        total_ = std::max<std::int64_t>(1, vocab_size_ - meta_pieces_ - alphabet_);
    }
    done_ = std::clamp<std::int64_t>(size, 0, total_);
    return true;
}

SentencepieceTrainLog::SentencepieceTrainLog(std::string model_type, std::int64_t vocab_size)
    : progress_(std::move(model_type), vocab_size) {
    saved_ = std::cerr.rdbuf(this);
}

SentencepieceTrainLog::~SentencepieceTrainLog() { restore(); }   // (a training that failed: no "100%" line)

void SentencepieceTrainLog::restore() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!saved_) return;
    std::cerr.rdbuf(saved_);
    saved_ = nullptr;
    if (!line_.empty()) line_done();
}

void SentencepieceTrainLog::finish() {
    restore();
    if (bar_) {
        bar_->set(progress_.total());   // the trainer stops once within its target: the stage is over
        bar_->finish();
    }
}

int SentencepieceTrainLog::overflow(int ch) {
    if (ch == traits_type::eof()) return traits_type::not_eof(ch);
    const char c = static_cast<char>(ch);
    std::lock_guard<std::mutex> lock(mutex_);
    take(&c, 1);
    return ch;
}

std::streamsize SentencepieceTrainLog::xsputn(const char* s, std::streamsize n) {
    std::lock_guard<std::mutex> lock(mutex_);
    take(s, static_cast<std::size_t>(n));
    return n;
}

void SentencepieceTrainLog::take(const char* s, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
        if (s[i] == '\n') line_done();
        else if (line_.size() < 4096) line_ += s[i];
    }
}

void SentencepieceTrainLog::line_done() {
    // "unigram_model_trainer.cc(507) LOG(INFO) EM sub_iter=..." as "sentencepiece: EM sub_iter=..."
    static const std::regex prefix(R"(^[A-Za-z0-9_.]+\(\d+\) LOG\((\w+)\) )");
    std::smatch m;
    const bool tagged = std::regex_search(line_, m, prefix);
    const std::string text = "sentencepiece: " + (tagged ? m.suffix().str() : line_);
    // its errors as warnings: LOG(ERROR), and a failed CHECK ("trainer.cc(123) [cond] message", untagged, then
    // "Program terminated with an unrecoverable error." and exit), which printed whatever minloglevel said
    static const std::regex check_failed(R"(^[A-Za-z0-9_.]+\(\d+\) \[)");
    const bool error = (tagged && (m[1] == "ERROR" || m[1] == "FATAL")) || (!tagged && std::regex_search(line_, check_failed)) ||
                       line_.find("Program terminated with an unrecoverable error") != std::string::npos;
    if (error) log_warn(text);
    else log_debug(text);
    if (progress_.feed(line_)) {
        if (!bar_) bar_ = std::make_unique<Progress>(progress_.stage(), progress_.total(), "pieces");
        bar_->set(progress_.done());
    }
    line_.clear();
}

}  // namespace retro
