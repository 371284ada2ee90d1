// Implementation of scratch_dir.h.
#include "core/scratch_dir.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

#include "core/error.h"
#include "core/log.h"

extern char** environ;

namespace retro {

namespace fs = std::filesystem;

namespace {

// Starts `sh -c 'cat >/dev/null; rm -rf -- "$1"' sh DIR` with its standard input the read end of a pipe whose write
// end only this process holds (O_CLOEXEC: no child tool inherits it), in a new session (POSIX_SPAWN_SETSID).
// Returns the write end and the watchdog's pid; -1 when it could not be started (the folder is then removed only on
// a normal end, said once).
int start_watchdog(const std::string& dir, pid_t& pid) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return -1;
    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attr;
    posix_spawn_file_actions_init(&actions);
    posix_spawnattr_init(&attr);
    posix_spawn_file_actions_adddup2(&actions, fds[0], 0);   // dup2 clears O_CLOEXEC on the copy
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
    sigset_t all, none;
    sigfillset(&all);
    sigemptyset(&none);
    posix_spawnattr_setsigdefault(&attr, &all);
    posix_spawnattr_setsigmask(&attr, &none);
    std::vector<std::string> args = {"sh", "-c", "cat >/dev/null; rm -rf -- \"$1\"", "sh", dir};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const int rc = ::posix_spawn(&pid, "/bin/sh", &actions, &attr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    ::close(fds[0]);
    if (rc != 0) {
        ::close(fds[1]);
        pid = -1;
        return -1;
    }
    return fds[1];
}

}  // namespace

ScratchDir::ScratchDir(const std::string& prefix) {
    std::error_code ec;
    const fs::path base = fs::temp_directory_path(ec);
    if (ec) user_error_in("TMPDIR", "no temporary folder: " + ec.message());
    std::string templ = (base / (prefix + "-" + std::to_string(::getpid()) + "-XXXXXX")).string();
    if (!::mkdtemp(templ.data()))
        user_error_in(base.string(), std::string("cannot make a scratch folder: ") + std::strerror(errno),
                      "set TMPDIR to a writable folder");
    path_ = templ;
    watchdog_pipe_ = start_watchdog(path_, watchdog_);
    if (watchdog_pipe_ < 0)
        log_warn(path_ + ": no watchdog could be started; a killed run leaves this folder behind");
}

ScratchDir::~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
    if (watchdog_pipe_ >= 0) ::close(watchdog_pipe_);   // the watchdog finds nothing left to remove and ends
    if (watchdog_ > 0) {
        int status = 0;
        while (::waitpid(watchdog_, &status, 0) < 0 && errno == EINTR) {
        }
    }
}

}  // namespace retro
