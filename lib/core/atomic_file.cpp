// Implementation of atomic_file.h.
#include "core/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "core/error.h"

namespace retro {

void refuse_non_regular_target(const std::string& path) {
    // the rename at the end replaces whatever has the name: a device node (/dev/full, as root), a FIFO, a symlink
    // (not its target) or a folder would be lost, and /dev/stdout is not a file one can rename onto
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0 || S_ISREG(st.st_mode)) return;
    const char* what = S_ISDIR(st.st_mode) ? "a folder" : S_ISLNK(st.st_mode) ? "a symbolic link" : S_ISFIFO(st.st_mode) ? "a pipe" : "a device or a socket";
    user_error_in(path, cat("is ", what, ", not a regular file: writing the output there would replace it"),
                  "give the path of a regular file (a new one, or one to replace)");
}

AtomicFile::AtomicFile(const std::string& path) : path_(path), tmp_(path + ".tmp") {
    refuse_non_regular_target(path_);
    fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) user_error_in(path_, std::string("cannot be written (its temporary ") + tmp_ + ": " + std::strerror(errno) + ")");
}

AtomicFile::~AtomicFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(tmp_.c_str());
}

void write_all(int fd, const void* data, std::size_t n, const std::string& path) {
    const char* p = static_cast<const char*>(data);
    while (n > 0) {
        ssize_t w = ::write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            user_error_in(path, std::string("write failed: ") + std::strerror(errno));
        }
        p += w;
        n -= static_cast<std::size_t>(w);
    }
}

void AtomicFile::write(const void* data, std::size_t n) {
    write_all(fd_, data, n, tmp_);
    written_ += n;
}

void AtomicFile::pwrite_at(std::uint64_t offset, const void* data, std::size_t n) {
    const char* p = static_cast<const char*>(data);
    while (n > 0) {
        ssize_t w = ::pwrite(fd_, p, n, static_cast<off_t>(offset));
        if (w < 0) {
            if (errno == EINTR) continue;
            user_error_in(tmp_, std::string("write failed: ") + std::strerror(errno));
        }
        p += w;
        n -= static_cast<std::size_t>(w);
        offset += static_cast<std::uint64_t>(w);
    }
}

void fsync_parent_dir(const std::string& path) {
    std::filesystem::path parent = std::filesystem::path(path).parent_path();
    const std::string dir = parent.empty() ? std::string(".") : parent.string();
    int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        ::fsync(dfd);
        ::close(dfd);
    }
}

void AtomicFile::commit(void (*after_rename)()) {
    RETRO_CHECK(!committed_, "commit called twice for ", path_);
    if (::fsync(fd_) != 0) user_error_in(tmp_, std::string("fsync failed: ") + std::strerror(errno));
    ::close(fd_);
    fd_ = -1;
    if (::rename(tmp_.c_str(), path_.c_str()) != 0)
        user_error_in(path_, std::string("cannot rename temporary file into place: ") + std::strerror(errno));
    committed_ = true;
    if (after_rename) after_rename();
    fsync_parent_dir(path_);
}

void commit_file_atomic(const std::string& tmp, const std::string& path) {
    refuse_non_regular_target(path);
    int fd = ::open(tmp.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) user_error_in(tmp, std::string("cannot open: ") + std::strerror(errno));
    int rc = ::fsync(fd);
    ::close(fd);
    if (rc != 0) user_error_in(tmp, std::string("fsync failed: ") + std::strerror(errno));
    if (::rename(tmp.c_str(), path.c_str()) != 0)
        user_error_in(path, std::string("cannot rename temporary file into place: ") + std::strerror(errno));
    fsync_parent_dir(path);
}

void write_file_atomic(const std::string& path, const std::string& bytes) {
    AtomicFile f(path);
    f.write(bytes);
    f.commit();
}

void copy_file_atomic(const std::string& from, const std::string& path) {
    const int in = ::open(from.c_str(), O_RDONLY | O_CLOEXEC);
    if (in < 0) user_error_in(from, std::string("cannot be read: ") + std::strerror(errno));
    try {
        AtomicFile out(path);
        std::vector<char> buf(std::size_t(1) << 20);
        for (;;) {
            const ssize_t n = ::read(in, buf.data(), buf.size());
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) user_error_in(from, std::string("read failed: ") + std::strerror(errno));
            if (n == 0) break;
            out.write(buf.data(), static_cast<std::size_t>(n));
        }
        out.commit();
    } catch (...) {
        ::close(in);
        throw;
    }
    ::close(in);
}

void append_to_file(const std::string& path, const std::string& bytes) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) user_error_in(path, std::string("cannot open for appending: ") + std::strerror(errno));
    try {
        write_all(fd, bytes.data(), bytes.size(), path);
    } catch (...) {
        ::close(fd);
        throw;
    }
    if (::close(fd) != 0) user_error_in(path, std::string("write failed: ") + std::strerror(errno));
}

}  // namespace retro
