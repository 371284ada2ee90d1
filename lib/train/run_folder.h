// A retro-train run folder's files outside the training loop (train/trainer.h): checkpoint folders
// (checkpoints/step_XXXXXXXX, complete once DONE exists), the newest complete one, pruning to the newest N, whether
// a folder holds a run, the fingerprint of the database / neighbours files a checkpoint trained on, and the
// metrics.jsonl kept through a resumed checkpoint's step.
// provides: checkpoint_dir, latest_checkpoint, prune_checkpoints, holds_run, refuse_unclaimed_model_files, folder_outputs_stamp,
//           metrics_keep_through
#pragma once
#include <cstdint>
#include <string>

namespace retro {

// OUT/checkpoints/step_%08lld
std::string checkpoint_dir(const std::string& out, std::int64_t step);
// The newest checkpoint with a DONE marker, or "".
std::string latest_checkpoint(const std::string& out);
// Removes the oldest complete checkpoints of `out` beyond the newest `keep` (0: none removed), and, called after a
// save completed, every step folder without DONE (a write or a removal a kill cut short).
void prune_checkpoints(const std::string& out, std::int64_t keep);
// Whether --out holds a run (a folder holding only config.json and an empty metrics.jsonl, a run refused before its
// first step, holds nothing to keep). `any_manifest`: a manifest.json counts too (after output_folder_guard has refused other tools' folders).
bool holds_run(const std::string& out, bool any_manifest);
// Throws UserError naming `out` when it is a folder no tool claims (core/output_folder.h's folder_owner) that holds
// a model.safetensors (never a run's alone: a run's first files are metrics.jsonl and config.json) or a config.json
// other than `config_path`'s (a run of before session 53 killed in its first step left its own config.json alone,
// which is taken). Other files beside (a log written there, notes) are left to be.
void refuse_unclaimed_model_files(const std::string& out, const std::string& config_path);
// The fingerprint of the files training reads from a database or neighbours folder, as its manifest records them
// (paths and fingerprints; not sources.jsonl, which names where the corpus was, nor distances.npy), "" without a
// manifest or a folder: the same for a copy, or a rebuild with the same bytes, another for other contents.
std::string folder_outputs_stamp(const std::string& dir);
// Rewrites metrics.jsonl `path` with the lines of steps 1..step (one each, in file order: a resume from the step's
// checkpoint redoes the rest), warning of unreadable lines other than a torn last one and of steps without a line
// beyond `known_missing` (the gap an earlier resume reported, recorded in the checkpoint: said once, not on every
// resume after it). Returns how many of the steps 1..step have no line.
std::int64_t metrics_keep_through(const std::string& path, std::int64_t step, std::int64_t known_missing);

}  // namespace retro
