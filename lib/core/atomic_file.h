// Atomic file writes: bytes go to NAME.tmp, then fsync, rename over NAME, fsync the folder.
// A writer killed at any point leaves the old complete NAME (or none) plus at most a NAME.tmp,
// never a truncated NAME (ARCHITECTURE.md "Files on disk").
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace retro {

// Throws UserError naming `path` when something other than a regular file has that name (a folder, a symbolic link,
// a pipe, a device): an atomic write's rename would replace it. A missing path or a regular file passes.
void refuse_non_regular_target(const std::string& path);

// Refuses a `path` that is not a regular file (refuse_non_regular_target) before writing.
class AtomicFile {
public:
    explicit AtomicFile(const std::string& path);   // opens path + ".tmp" for writing
    ~AtomicFile();                                  // not committed: removes the .tmp
    AtomicFile(const AtomicFile&) = delete;
    AtomicFile& operator=(const AtomicFile&) = delete;

    void write(const void* data, std::size_t n);
    void write(const std::string& s) { write(s.data(), s.size()); }
    void pwrite_at(std::uint64_t offset, const void* data, std::size_t n);   // patch earlier bytes
    std::uint64_t bytes_written() const { return written_; }
    // flush, fsync, rename, fsync folder; `after_rename` runs as soon as the file has its name (before the folder's
    // sync, which can take long: Manifest::write takes back its interrupt note there)
    void commit(void (*after_rename)() = nullptr);

    const std::string& path() const { return path_; }

private:
    std::string path_, tmp_;
    int fd_ = -1;
    std::uint64_t written_ = 0;
    bool committed_ = false;
};

void write_file_atomic(const std::string& path, const std::string& bytes);
// A copy of the file `from` written to `path` as write_file_atomic writes: a read error names `from`, a write error
// (a full disk) names path's .tmp (std::filesystem::copy_file's short sendfile on a full disk was "FROM: Input/output
// error", blaming the input: a helper's disk-full campaign, session 56).
void copy_file_atomic(const std::string& from, const std::string& path);
// Appends `bytes` to `path` (created if missing) under O_APPEND (write_all: retried short writes); UserError naming
// the file when it cannot be opened or written (a full disk), so a log such as metrics.jsonl never silently loses
// lines.
void append_to_file(const std::string& path, const std::string& bytes);
// Writes all n bytes to fd (retrying short writes and EINTR); UserError naming `path` on failure.
void write_all(int fd, const void* data, std::size_t n, const std::string& path);
// For files a library wrote itself to `tmp` (e.g. faiss::write_index): fsync, rename to `path`,
// fsync the folder.
void commit_file_atomic(const std::string& tmp, const std::string& path);
void fsync_parent_dir(const std::string& path);

}  // namespace retro
