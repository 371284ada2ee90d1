// retro-train's answer to SIGINT and SIGTERM (train/trainer.cpp): rank 0's one line saying where to resume, and in a
// one-process run, once steps run, a first signal that lets the step under way finish and its checkpoint be saved
// before the run stops (no finished step lost); a second signal, or one under a launcher, stops at once.
// One sender's signal repeated within a quarter second is the same request, not a second one: GNU timeout sends its signal to
// the command and then to the command's process group, so `timeout -s INT 3h retro-train ...` delivered SIGINT twice,
// and where the first had been handled before the second came (a loaded machine) the run stopped at once, dropping
// the steps since the last checkpoint (a fresh-clone CI run, session 59).
// provides: train_stop_install, train_stop_set_resume_step, train_stop_set_finished, train_stop_after_step,
//           train_stop_requested, train_stop_now, StopSignalSender, stop_signal_repeats_request
#pragma once
#include <cstdint>
#include <string>

namespace retro {

// Installs the handlers (rank 0); `launcher`: the run is one rank of several (its stop comes from the launcher);
// `force`: the run was given --force, so its line says to continue with --resume in place of it.
void train_stop_install(bool launcher, bool force);
// The line a stop prints from now on: `out` holds a complete checkpoint at `step`.
void train_stop_set_resume_step(const std::string& out, std::int64_t step);
// The line a stop prints once the run has written its final files (a stop asked for during the last step): `out` is
// complete, nothing to resume.
void train_stop_set_finished(const std::string& out);
// Whether a first signal waits for the step under way (set while steps run in a one-process run).
void train_stop_after_step(bool on);
// The signal a waiting stop was asked by, or 0.
int train_stop_requested();
// The stop asked for, now that the checkpoint is saved: the line, then the signal's own death (exit 128 + sig).
[[noreturn]] void train_stop_now(int sig);

// Who sent a signal and when (from its siginfo_t and CLOCK_MONOTONIC), to tell a repeat from a second request.
struct StopSignalSender {
    int signal = 0;
    int code = 0;               // si_code: SI_USER for kill(2), SI_KERNEL for a terminal's Ctrl-C, SI_TKILL for raise
    long long pid = 0;          // si_pid: the sending process (0 from the kernel)
    long long at_ns = 0;        // when it was handled, CLOCK_MONOTONIC
};
// Whether `again` repeats `first`'s request: the same signal, within 250 ms, sent by kill(2) from the process that
// sent the first, or from the parent (`parent_pid`: timeout passing on a Ctrl-C that reached both from the terminal).
// A second Ctrl-C (from the terminal: no sending process) or a second kill from another process asks to stop at once.
bool stop_signal_repeats_request(const StopSignalSender& first, const StopSignalSender& again, long long parent_pid);

}  // namespace retro
