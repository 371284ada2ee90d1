// A scratch folder of one process: TMPDIR/<prefix>-<pid>, made on construction and removed with everything in it on
// destruction — and when the process is stopped by Ctrl-C or SIGTERM (where no handler of the tool's own is set: the
// handler removes the registered folders, then the signal ends the process as it would have), and, for a process
// killed outright (SIGKILL, the OOM killer), by the next process making a folder of the same prefix: a
// <prefix>-<pid> whose process is gone is swept first. retro-bench's corpora and databases, retro-train eval's
// searched neighbours.
#pragma once
#include <string>

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
};

}  // namespace retro
