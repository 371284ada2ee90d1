// Implementation of resumable_output.h with POSIX calls.
#include "data/resumable_output.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/atomic_file.h"
#include "core/error.h"

namespace retro {
namespace {
bool file_exists(const std::string& p) {
    struct stat st;
    return ::stat(p.c_str(), &st) == 0;
}
}  // namespace

ResumableOutput::ResumableOutput(const std::string& path, bool resume, std::uint64_t resume_length)
    : path_(path), tmp_(path + ".tmp") {
    if (!resume) {
        fd_ = ::open(tmp_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd_ < 0) user_error_in(tmp_, std::string("cannot create: ") + std::strerror(errno));
        return;
    }
    if (!file_exists(tmp_) && file_exists(path_) && ::rename(path_.c_str(), tmp_.c_str()) != 0)
        user_error_in(path_, std::string("cannot reopen for --resume: ") + std::strerror(errno));
    fd_ = ::open(tmp_.c_str(), O_RDWR | O_CLOEXEC);
    if (fd_ < 0)
        user_error_in(tmp_, std::string("cannot reopen for --resume: ") + std::strerror(errno),
                      "start again with --force");
    struct stat st;
    if (::fstat(fd_, &st) != 0 || static_cast<std::uint64_t>(st.st_size) < resume_length)
        user_error_in(tmp_, "is shorter than its checkpoint says (" + std::to_string(resume_length) + " bytes)",
                      "start again with --force");
    if (::ftruncate(fd_, static_cast<off_t>(resume_length)) != 0 ||
        ::lseek(fd_, static_cast<off_t>(resume_length), SEEK_SET) < 0)
        user_error_in(tmp_, std::string("cannot cut back to the checkpoint: ") + std::strerror(errno));
    size_ = resume_length;
}

ResumableOutput::~ResumableOutput() {
    if (fd_ >= 0) ::close(fd_);
}

void ResumableOutput::write(const void* data, std::size_t n) {
    write_all(fd_, data, n, tmp_);
    size_ += n;
}

void ResumableOutput::sync() {
    if (::fdatasync(fd_) != 0) user_error_in(tmp_, std::string("fsync failed: ") + std::strerror(errno));
}

void ResumableOutput::commit(const std::string& header) {
    RETRO_CHECK(fd_ >= 0, "commit called twice for ", path_);
    if (!header.empty() && ::pwrite(fd_, header.data(), header.size(), 0) != static_cast<ssize_t>(header.size()))
        user_error_in(tmp_, std::string("write failed: ") + std::strerror(errno));
    if (::fsync(fd_) != 0) user_error_in(tmp_, std::string("fsync failed: ") + std::strerror(errno));
    ::close(fd_);
    fd_ = -1;
    if (::rename(tmp_.c_str(), path_.c_str()) != 0)
        user_error_in(path_, std::string("cannot rename temporary file into place: ") + std::strerror(errno));
    fsync_parent_dir(path_);
}

}  // namespace retro
