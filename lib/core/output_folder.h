// The guard every tool runs on its --out folder before it writes into it or clears it (docs/tools.md,
// "Output folders"): --out is never one of the run's inputs, --force never clears a folder that holds an input,
// a folder whose manifest.json says another tool made it is neither written into nor cleared, with or
// without --force (a database, an index or a run is only ever replaced by the tool that made it), and no two runs
// write one folder at once (a lock held for the run's life).
#pragma once
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace retro {

// The path with symlinks and ".." resolved as far as it exists (weakly_canonical), so that "db", "./db/" and a
// link to it compare equal. An empty path stays empty.
std::filesystem::path path_resolved(const std::string& p);
// `p` made absolute where it exists, else the nearest folder above it that does; "" where none does (disk_free_bytes's
// filesystem, the place an --out not made yet would be made in).
std::filesystem::path path_nearest_existing(const std::string& p);
// True when `inner` is `outer` or lies below it (both resolved).
bool path_inside(const std::filesystem::path& inner, const std::filesystem::path& outer);

// Which tool made folder `dir`: its manifest.json's "tool" (finished), or, for a run stopped before its end, the
// tool its leftovers name (state.json's "tool", retro-chunk's progress.json, retro-train's checkpoints/). An empty
// tool: no folder, or one no tool claims.
struct FolderOwner {
    std::string tool;
    bool finished = false;
    bool resumable = true;   // unfinished: false where its state.json says so (a merge, a bm25 build)
};
FolderOwner folder_owner(const std::string& dir);
// The command that runs `tool`'s folder-making work, for a hint ("retro-tokenizer train": "retro-tokenizer --resume"
// alone is refused for its missing subcommand; the other tools' is their name).
std::string tool_command(const std::string& tool);
// Throws UserError naming `run` when it is a retro-train run stopped before its end (folder_owner: checkpoints/ or
// metrics.jsonl beside config.json, no manifest.json): a model.safetensors there is not a finished run's (the manifest
// is written last). `weights_option` names where a checkpoint is taken instead (eval's --weights, retro-generate's
// --checkpoint; "" for none). A folder whose manifest.json is there (if damaged, its reader names it), or that no
// tool claims (a config.json and weights put together by hand), passes.
void refuse_unfinished_run(const std::string& run, const std::string& weights_option);

// Throws UserError naming `named` ("cannot be written: no file can be made in DIR (why)") unless a file can be made in
// folder `dir` (one is made and removed): checked before work whose result is written there at the end.
void folder_writable_check(const std::string& named, const std::filesystem::path& dir);

// Throws UserError (one line naming `file`) when an output file given to `option` (eval's --json-out, plot's --out)
// is a folder, a device, a pipe or a link, cannot be made (its folder missing or not writable: checked by making a file there), or is one of the
// files of a folder a tool made (its manifest's outputs, manifest.json, config.json,
// metrics.jsonl, state.json, anything under checkpoints/ or parts/): writing it would replace that output. A new file
// beside them (RUN/curves.png, RUN/eval.json) passes.
void output_file_guard(const std::string& file, const std::string& option);

// A file first written under its name plus `suffix` (".tmp", then renamed; retro-generate's ".partial" journal):
// refused, in one line, where that name passes the limit of its folder's file system on a name's bytes (255 on most):
// it failed after the work.
void output_name_room_check(const std::string& file, const std::string& suffix);

struct OutputInput {
    std::string option;   // how the user named it: "--db", "--tokenizer", "the corpus"
    std::string path;     // a file or a folder
};

// Throws UserError (one line naming `out`) when
//   - `out` is the same folder as an input folder;
//   - `clears` (the tool is about to empty `out`: --force over a non-empty folder) and an input lies inside `out`;
//   - `out` exists and is not a folder;
//   - `out` lies inside an input folder retro-index or retro-knn made (their --force would delete it), or inside the
//     checkpoints/ or parts/ of any folder a tool made (that tool's own, pruned or cleared by it);
//   - `out` holds another tool's output or unfinished run (folder_owner);
//   - `lock` and another process holds `out`'s lock (output_folder_lock).
// A missing `out`, one no tool claims, or this tool's own (finished or not) passes.
void output_folder_guard(const std::string& out, const std::string& tool, const std::vector<OutputInput>& inputs,
                         bool clears, bool lock = true);

// --force's clearing of `out` for the tools that replace a whole folder (retro-index, retro-knn), after
// output_folder_guard: removes what a run of `tool` writes there (its outputs, manifest.json, state.json, parts/,
// *.tmp) and nothing else; a folder no tool claims that holds other files (the user's own) is refused naming them.
// `check_only`: the refusal alone (before a long run that clears the folder at its end).
void output_folder_clear(const std::string& out, const std::string& tool, bool check_only = false);

// `merge --resume` (retro-chunk, retro-index and retro-knn merge), so that a pipeline run again skips a merge made
// already. Runs the guard (output_folder_guard: another tool's folder, an input inside `out`; the lock), then says
// what a merge into `out` does:
//   kDone   `out` holds `tool`'s finished output (manifest.json) of this same job: `difference(manifest)` is "", and
//           "already complete; nothing to resume" is logged. Another job's is refused naming its difference.
//   kRemake `out` holds an interrupted merge: `tool`'s state.json marks a merge (retro-index, retro-knn: "run": "a
//           merge"; a bm25 build's mark is refused), or a folder no tool claims holds some of the merge's `outputs`
//           (each done or NAME.tmp), perhaps manifest.json.tmp, and nothing else (retro-chunk's merge leaves no mark;
//           retro-index's and retro-knn's killed between removing theirs and writing the manifest). A merge cannot be
//           continued: it is made again, as --force would.
//   kNew    `out` is missing or empty.
// Anything else is refused in one line: `tool`'s unfinished run of another kind (a build, a shard: resumed by its own
// command), or a folder of the user's own files. --resume with --force is refused as a contradiction.
enum class MergeResume { kNew, kRemake, kDone };
// The refusal of --resume with --force alone: a merge runs it first, before it reads its shards.
void merge_resume_force_refuse(bool resume, bool force);
MergeResume merge_resume_check(const std::string& tool, const std::string& out, bool force,
                               const std::vector<OutputInput>& inputs,
                               const std::function<std::string(const nlohmann::json&)>& difference,
                               const std::vector<std::string>& outputs);

// Takes the lock of folder `out` for the rest of this process's life, or throws UserError naming `out` and the
// process that holds it ("another run is writing into it (retro-train, pid 1234, since ...)"): a second run into a
// folder a first one is still writing (a --resume or --force started twice) would mix the two runs' files. An
// flock(2) on /tmp/retrokit-locks-UID/<xxh3 of the resolved path>.lock (/tmp itself, not a per-job $TMPDIR), so the
// folder itself holds no lock file (--force may empty it) and the kernel frees the lock when the process ends,
// SIGKILL included (the file itself goes as the run ends: output_folder_locks_remove); it guards the runs of one
// machine that share /tmp (not two hosts writing one shared folder, nor jobs in private /tmp namespaces). Taken again by the same process, it returns at once. Without a usable lock
// folder it warns and goes on unguarded. NewOutputFolder removes a folder only while this process holds its lock.
void output_folder_lock(const std::string& out, const std::string& tool);
// Who holds `out`'s lock now (the holder's note, "retro-chunk, pid 123, since ..."), or "" when no other process
// does: a folder without its manifest may be one a run is still writing.
std::string output_folder_writer(const std::string& out);
// Whether `path` lies in a folder whose lock this process holds (a file of the run's own output).
bool output_folder_holds(const std::string& path);
// Removes the lock files this process holds (their locks go with the process): run at exit, once a lock is taken, and
// by interrupt_note_die before a signal ends the run. Async-signal-safe. A SIGKILLed run leaves its file (harmless:
// the next run locks it again).
void output_folder_locks_remove();
// The lock file of folder `out` (for tests: gone once its run has ended).
std::string output_folder_lock_file(const std::string& out);

// A run refused after it created its --out (an option checked late, an empty corpus) leaves nothing behind that would
// make the corrected rerun fail with "already exists": made before the folder is created, this removes it when the
// scope is left by an exception, if the folder did not exist before and keep() was not called, with the folders
// above it the run made for it where they are left empty (`--out deep/a/b` left deep/a). Call keep() once the run holds
// work worth resuming (its first checkpoint).
class NewOutputFolder {
public:
    explicit NewOutputFolder(std::string out);
    ~NewOutputFolder();
    void keep() { keep_ = true; }
    // The outermost folder of the path the run makes ("" where the folder exists): what interrupt_note_remove_empty
    // may remove up to.
    std::string outermost() const { return outermost_.string(); }
    // The folder as the kernel resolves it (absolute, links above it followed): what the interrupt note removes.
    std::string resolved() const { return made_.string(); }
    NewOutputFolder(const NewOutputFolder&) = delete;
    NewOutputFolder& operator=(const NewOutputFolder&) = delete;

private:
    std::string out_;
    std::filesystem::path made_;        // out_ as the kernel resolves it, absolute
    std::filesystem::path outermost_;   // the outermost folder of made_'s path this run makes (deep/ of deep/a/b)
    bool existed_ = true, keep_ = false;
    int exceptions_ = 0;   // std::uncaught_exceptions() when made: the destructor cleans up only while unwinding
};

}  // namespace retro
