// The journal of a batch retro-generate (--prompts in.jsonl --output out.jsonl): OUT.partial, so that an
// interrupted run (Ctrl-C, a kill, a full disk) keeps every prompt it finished. Line 1 records the job (the inputs
// and every option that changes the text); each further line is one finished prompt: {"index": i, "result": {...}},
// the result being the line out.jsonl will hold. Lines are appended and fdatasync'd as prompts finish; `--resume`
// reads them back (a last line cut short by a kill is dropped) and only the others are decoded. Each prompt has its
// own random stream (generate/generator.h), so the resumed file equals an uninterrupted run's byte for byte.
// The journal is removed once out.jsonl is committed.
#pragma once
#include <cstdint>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

namespace retro {

class GenerateJournal {
public:
    // The journal of `output` (output + ".partial"). Without `resume` an existing journal is refused (it holds an
    // interrupted run's finished prompts: --resume, or remove it); with `resume` one recording another `job` is
    // refused naming the first difference, and none at all starts from the first prompt. `prompts`: how many the
    // input holds (an index beyond is a damaged journal).
    GenerateJournal(const std::string& output, const nlohmann::json& job, bool resume, std::int64_t prompts);
    ~GenerateJournal();
    GenerateJournal(const GenerateJournal&) = delete;
    GenerateJournal& operator=(const GenerateJournal&) = delete;

    const std::string& path() const { return path_; }
    // The finished prompts: index -> the result line.
    const std::map<std::int64_t, nlohmann::json>& done() const { return done_; }
    // Appends prompt `index`'s result and syncs it to disk (UserError naming the journal when it cannot).
    void add(std::int64_t index, const nlohmann::json& result);
    // Removes the journal (after the output is committed).
    void remove();

private:
    void load(const nlohmann::json& job, std::int64_t prompts);
    std::string path_;
    int fd_ = -1;
    std::map<std::int64_t, nlohmann::json> done_;
};

}  // namespace retro
