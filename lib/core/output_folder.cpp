// Implementation of output_folder.h.
#include "core/output_folder.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <utility>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/fingerprint.h"
#include "core/log.h"
#include "core/manifest.h"

namespace fs = std::filesystem;

namespace retro {
namespace {

// Folders whose lock this process holds (or took unguarded, without a usable lock folder), by resolved path.
std::mutex g_locks_mutex;
std::map<std::string, int> g_locks;   // -> the lock file's descriptor (-1: unguarded), kept open until exit

bool holds_lock(const std::string& out) {
    std::lock_guard<std::mutex> lock(g_locks_mutex);
    return g_locks.count(path_resolved(out).string()) != 0;
}

// The "tool" field of dir/manifest.json, or "" when there is none or it cannot be read (then the tool's own
// checks, which read the manifest, speak).
std::string manifest_tool(const fs::path& dir) {
    std::ifstream f(dir / "manifest.json");
    if (!f) return "";
    nlohmann::json j = nlohmann::json::parse(f, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("tool") || !j["tool"].is_string()) return "";
    return j["tool"].get<std::string>();
}

}  // namespace

fs::path path_resolved(const std::string& p) {
    if (p.empty()) return {};
    std::error_code ec;
    fs::path r = fs::weakly_canonical(fs::absolute(p, ec), ec);
    if (ec) r = fs::absolute(p).lexically_normal();
    // a folder that does not exist yet keeps a trailing separator ("run/"): without it "run" and "run/" are one folder
    if (r.has_relative_path() && r.filename().empty()) r = r.parent_path();
    return r;
}

bool path_inside(const fs::path& inner, const fs::path& outer) {
    auto o = outer.begin(), i = inner.begin();
    for (; o != outer.end(); ++o, ++i) {
        if (o->empty()) continue;   // a trailing separator
        if (i == inner.end() || *i != *o) return false;
    }
    return true;
}

NewOutputFolder::NewOutputFolder(std::string out) : out_(std::move(out)), exceptions_(std::uncaught_exceptions()) {
    std::error_code ec;
    existed_ = out_.empty() || fs::exists(out_, ec);
}

NewOutputFolder::~NewOutputFolder() {
    if (existed_ || keep_ || std::uncaught_exceptions() <= exceptions_) return;
    // refused before it held the folder's lock (by the lock itself: another run made the folder meanwhile and is
    // writing it), the folder is not this run's to remove
    if (!holds_lock(out_)) return;
    std::error_code ec;
    if (!fs::exists(fs::path(out_) / "manifest.json", ec)) fs::remove_all(out_, ec);
}

void output_folder_lock(const std::string& out, const std::string& tool) {
    const std::string key = path_resolved(out).string();
    std::lock_guard<std::mutex> lock(g_locks_mutex);
    auto& held = g_locks;
    if (held.count(key)) return;   // this process holds it already (a library caller running a stage again)
    // /tmp itself, not $TMPDIR: a scheduler's per-job TMPDIR would give two jobs on one node two lock folders
    std::error_code ec;
    const fs::path base = fs::is_directory("/tmp", ec) ? fs::path("/tmp") : fs::temp_directory_path(ec);
    const fs::path dir = base / ("retrokit-locks-" + std::to_string(::getuid()));
    fs::create_directories(dir, ec);
    const std::string path = (dir / (fingerprint_bytes(key.data(), key.size()) + ".lock")).string();
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {   // no lock without a lock folder: the run goes on, unguarded against a second one
        log_warn(cat("cannot open the lock ", path, " of ", out, ": ", std::strerror(errno), "; going on without it"));
        held[key] = -1;
        return;
    }
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
        const int err = errno;
        char buf[512] = {0};
        const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
        ::close(fd);
        if (err != EWOULDBLOCK) {
            log_warn(cat("cannot take the lock ", path, " of ", out, ": ", std::strerror(err), "; going on without it"));
            held[key] = -1;
            return;
        }
        std::string who = n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string("another process");
        while (!who.empty() && (who.back() == '\n' || who.back() == ' ')) who.pop_back();
        user_error_in(out, "another run is writing into it (" + who + ")",
                      "wait for it to end, or stop it first: two runs in one folder mix their files");
    }
    const std::string me = cat(tool, ", pid ", ::getpid(), ", since ", utc_timestamp());
    if (::ftruncate(fd, 0) == 0 && ::pwrite(fd, me.data(), me.size(), 0) < 0) {
        // the lock holds without the note; the message of a refused second run just names no process
    }
    held[key] = fd;
}

void output_folder_guard(const std::string& out, const std::string& tool, const std::vector<OutputInput>& inputs,
                         bool clears, bool lock) {
    if (out.empty()) user_error_in("--out", "is empty", "name the output folder");
    const fs::path o = path_resolved(out);
    std::error_code ec;
    for (const OutputInput& in : inputs) {
        if (in.path.empty()) continue;
        const fs::path i = path_resolved(in.path);
        if (fs::is_directory(i, ec) && i == o)
            user_error_in(out, "is also an input of this run (" + in.option + " " + in.path + ")", "choose another --out");
        if (clears && path_inside(i, o))
            user_error_in(out, "holds an input of this run (" + in.option + " " + in.path + "), which --force would delete",
                          "choose another --out");
    }
    if (fs::is_directory(o, ec)) {
        const std::string owner = manifest_tool(o);
        if (!owner.empty() && owner != tool)
            user_error_in(out, "holds " + owner + "'s output (manifest.json), not " + tool + "'s",
                          "choose another --out: --force replaces only a folder " + tool + " made");
    }
    if (lock) output_folder_lock(out, tool);   // last: before the caller clears or writes anything
}

}  // namespace retro
