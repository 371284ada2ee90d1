// manifest.json, one per output folder: which tool made it (version, git commit, full command
// line), with which parameters, from which inputs (path, size, fingerprint) and what it wrote
// (path, shape, dtype, size, fingerprint). Field list: docs/formats.md "manifest.json".
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "core/tool_context.h"

namespace retro {

class Manifest {
public:
    Manifest(const ToolContext& ctx);
    nlohmann::json& parameters() { return json_["parameters"]; }
    nlohmann::json& extra() { return json_; }   // tool-specific top-level fields

    // Records an input file (size and fingerprint read now). `role` names what it is ("tokenizer").
    void add_input(const std::string& role, const std::string& path);
    // Records an input file as it was read and fingerprinted earlier (`bytes`, `fingerprint`), not read again now: one
    // that may be gone by the end (an --init-from checkpoint its run prunes), and which inputs_check() leaves alone.
    void add_input_as_read(const std::string& role, const std::string& path, std::int64_t bytes, const std::string& fingerprint);
    // Records an input folder by its manifest's fingerprint of outputs (see folder_fingerprint).
    void add_input_folder(const std::string& role, const std::string& dir);
    // Records an output file in `dir` (path stored relative to it). For .npy the shape and dtype
    // come from its header; `dtype_tag` overrides the dtype (e.g. "bf16" for a '<u2' array).
    void add_output(const std::string& dir, const std::string& name, const std::string& dtype_tag = "");
    // Refuses (UserError) where an input recorded here was made again, rewritten or removed since the run first read
    // it (core/input_stamps.h); for a tool that removes its marks of an unfinished run before write().
    void inputs_check() const;
    // Writes dir/manifest.json atomically (last, so its presence marks a complete folder), after inputs_check().
    void write(const std::string& dir) const;
    const nlohmann::json& json() const { return json_; }

private:
    nlohmann::json json_;
    std::vector<std::string> as_read_;   // inputs recorded by add_input_as_read (inputs_check leaves them alone)
};

// The JSON files json_read_file and manifest_read have parsed in this process, oldest first, for the tool frame's
// message when a field read later has the wrong type (a hand-edited file); cleared by json_files_read_reset.
std::vector<std::string> json_files_read();
void json_files_read_reset();
// The time now in UTC as manifests record it ("created"): 2026-12-02T00:15:02Z.
std::string utc_timestamp();
// Reads any JSON file; throws UserError naming it when missing or malformed.
nlohmann::json json_read_file(const std::string& path);
// Reads dir/manifest.json; throws UserError naming it when missing or malformed.
nlohmann::json manifest_read(const std::string& dir);
// The "tool" a JSON file records (a manifest.json, a state.json), or "" when it is missing, unreadable or has none.
std::string json_file_tool(const std::string& path);
// Marks dir/state.json as a finished shard (`shard_done`: "i/n") of a sharded retro-index or retro-knn run, whose
// merge writes the manifest: manifest_read then names a shard given as an input as such (it said "unfinished run:
// --resume", and --resume said "shard done"). A --resume rewrites state.json and marks it again at its end.
void state_mark_shard_done(const std::string& dir, int index, int count);
// On a --resume of dir (state.json `old` at `path`) as shard index/count: UserError when it records another shard
// or the whole job (`shard`: {index, count}) — another shard's blocks would join this one's and the folder be
// relabelled (a requeued `--shard auto` job given another rank). Resumed as the whole job (count 1) any folder may be
// finished (a shard's parts are what a killed run leaves). A state of older versions records none: nothing to check.
void state_check_same_shard(const nlohmann::json& old, const std::string& path, int index, int count);
// The `shard` record state_check_same_shard compares.
nlohmann::json state_shard_record(int index, int count);
// The {index, count} a state.json records (state_shard_record), or {-1, -1} where it records none.
std::pair<int, int> state_shard(const nlohmann::json& state);
// Before a merge: where every folder in `dirs` records its shard (state_mark_shard_done), they must be the shards
// 0/n .. n-1/n of one count, each once — else a UserError naming the missing shard, a repeated one, or the counts
// (the merge named only "block 2 is in none of the folders"). Folders that record none are left to the merge's checks.
void shards_check_complete(const std::vector<std::string>& dirs, const std::string& tool);
// Where `now` first differs from `recorded` (keys in order, arrays by position), as a refusal names it:
// `parameters.k is 3, the folder's 2` ("absent" for a missing key; values as compact JSON, cut to 60 characters);
// "" when they are equal. `path` prefixes the key path; `whose` names the record ("the journal's").
std::string json_first_difference(const nlohmann::json& recorded, const nlohmann::json& now, const std::string& path = "",
                                  const std::string& whose = "the folder's");
// The `field` ("path", "fingerprint", ...) of the first input of `role` a manifest records, or "".
std::string manifest_input(const nlohmann::json& manifest, const std::string& role, const std::string& field = "path");
// An input folder an option was left out for (`option`: "--db"), taken from what `dir`'s manifest records for `role`:
// `what` names it ("database") and `made_from` how dir came of it ("the index idx/ was built from"). Refused in one line
// where dir has no manifest, the record is missing, or the folder recorded is gone; a folder made again since is the
// reader's to catch (it holds the recorded fingerprint to the folder).
std::string manifest_recorded_folder(const std::string& dir, const std::string& role, const std::string& what,
                                     const std::string& made_from, const std::string& option);
// A fingerprint of a whole output folder: xxh3 over its manifest's output fingerprints, so two
// folders with identical outputs have the same value whatever command made them.
std::string folder_fingerprint(const nlohmann::json& manifest);
// Before a merge joins what shards computed from an input folder (the database, an index, the queries) and records
// that folder in its manifest: the folder `dir` that `state_file` names as `what` must still be there and hold what the
// shard's run read (`fingerprint`, its folder_fingerprint then), else a UserError naming it and `fix` (a folder made
// again in place since gave a manifest that recorded the new one beside outputs computed from the old).
void recorded_folder_check(const std::string& state_file, const std::string& what, const std::string& dir,
                           const std::string& fingerprint, const std::string& fix, const std::string& recorded_by = "");
// Re-hashes the files `names` of the folder `dir` (paths as its manifest lists them) and throws UserError naming
// the first whose bytes no longer match the fingerprint its manifest.json recorded: changed since the tool that
// wrote the folder finished (edited, replaced by another array of the same shape, damaged on disk). A file the
// manifest records no fingerprint for (a folder written by a script of the user's) is not checked. One
// sequential read of each file (xxh3, several GB/s from the page cache), with a progress line past 256 MB.
// Tools call it for the input files they read whole anyway, so it costs at most that read again; `--no-verify`
// skips it (docs/tools.md "Verified inputs").
void manifest_verify_outputs(const std::string& dir, const std::vector<std::string>& names);
// Throws UserError naming the first file the manifest.json of `dir` lists among its outputs that is not there: a
// folder that says it is finished and is not whole (a removal stopped midway, a file deleted by hand). For the
// "already complete; nothing to resume" answers, which took the manifest's word for it (a helper's kill soak,
// session 68). `tool` makes it again (the fix names its --force).
void manifest_refuse_missing_outputs(const std::string& dir, const std::string& tool);
// The same for a folder that may hold no manifest.json (a run folder killed before its manifest, a knn folder
// made by hand): nothing to check against then.
void manifest_verify_outputs_if_any(const std::string& dir, const std::vector<std::string>& names);
// The same for a retro-train checkpoint folder: its state.json records the fingerprints of the files beside it
// (`fingerprints`: {"model.safetensors": ..., "optimizer.safetensors": ...}; none before 2026-12-01: nothing to check).
void checkpoint_verify_files(const std::string& dir);
// The weights a user names (retro-train eval --weights, retro-generate --checkpoint: a checkpoint folder's or a run's
// model.safetensors, or the folder itself) held to what their folder records: a checkpoint's state.json, else a run's
// manifest.json; a loose .safetensors file has nothing to be held to.
void named_weights_verify(const std::string& weights_file);

}  // namespace retro
