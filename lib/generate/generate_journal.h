// The journal of a batch retro-generate (--prompts in.jsonl --output out.jsonl): OUT.partial, so that an
// interrupted run (Ctrl-C, a kill, a full disk) keeps every prompt it finished. Line 1 records the job (the inputs
// and every option that changes the text); each further line is one finished prompt: {"index": i, "result": {...}},
// the result being the line out.jsonl will hold. Lines are appended and fdatasync'd as prompts finish; `--resume`
// reads them back (a last line cut short by a kill is dropped; a damaged line — not JSON of a finished prompt, or its
// result no longer giving the xxh3 the line records — or a prompt's second, is dropped with a warning and its prompt
// decoded again) and only the others are decoded. Each prompt has its
// own random stream (generate/generator.h), so the resumed file equals an uninterrupted run's byte for byte.
// The journal is removed once out.jsonl is committed.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace retro {

class GenerateJournal {
public:
    // The journal of `output` (output + ".partial"). A journal holding finished prompts is refused without `resume`
    // (--resume keeps them, or remove it), and with `resume` when it records another `job` (naming the first
    // difference). One holding none (a run stopped before its first prompt finished) or older than a committed
    // `output` (a kill between the commit and the journal's removal) is stale: replaced. Nothing is written until the
    // first add(). `prompts`: how many the input holds (an index beyond is a damaged journal).
    GenerateJournal(const std::string& output, const nlohmann::json& job, bool resume, std::int64_t prompts);
    ~GenerateJournal();
    GenerateJournal(const GenerateJournal&) = delete;
    GenerateJournal& operator=(const GenerateJournal&) = delete;

    const std::string& path() const { return path_; }
    // The finished prompts: index -> the result line.
    const std::map<std::int64_t, nlohmann::json>& done() const { return done_; }
    // Appends prompt `index`'s result and syncs it to disk (the journal, with its job line, made at the first);
    // UserError naming the journal when it cannot be written.
    void add(std::int64_t index, const nlohmann::json& result);
    // Removes the journal (after the output is committed).
    void remove();
    // Called by add() with the count of finished prompts once a line is written, before it is synced (a signal in
    // the sync finds the line in the file: the caller's interrupt note counts it).
    void set_on_written(std::function<void(std::size_t)> fn) { on_written_ = std::move(fn); }

private:
    // Reads an existing journal: its job line and finished prompts; `cut` = bytes of whole lines (a last line cut
    // short by a kill is not counted).
    void load(nlohmann::json& recorded_job, std::int64_t prompts, std::size_t& cut, std::size_t& size);
    // Refuses, in its own words, a job whose weights are the journal's file changed since; takes "weights" out of both
    // where it is the same file (the rest is compared field by field).
    void weights_change_refuse(nlohmann::json& recorded, nlohmann::json& job) const;
    std::string path_;
    nlohmann::json job_;
    bool fresh_ = true;   // no finished prompt on disk: add() writes the file anew, the job line first
    int fd_ = -1;
    std::map<std::int64_t, nlohmann::json> done_;
    std::function<void(std::size_t)> on_written_;
    std::vector<std::int64_t> damaged_;   // line numbers of lines not taken (their prompts are decoded again)
    // --resume over a journal with damaged lines: written again (atomically) with its job line and the good ones.
    void rewrite_without_damaged();
};

}  // namespace retro
