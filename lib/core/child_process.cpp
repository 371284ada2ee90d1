// Implementation of child_process.h.
#include "core/child_process.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>

#include "core/error.h"
#include "core/interrupt_note.h"
#include "core/log.h"

extern char** environ;

namespace retro {
namespace {

// The signals passed to the child's group: those that end a process (a terminal's Ctrl-C, Ctrl-\ and hangup, a
// scheduler's or timeout's SIGTERM), and the job-control pair (Ctrl-Z stops the child too, fg continues it).
constexpr int kEnding[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
constexpr int kJobControl[] = {SIGTSTP, SIGCONT};

volatile std::sig_atomic_t g_child_group = 0;   // the running child's process group, 0: none (yet)
volatile std::sig_atomic_t g_passed_signal = 0;   // the ending signal that came while it ran
struct sigaction g_old[NSIG];

extern "C" void pass_to_child(int sig) {
    const int saved = errno;
    const auto group = static_cast<pid_t>(g_child_group);
    if (sig == SIGTSTP) {   // stop the child, then this process as SIGTSTP's default would
        if (group > 0) ::kill(-group, SIGTSTP);
        ::kill(::getpid(), SIGSTOP);
    } else if (sig == SIGCONT) {
        if (group > 0) ::kill(-group, SIGCONT);
    } else {
        if (group > 0) ::kill(-group, sig);
        g_passed_signal = sig;   // (before the group is known: passed on by the constructor)
    }
    errno = saved;
}

// The handlers for the child's life; an ending signal inherited as ignored (a background job's) stays ignored.
void install_passing() {
    struct sigaction pass {};
    pass.sa_handler = pass_to_child;
    sigemptyset(&pass.sa_mask);
    pass.sa_flags = SA_RESTART;
    for (const int sig : kEnding) {
        ::sigaction(sig, nullptr, &g_old[sig]);
        if (g_old[sig].sa_handler != SIG_IGN) ::sigaction(sig, &pass, nullptr);
    }
    for (const int sig : kJobControl) {
        ::sigaction(sig, nullptr, &g_old[sig]);
        if (g_old[sig].sa_handler == SIG_DFL) ::sigaction(sig, &pass, nullptr);   // (a shell's own handling kept)
    }
}

void restore_handlers() {
    for (const int sig : kEnding) ::sigaction(sig, &g_old[sig], nullptr);
    for (const int sig : kJobControl) ::sigaction(sig, &g_old[sig], nullptr);
}

}  // namespace

ChildProcess::ChildProcess(const std::vector<std::string>& argv_in, const std::vector<std::string>& env_in, bool capture_stdout) {
    if (argv_in.empty()) throw InternalError("ChildProcess: no program");
    if (g_child_group != 0) throw InternalError("ChildProcess: one child at a time");
    std::vector<char*> argv;
    for (const auto& a : argv_in) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    std::vector<char*> envp;
    for (const auto& e : env_in) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);
    int pipe_fds[2] = {-1, -1};
    if (capture_stdout && ::pipe2(pipe_fds, O_CLOEXEC) != 0) user_error_in(argv_in[0], "cannot start: no pipe for its output");

    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attr;
    posix_spawn_file_actions_init(&actions);
    posix_spawnattr_init(&attr);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    if (capture_stdout) posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 1);
    // its own group (signalled as one: sh, python, mpirun and its ranks), the default actions and no blocked signals
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
    posix_spawnattr_setpgroup(&attr, 0);
    sigset_t defaults, none;
    sigemptyset(&defaults);
    for (const int sig : kEnding) sigaddset(&defaults, sig);
    for (const int sig : kJobControl) sigaddset(&defaults, sig);
    sigaddset(&defaults, SIGPIPE);
    sigemptyset(&none);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    posix_spawnattr_setsigmask(&attr, &none);

    // the handlers first (a signal any thread takes now is recorded), then the child, then its group is known and a
    // signal recorded meanwhile is passed on
    g_passed_signal = 0;
    install_passing();
    const int rc = ::posix_spawn(&pid_, argv[0], &actions, &attr, argv.data(), env_in.empty() ? environ : envp.data());
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    if (capture_stdout) ::close(pipe_fds[1]);
    if (rc != 0) {
        restore_handlers();
        if (capture_stdout) ::close(pipe_fds[0]);
        pid_ = -1;
        if (const int sig = g_passed_signal; sig != 0) interrupt_note_die(sig);
        user_error_in(argv_in[0], std::string("cannot start: ") + std::strerror(rc));
    }
    out_fd_ = capture_stdout ? pipe_fds[0] : -1;
    g_child_group = pid_;
    if (const int sig = g_passed_signal; sig != 0) ::kill(-pid_, sig);
}

ChildProcess::~ChildProcess() {
    if (out_fd_ >= 0) ::close(out_fd_);
    if (pid_ > 0 && !done_) {   // (an exception while it ran: nothing waits for its result, and it may ignore SIGTERM)
        ::kill(-pid_, SIGKILL);
        int status = 0;
        while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
        }
        g_child_group = 0;
        restore_handlers();
    }
}

std::string ChildProcess::read_all_stdout() {
    std::string out;
    if (out_fd_ < 0) return out;
    char buf[4096];
    for (;;) {
        const ssize_t n = ::read(out_fd_, buf, sizeof buf);
        if (n > 0) out.append(buf, static_cast<std::size_t>(n));
        else if (n < 0 && errno == EINTR) continue;
        else break;
    }
    ::close(out_fd_);
    out_fd_ = -1;
    return out;
}

bool ChildProcess::poll(int& status, struct rusage* ru, bool block) {
    if (done_) throw InternalError("ChildProcess: waited for twice");
    struct rusage own {};
    pid_t got;
    do {
        got = ::wait4(pid_, &status, block ? 0 : WNOHANG, ru ? ru : &own);
    } while (got < 0 && errno == EINTR);
    if (got == 0) return false;
    if (got < 0) {   // (SIGCHLD inherited as ignored reaps it first: ECHILD) a status that is not a success
        log_warn(cat("waiting for a child process (pid ", pid_, ") failed: ", std::strerror(errno), "; counted as failed"));
        status = 127 << 8;
    }
    done_ = true;
    g_child_group = 0;
    restore_handlers();
    if (const int sig = g_passed_signal; sig != 0) {   // the child is gone: this process follows
        std::fflush(stdout);   // (the table rows printed so far)
        interrupt_note_die(sig);
    }
    return true;
}

int ChildProcess::wait(struct rusage* ru) {
    int status = 0;
    poll(status, ru, true);
    return status;
}

int ChildProcess::shell(const std::string& command) {
    ChildProcess child({"/bin/sh", "-c", command});
    return child.wait();
}

}  // namespace retro
