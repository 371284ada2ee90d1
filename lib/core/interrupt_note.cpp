// Implementation of interrupt_note.h.
#include "core/interrupt_note.h"

#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/output_folder.h"
#include "core/progress.h"
#include "core/terminal_text.h"

namespace retro {
namespace {

// Two buffers: a line installed while the handler is live (retro-tokenizer train changes its line once tok.model is
// written) goes into the one the handler does not read, then becomes the one it reads (a signal during the copy, on any
// thread, printed a mix of the two lines: a review, session 55).
char g_notes[2][768];
std::atomic<int> g_note_at{0};   // which of g_notes the handler writes
static_assert(std::atomic<int>::is_always_lock_free, "read in a signal handler");
bool g_installed = false;   // interrupt_handlers_install ran: interrupt_note_clear undoes only RetroKit's own handlers
volatile std::sig_atomic_t g_note_fd = 2;   // interrupt_note_fd
std::string (*g_note_source)() = nullptr;   // interrupt_note_source: a tool's own note, for interrupt_note_advice

char g_empty_dir[4096] = "";   // interrupt_note_remove_empty: a folder this run made, removed where still empty
volatile std::sig_atomic_t g_empty_dir_set = 0;   // set after g_empty_dir is whole (the handler never reads a half copy)
volatile std::sig_atomic_t g_empty_dir_above = 0;   // how many folders above it the run made too

// g_empty_dir, then each folder above it the run made, innermost first, until one is not empty (rmdir fails, leaving
// it). Async-signal-safe: rmdir, and the path cut in a copy on the stack.
void remove_empty_folders() {
    char path[sizeof g_empty_dir];
    std::memcpy(path, g_empty_dir, sizeof path);
    for (int up = 0;; ++up) {
        if (::rmdir(path) != 0 || up == g_empty_dir_above) return;
        char* slash = std::strrchr(path, '/');
        if (!slash || slash == path) return;
        *slash = '\0';
    }
}

extern "C" void on_interrupt_note(int sig) {
    if (g_empty_dir_set) remove_empty_folders();
    const char* note = g_notes[g_note_at.load(std::memory_order_acquire) & 1];
    ssize_t w = ::write(g_note_fd, note, std::strlen(note));
    (void)w;
    interrupt_note_die(sig);
}

}  // namespace

void interrupt_note_die(int sig) {
    // the default action, so that the parent sees a death by the signal (bash stops a script on a child's SIGINT,
    // not on an exit status of 130); signal() and raise() are async-signal-safe
    output_folder_locks_remove();   // unlink only: the locks themselves go with the process
    std::signal(sig, SIG_DFL);
    std::raise(sig);   // pending: the handler runs with its signal blocked
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, sig);
    ::sigprocmask(SIG_UNBLOCK, &set, nullptr);   // delivered here, and the process ends
    ::_exit(128 + sig);   // (not reached)
}

namespace {
// SIGINT's and SIGTERM's action, but where inherited as ignored (a background job of a script): those stay ignored
void set_unless_ignored(void (*handler)(int)) {
    for (const int sig : {SIGINT, SIGTERM}) {
        struct sigaction old {};
        if (::sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) continue;
        std::signal(sig, handler);
    }
}
}  // namespace

void interrupt_handlers_install(void (*handler)(int)) {
    g_installed = true;
    set_unless_ignored(handler);
}

void interrupt_handlers_install(void (*handler)(int, siginfo_t*, void*)) {
    g_installed = true;
    for (const int sig : {SIGINT, SIGTERM}) {
        struct sigaction old {};
        if (::sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) continue;
        struct sigaction act {};
        act.sa_sigaction = handler;
        act.sa_flags = SA_SIGINFO | SA_RESTART;   // (std::signal's handlers restart too)
        sigemptyset(&act.sa_mask);
        sigaddset(&act.sa_mask, SIGINT);   // one handler at a time on a thread: it reads what the first one wrote
        sigaddset(&act.sa_mask, SIGTERM);
        ::sigaction(sig, &act, nullptr);
    }
}

void interrupt_note_fd(int fd) { g_note_fd = fd; }

void interrupt_note_remove_empty(const std::string& dir, const std::string& outermost) {
    g_empty_dir_set = 0;
    if (dir.size() >= sizeof g_empty_dir) return;
    std::memcpy(g_empty_dir, dir.c_str(), dir.size() + 1);
    // the folders above `dir` up to `outermost`: its separators past outermost's length (a trailing one cut off first)
    std::size_t end = dir.size();
    while (end > 1 && dir[end - 1] == '/') g_empty_dir[--end] = '\0';
    int above = 0;
    if (!outermost.empty() && outermost.size() < end && dir.compare(0, outermost.size(), outermost) == 0 &&
        dir[outermost.size()] == '/')
        for (std::size_t i = outermost.size(); i < end; ++i) above += dir[i] == '/' && (i + 1 == end || dir[i + 1] != '/');
    g_empty_dir_above = above;
    std::atomic_signal_fence(std::memory_order_seq_cst);
    g_empty_dir_set = 1;
}

void interrupt_note_clear() {
    g_empty_dir_set = 0;
    if (!g_installed) return;   // (a library caller's or a test runner's handlers stay theirs)
    g_installed = false;
    set_unless_ignored(SIG_DFL);
}

void interrupt_note_install_line(const std::string& line) {
    g_note_source = nullptr;   // (this line is the note now)
    if (const char* env = std::getenv("RETRO_INTERRUPT_NOTE"); env && std::string(env) == "off")
        return;   // run by another tool (retro-bench chunk) whose user did not give this command: its advice misleads
    // a newline first ends a progress bar drawn in place; a log file or pipe gets no empty line
    const int next = 1 - (g_note_at.load(std::memory_order_relaxed) & 1);
    std::snprintf(g_notes[next], sizeof g_notes[next], "%s%s\n", progress_redraws() ? "\n" : "", line.c_str());
    g_note_at.store(next, std::memory_order_release);   // (the handler may run on another thread: its acquire load pairs)
    interrupt_handlers_install(on_interrupt_note);
}

void interrupt_note_source(std::string (*line)()) { g_note_source = line; }

std::string interrupt_note_advice() {
    if (!g_installed) return "";
    std::string line = g_note_source ? g_note_source() : std::string(g_notes[g_note_at.load(std::memory_order_acquire) & 1]);
    // after "interrupted[ ...]; ": what the run keeps and what to run
    const std::size_t word = line.find("interrupted");
    const std::size_t at = word == std::string::npos ? word : line.find("; ", word);
    if (at == std::string::npos) return "";
    line = line.substr(at + 2);
    while (!line.empty() && line.back() == '\n') line.pop_back();
    return line;
}

std::string merge_interrupt_note(const std::string& tool, const std::string& out) {
    // (--force alone was named, which a script that passes --resume cannot add: the two contradict each other)
    return tool + ": interrupted; " + terminal_text(out, true) +
           " is incomplete: run the same merge again with --resume (it makes it again) or --force";
}

void interrupt_note_install(const std::string& tool, const std::string& out, const std::string& how) {
    const std::string shown = terminal_text(out, true);
    interrupt_note_install_line(how.empty() ? tool + ": interrupted; " + shown + " is incomplete: run the same command with --force "
                                                  "(it removes only " + tool + "'s files)"
                                            : tool + ": interrupted; " + shown + " keeps its finished parts: " + how);
}

}  // namespace retro
