// Implementation of resumable_output.h with POSIX calls.
#include "data/resumable_output.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>
#include <algorithm>

#include "core/atomic_file.h"
#include "core/error.h"

namespace retro {
namespace {
bool file_exists(const std::string& p) {
    struct stat st;
    return ::stat(p.c_str(), &st) == 0;
}
}  // namespace

ResumableOutput::ResumableOutput(const std::string& path, bool resume, std::uint64_t resume_length,
                                 std::uint64_t hash_from, const std::string& resume_hash)
    : path_(path), tmp_(path + ".tmp"), hash_from_(hash_from) {
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
    // the kept bytes through the fingerprint: checked against the checkpoint's, and the state the appends continue
    std::vector<char> buf(std::size_t{1} << 20);
    for (std::uint64_t at = std::min(hash_from_, resume_length); at < resume_length;) {
        const std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(buf.size(), resume_length - at));
        const ssize_t got = ::pread(fd_, buf.data(), want, static_cast<off_t>(at));
        if (got <= 0) user_error_in(tmp_, std::string("cannot be read back: ") + (got < 0 ? std::strerror(errno) : "end of file"));
        hash_->update(buf.data(), static_cast<std::size_t>(got));
        at += static_cast<std::uint64_t>(got);
    }
    if (!resume_hash.empty() && hash_->hex() != resume_hash)
        user_error_in(tmp_, "has changed since the checkpoint (its kept bytes no longer give the fingerprint progress.json "
                            "records): the run cannot continue it",
                      "start again with --force");
}

ResumableOutput::~ResumableOutput() {
    if (fd_ >= 0) ::close(fd_);
}

void ResumableOutput::write(const void* data, std::size_t n) {
    write_all(fd_, data, n, tmp_);
    // (the part past hash_from: the placeholder header a fresh file starts with is left out, as commit patches it)
    const auto* bytes = static_cast<const char*>(data);
    if (size_ + n > hash_from_) {
        const std::uint64_t skip = size_ >= hash_from_ ? 0 : hash_from_ - size_;
        hash_->update(bytes + skip, n - static_cast<std::size_t>(skip));
    }
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
