// The guard every tool runs on its --out folder before it writes into it or clears it (docs/tools.md,
// "Output folders"): --out is never one of the run's inputs, --force never clears a folder that holds an input,
// and a folder whose manifest.json says another tool made it is neither written into nor cleared, with or
// without --force (a database, an index or a run is only ever replaced by the tool that made it).
#pragma once
#include <string>
#include <vector>

namespace retro {

struct OutputInput {
    std::string option;   // how the user named it: "--db", "--tokenizer", "the corpus"
    std::string path;     // a file or a folder
};

// Throws UserError (one line naming `out`) when
//   - `out` is the same folder as an input folder;
//   - `clears` (the tool is about to empty `out`: --force over a non-empty folder) and an input lies inside `out`;
//   - `out`/manifest.json exists, is readable and names a tool other than `tool` (ToolContext::tool).
// A missing `out`, or one without a manifest (a killed run's leftovers), passes.
void output_folder_guard(const std::string& out, const std::string& tool, const std::vector<OutputInput>& inputs,
                         bool clears);

// A run refused after it created its --out (an option checked late, an empty corpus) leaves nothing behind that would
// make the corrected rerun fail with "already exists": made before the folder is created, this removes it when the
// scope is left by an exception, if the folder did not exist before and keep() was not called. Call keep() once the
// run holds work worth resuming (its first checkpoint).
class NewOutputFolder {
public:
    explicit NewOutputFolder(std::string out);
    ~NewOutputFolder();
    void keep() { keep_ = true; }
    NewOutputFolder(const NewOutputFolder&) = delete;
    NewOutputFolder& operator=(const NewOutputFolder&) = delete;

private:
    std::string out_;
    bool existed_ = true, keep_ = false;
    int exceptions_ = 0;   // std::uncaught_exceptions() when made: the destructor cleans up only while unwinding
};

}  // namespace retro
