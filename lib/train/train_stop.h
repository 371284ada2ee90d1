// retro-train's answer to SIGINT and SIGTERM (train/trainer.cpp): rank 0's one line saying where to resume, and in a
// one-process run, once steps run, a first signal that lets the step under way finish and its checkpoint be saved
// before the run stops (no finished step lost); a second signal, or one under a launcher, stops at once.
// provides: train_stop_install, train_stop_set_resume_step, train_stop_after_step, train_stop_requested,
//           train_stop_now
#pragma once
#include <cstdint>
#include <string>

namespace retro {

// Installs the handlers (rank 0); `launcher`: the run is one rank of several (its stop comes from the launcher).
void train_stop_install(bool launcher);
// The line a stop prints from now on: `out` holds a complete checkpoint at `step`.
void train_stop_set_resume_step(const std::string& out, std::int64_t step);
// Whether a first signal waits for the step under way (set while steps run in a one-process run).
void train_stop_after_step(bool on);
// The signal a waiting stop was asked by, or 0.
int train_stop_requested();
// The stop asked for, now that the checkpoint is saved: the line, then the signal's own death (exit 128 + sig).
[[noreturn]] void train_stop_now(int sig);

}  // namespace retro
