// Implementation of scratch_dir.h.
#include "core/scratch_dir.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <mutex>

#include "core/error.h"
#include "core/log.h"

namespace retro {

namespace fs = std::filesystem;

namespace {

// The folders to remove on a stopping signal, as fixed buffers (the handler may not allocate).
constexpr int kMaxScratch = 8;
char g_scratch[kMaxScratch][512];
volatile sig_atomic_t g_scratch_used[kMaxScratch];
std::mutex g_scratch_mutex;

extern "C" void remove_scratch_and_stop(int sig) {
    for (int i = 0; i < kMaxScratch; i++) {
        if (!g_scratch_used[i]) continue;
        const pid_t child = ::fork();   // rm -rf in a child: no allocation in the handler
        if (child == 0) {
            ::execl("/bin/rm", "rm", "-rf", "--", g_scratch[i], static_cast<char*>(nullptr));
            ::_exit(127);
        }
        if (child > 0) {
            int status = 0;
            while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
            }
        }
    }
    ::signal(sig, SIG_DFL);   // then stop as the signal would have (exit status 128 + sig for the shell)
    ::raise(sig);
}

// Where no handler of the tool's own is set (retro-train's and retro-generate's print where to resume).
void install_if_default(int sig) {
    struct sigaction now {};
    if (::sigaction(sig, nullptr, &now) != 0 || now.sa_handler != SIG_DFL || (now.sa_flags & SA_SIGINFO)) return;
    struct sigaction act {};
    act.sa_handler = remove_scratch_and_stop;
    sigemptyset(&act.sa_mask);
    ::sigaction(sig, &act, nullptr);
}

int register_scratch(const std::string& path) {
    std::lock_guard<std::mutex> lock(g_scratch_mutex);
    if (path.size() >= sizeof g_scratch[0]) return -1;
    for (int i = 0; i < kMaxScratch; i++)
        if (!g_scratch_used[i]) {
            std::memcpy(g_scratch[i], path.c_str(), path.size() + 1);
            g_scratch_used[i] = 1;
            install_if_default(SIGINT);
            install_if_default(SIGTERM);
            return i;
        }
    return -1;
}

void unregister_scratch(const std::string& path) {
    std::lock_guard<std::mutex> lock(g_scratch_mutex);
    for (int i = 0; i < kMaxScratch; i++)
        if (g_scratch_used[i] && path == g_scratch[i]) g_scratch_used[i] = 0;
}

// Removes <prefix>-<pid> folders of `base` whose process is gone (killed before it could remove its own).
void sweep_stale(const fs::path& base, const std::string& prefix) {
    std::error_code ec;
    for (fs::directory_iterator it(base, ec), end; !ec && it != end; it.increment(ec)) {
        const std::string name = it->path().filename().string();
        if (name.size() <= prefix.size() + 1 || name.compare(0, prefix.size() + 1, prefix + "-") != 0) continue;
        const std::string digits = name.substr(prefix.size() + 1);
        if (digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 9) continue;
        const pid_t pid = static_cast<pid_t>(std::stol(digits));
        if (pid == ::getpid() || ::kill(pid, 0) == 0 || errno != ESRCH) continue;   // alive, or not ours to judge
        std::error_code rm;
        if (::access(it->path().c_str(), W_OK) != 0) continue;   // another user's
        fs::remove_all(it->path(), rm);
        if (!rm) log_info("removed " + it->path().string() + " (left by a process that was killed)");
    }
}

}  // namespace

ScratchDir::ScratchDir(const std::string& prefix) {
    std::error_code ec;
    const fs::path base = fs::temp_directory_path(ec);
    if (ec) user_error_in("TMPDIR", "no temporary folder: " + ec.message());
    sweep_stale(base, prefix);
    path_ = (base / (prefix + "-" + std::to_string(::getpid()))).string();
    fs::create_directories(path_);
    register_scratch(path_);
}

ScratchDir::~ScratchDir() {
    unregister_scratch(path_);
    std::error_code ec;
    fs::remove_all(path_, ec);
}

}  // namespace retro
