// Implementation of train_stop.h.
#include "train/train_stop.h"

#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>

#include "core/interrupt_note.h"
#include "core/terminal_text.h"

namespace retro {

namespace {

// Rank 0's last words when the run is stopped: by the launcher (a rank died, or the job was cancelled: mpirun and
// srun send the survivors SIGTERM), or, one process, by Ctrl-C (SIGINT) or SIGTERM. Written from the signal
// handler, so the text is formatted beforehand: g_stop_head (who stopped it) and the message (where to resume), in
// two buffers: a new one is written into the buffer the handler does not read, then made the one it reads (a signal
// during the checkpoint's snprintf printed a mix of the two lines), as core/interrupt_note.cpp does.
const char* g_stop_head = "retro-train: interrupted; ";
char g_stop_messages[2][512] = {"before the first checkpoint: run the same command with --resume (it starts at step 0)\n", ""};
std::atomic<int> g_stop_message_at{0};
const char* stop_message() { return g_stop_messages[g_stop_message_at.load(std::memory_order_acquire) & 1]; }
// Formats the next message into the idle buffer, then makes it the one the handler reads.
template <typename... Args>
void set_stop_message(const char* format, Args... args) {
    const int next = 1 - (g_stop_message_at.load(std::memory_order_relaxed) & 1);
    std::snprintf(g_stop_messages[next], sizeof g_stop_messages[next], format, args...);
    g_stop_message_at.store(next, std::memory_order_release);
}
// What to run: "the same command and --resume", or, for a run given --force (which --resume contradicts), "the same
// command, --resume in place of --force", as retro-chunk, retro-index and retro-knn say it (a helper's walk, session 60)
bool g_started_with_force = false;

// A one-process run's first SIGINT or SIGTERM once training steps run (g_stop_after_step set): the step under way
// finishes and a checkpoint is saved before the run stops (Trainer::run), so no finished step is lost; a second
// request (not one sender's repeat of the first: stop_signal_repeats_request), or a signal under a launcher (whose
// other ranks are being stopped too), stops at once as before.
volatile std::sig_atomic_t g_stop_after_step = 0;   // 1: stop gracefully when signalled
// The signal that asked for it, claimed by the first handler to see it (a process-directed signal is handled on any
// thread whose mask lets it in: timeout's second SIGINT could reach another thread while the first one's handler ran)
std::atomic<int> g_stop_signal{0};
std::atomic<int> g_stop_sender_set{0};   // g_stop_sender is whole (set after it, with release)
StopSignalSender g_stop_sender;          // who sent the claimed signal, read by later signals
static_assert(std::atomic<int>::is_always_lock_free, "used in a signal handler");

StopSignalSender sender_of(int sig, const siginfo_t* info) {
    StopSignalSender s;
    s.signal = sig;
    if (info) {
        s.code = info->si_code;
        s.pid = info->si_pid;
    }
    timespec now{};
    ::clock_gettime(CLOCK_MONOTONIC, &now);   // async-signal-safe
    s.at_ns = static_cast<long long>(now.tv_sec) * 1000000000LL + now.tv_nsec;
    return s;
}

extern "C" void on_stop_signal_info(int sig, siginfo_t* info, void*) {
    const StopSignalSender sender = sender_of(sig, info);
    if (g_stop_after_step) {
        int claimed = 0;
        if (g_stop_signal.compare_exchange_strong(claimed, sig, std::memory_order_acq_rel)) {
            g_stop_sender = sender;
            g_stop_sender_set.store(1, std::memory_order_release);
            const char* m = "retro-train: stopping after this step, once its checkpoint is saved (interrupt again to "
                            "stop at once)\n";
            ssize_t w = ::write(2, m, std::strlen(m));
            (void)w;
            return;
        }
        // a stop is asked for already: a repeat of that request (or one racing its handler on another thread) waits
        // for the step under way too; a second request stops at once
        if (!g_stop_sender_set.load(std::memory_order_acquire) ||
            stop_signal_repeats_request(g_stop_sender, sender, static_cast<long long>(::getppid())))
            return;
    }
    ssize_t w = ::write(2, g_stop_head, std::strlen(g_stop_head));
    const char* message = stop_message();
    w = ::write(2, message, std::strlen(message));
    (void)w;
    interrupt_note_die(sig);   // by the signal itself: a script running retro-train stops too
}

}  // namespace

[[noreturn]] void train_stop_now(int sig) {
    g_stop_after_step = 0;
    on_stop_signal_info(sig, nullptr, nullptr);
    interrupt_note_die(sig);   // (on_stop_signal_info ends there already)
}

void train_stop_set_resume_step(const std::string& out, std::int64_t step) {
    set_stop_message("continue with the same command%s: %s holds a complete checkpoint at step %lld\n",
                     g_started_with_force ? ", --resume in place of --force" : " and --resume", terminal_text(out, true).c_str(),
                     static_cast<long long>(step));
}

void train_stop_set_finished(const std::string& out) {
    set_stop_message("the run ended with the step under way: %s is complete (model.safetensors, manifest.json), nothing "
                     "to resume\n", terminal_text(out, true).c_str());
}

void train_stop_install(bool launcher, bool force) {
    g_started_with_force = force;
    if (force)
        set_stop_message("%s", "before the first checkpoint: run the same command, --resume in place of --force (it starts at "
                               "step 0)\n");
    if (launcher) g_stop_head = "retro-train: stopped by the launcher (a rank failed, or the job was cancelled); ";
    interrupt_handlers_install(on_stop_signal_info);
    // a full disk's error line says what the note would (tool_main)
    interrupt_note_source([] { return std::string("retro-train: interrupted; ") + stop_message(); });
}

void train_stop_after_step(bool on) { g_stop_after_step = on ? 1 : 0; }

int train_stop_requested() { return g_stop_signal.load(std::memory_order_acquire); }

bool stop_signal_repeats_request(const StopSignalSender& first, const StopSignalSender& again, long long parent_pid) {
    constexpr long long kRepeatWindowNs = 250000000LL;   // timeout's two kill(2) calls come microseconds apart; a
    // person's second `kill` from one shell comes later (a helper's, 0.5 s after the first, was taken for a repeat at 1 s)
    if (again.signal != first.signal || again.code != SI_USER || again.pid == 0 || again.at_ns < first.at_ns ||
        again.at_ns - first.at_ns >= kRepeatWindowNs)
        return false;
    // the first's own sender again, or the parent passing on a signal it got too (Ctrl-C on `timeout 3h retro-train`
    // reaches both from the terminal, and timeout sends it on; `kill %1` reaches both from the shell)
    return (first.code == SI_USER && again.pid == first.pid) || again.pid == parent_pid;
}

}  // namespace retro
