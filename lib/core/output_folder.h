// The guard every tool runs on its --out folder before it writes into it or clears it (docs/tools.md,
// "Output folders"): --out is never one of the run's inputs, --force never clears a folder that holds an input,
// a folder whose manifest.json says another tool made it is neither written into nor cleared, with or
// without --force (a database, an index or a run is only ever replaced by the tool that made it), and no two runs
// write one folder at once (a lock held for the run's life).
#pragma once
#include <filesystem>
#include <string>
#include <vector>

namespace retro {

// The path with symlinks and ".." resolved as far as it exists (weakly_canonical), so that "db", "./db/" and a
// link to it compare equal. An empty path stays empty.
std::filesystem::path path_resolved(const std::string& p);
// True when `inner` is `outer` or lies below it (both resolved).
bool path_inside(const std::filesystem::path& inner, const std::filesystem::path& outer);

struct OutputInput {
    std::string option;   // how the user named it: "--db", "--tokenizer", "the corpus"
    std::string path;     // a file or a folder
};

// Throws UserError (one line naming `out`) when
//   - `out` is the same folder as an input folder;
//   - `clears` (the tool is about to empty `out`: --force over a non-empty folder) and an input lies inside `out`;
//   - `out`/manifest.json exists, is readable and names a tool other than `tool` (ToolContext::tool);
//   - `lock` and another process holds `out`'s lock (output_folder_lock).
// A missing `out`, or one without a manifest (a killed run's leftovers), passes.
void output_folder_guard(const std::string& out, const std::string& tool, const std::vector<OutputInput>& inputs,
                         bool clears, bool lock = true);

// Takes the lock of folder `out` for the rest of this process's life, or throws UserError naming `out` and the
// process that holds it ("another run is writing into it (retro-train, pid 1234, since ...)"): a second run into a
// folder a first one is still writing (a --resume or --force started twice) would mix the two runs' files. An
// flock(2) on /tmp/retrokit-locks-UID/<xxh3 of the resolved path>.lock (/tmp itself, not a per-job $TMPDIR), so the
// folder itself holds no lock file (--force may empty it) and the kernel frees the lock when the process ends,
// SIGKILL included; it guards the runs of one machine that share /tmp (not two hosts writing one shared folder,
// nor jobs in private /tmp namespaces). Taken again by the same process, it returns at once. Without a usable lock
// folder it warns and goes on unguarded. NewOutputFolder removes a folder only while this process holds its lock.
void output_folder_lock(const std::string& out, const std::string& tool);

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
