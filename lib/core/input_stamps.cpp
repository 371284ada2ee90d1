// Implementation of input_stamps.h.
#include "core/input_stamps.h"

#include <sys/stat.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "core/error.h"
#include "core/output_folder.h"

namespace fs = std::filesystem;

namespace retro {
namespace {

struct Stamp {
    dev_t dev = 0;
    ino_t ino = 0;
    std::int64_t size = 0;
    std::int64_t mtime_ns = 0;
};

Stamp stamp_of(const struct stat& st) {
    return {st.st_dev, st.st_ino, static_cast<std::int64_t>(st.st_size),
            static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
}

std::atomic<bool> g_on{false};
std::mutex g_mutex;
std::map<std::string, Stamp> g_stamps;   // by the path as the run named it

}  // namespace

void input_stamps_enable(bool on) {
    g_on = on;
    if (!on) {
        std::lock_guard<std::mutex> lock(g_mutex);
        g_stamps.clear();
    }
}

void input_stamp_opened(const std::string& path, const struct stat& st) {
    if (!g_on || path.empty() || !S_ISREG(st.st_mode)) return;
    {
        std::lock_guard<std::mutex> lock(g_mutex);
        if (g_stamps.count(path)) return;
    }
    if (output_folder_holds(path)) return;   // this run's own file (an output, a part it reads back)
    std::lock_guard<std::mutex> lock(g_mutex);
    g_stamps.emplace(path, stamp_of(st));
}

void input_stamp_file(const std::string& path, std::FILE* f) {
    struct stat st {};
    if (g_on && ::fstat(::fileno(f), &st) == 0) input_stamp_opened(path, st);
}

bool input_read_whole(const std::string& path, std::string& bytes) {
    // ("e": O_CLOEXEC, so that a child another thread starts meanwhile does not inherit it)
    const std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rbe"), &std::fclose);
    if (!f) return false;
    struct stat st {};
    if (::fstat(::fileno(f.get()), &st) == 0) {
        input_stamp_opened(path, st);
        if (S_ISREG(st.st_mode)) bytes.reserve(static_cast<std::size_t>(st.st_size));
    }
    bytes.clear();
    std::vector<char> buf(std::size_t(1) << 16);
    std::size_t n = 0;
    errno = 0;
    while ((n = std::fread(buf.data(), 1, buf.size(), f.get())) > 0) bytes.append(buf.data(), n);
    const int err = errno;
    if (std::ferror(f.get()))
        user_error_in(path, std::string("cannot be read: ") + std::strerror(err), "check the file and the disk");
    return true;
}

void input_stamp(const std::string& path) {
    if (!g_on) return;
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0) input_stamp_opened(path, st);
}

namespace {
// Whether `path` is one of `roots` or lies under one (all resolved).
bool lies_under(const fs::path& path, const std::vector<fs::path>& roots) {
    for (const fs::path& root : roots)
        if (path_inside(path, root)) return true;
    return false;
}
}  // namespace

void input_stamps_check(const std::vector<std::string>& inputs) {
    std::vector<std::pair<std::string, Stamp>> stamps;
    {
        std::lock_guard<std::mutex> lock(g_mutex);
        if (g_stamps.empty()) return;
        stamps.assign(g_stamps.begin(), g_stamps.end());
    }
    std::vector<fs::path> roots;
    for (const std::string& in : inputs)
        if (!in.empty()) roots.push_back(path_resolved(in));
    for (const auto& [path, was] : stamps) {
        struct stat st {};
        // (a file of a folder this run writes, stamped before it took the folder's lock: its own to rewrite)
        if (!lies_under(path_resolved(path), roots) || output_folder_holds(path)) continue;
        const char* fix = "run this command again with --force once the new file is complete";
        if (::stat(path.c_str(), &st) != 0)   // (retro-train then recorded no --db at all: its manifest was gone)
            user_error_in(path, "was removed while this run read it (moved, or being made again): what the run made would "
                                "record an input that is not there",
                          "restore it, or run this command again with --force once it is made again");
        const Stamp now = stamp_of(st);
        if (now.dev != was.dev || now.ino != was.ino)
            user_error_in(path, "was replaced while this run read it (made again, or copied over): what the run made comes "
                                "from the file before, so it is not recorded as made from this one",
                          fix);
        if (now.size != was.size || now.mtime_ns != was.mtime_ns)
            user_error_in(path, "was rewritten while this run read it (its size or modification time moved): what the run "
                                "made may mix the two, so it is not recorded as made from this file",
                          fix);
    }
}

}  // namespace retro
