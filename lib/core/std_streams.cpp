// Implementation of std_streams.h.
#include "core/std_streams.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/error.h"

namespace retro {
namespace {
bool g_closed[3] = {false, false, false};
}  // namespace

// The closed streams as the process that filled them saw them, for itself after it runs again (the OpenBLAS kernel
// restart, core/blas_core.h, is an exec: its streams are /dev/null by then). Read and removed at once, so the tools
// a tool starts later do not take it as theirs.
constexpr const char* kClosedEnv = "RETRO_STD_STREAMS_CLOSED";

void std_streams_guard() {
    if (const char* env = std::getenv(kClosedEnv)) {
        for (const char* c = env; *c; ++c)
            if (*c >= '0' && *c <= '2') g_closed[*c - '0'] = true;
        ::unsetenv(kClosedEnv);
    }
    std::string closed;
    for (int fd = 0; fd < 3; ++fd) {
        if (::fcntl(fd, F_GETFD) != -1) continue;
        g_closed[fd] = true;
        closed += static_cast<char>('0' + fd);
        const int opened = ::open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
        if (opened >= 0 && opened != fd) {   // (a lower number was free: cannot happen in order, kept safe)
            ::dup2(opened, fd);
            ::close(opened);
        }
    }
    if (!closed.empty()) ::setenv(kClosedEnv, closed.c_str(), 1);   // (for this process run again; see above)
}

bool std_stream_was_closed(int fd) { return fd >= 0 && fd < 3 && g_closed[fd]; }

void std_output_required(const char* what) {
    if (std_stream_was_closed(STDOUT_FILENO))
        user_error_in("standard output", std::string("is closed: ") + what + " would go nowhere",
                      "redirect it to a file or a pipe");
}

void std_streams_env_clear() { ::unsetenv(kClosedEnv); }

std::string stdout_write_failed(int err) {
    struct stat st {};
    if (err == 0 && ::fstat(STDOUT_FILENO, &st) == 0 && S_ISFIFO(st.st_mode)) {
        // a pipe whose reader has gone polls as an error (Linux's pipe_poll: POLLERR without readers); not a
        // terminal's or a socket's POLLERR, whose write failed otherwise
        pollfd p{STDOUT_FILENO, POLLOUT, 0};
        if (::poll(&p, 1, 0) == 1 && (p.revents & POLLERR)) err = EPIPE;
    }
    return err ? std::string("write failed: ") + std::strerror(err) : std::string("write failed");
}

}  // namespace retro
