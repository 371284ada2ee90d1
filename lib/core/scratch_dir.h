// A scratch folder of one process: TMPDIR/<prefix>-<pid>-XXXXXX (mkdtemp), removed with everything in it on
// destruction — and when the process ends any other way (Ctrl-C, SIGTERM, SIGKILL, the OOM killer, a crash): a
// watchdog started with the folder (`sh`, in a session of its own so the terminal's Ctrl-C does not reach it) waits
// for the end of a pipe only this process holds, then removes the folder. No signal handler is involved, so a tool's
// own handlers (retro-train's, retro-generate's) are left alone. retro-bench's corpora and peer files,
// retro-train eval --index's searched neighbours.
#pragma once
#include <string>
#include <sys/types.h>

namespace retro {

class ScratchDir {
public:
    explicit ScratchDir(const std::string& prefix);
    ~ScratchDir();
    ScratchDir(const ScratchDir&) = delete;
    ScratchDir& operator=(const ScratchDir&) = delete;
    const std::string& path() const { return path_; }

private:
    std::string path_;
    int watchdog_pipe_ = -1;   // the write end: its close (by this process or by its end) tells the watchdog
    pid_t watchdog_ = -1;
};

}  // namespace retro
