// Implementation of output_folder.h.
#include "core/output_folder.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <sys/stat.h>

#include <cerrno>
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <utility>
#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/launcher_env.h"
#include "core/fingerprint.h"
#include "core/interrupt_note.h"
#include "core/log.h"
#include "core/manifest.h"

namespace fs = std::filesystem;

namespace retro {
namespace {

// Folders whose lock this process holds (or took unguarded, without a usable lock folder), by resolved path.
std::mutex g_locks_mutex;
std::map<std::string, int> g_locks;   // -> the lock file's descriptor (-1: unguarded), kept open until exit

// The lock files this process holds, removed as it ends (kept out of /tmp/retrokit-locks-UID, which grew by one file
// per folder ever written: 23,000 after a few weeks of tests, the kill soak of session 68). Fixed arrays, no
// allocation: the removal runs at exit and from interrupt_note_die, in a signal handler. A lock file is removed while
// its lock is held; a run that opened it before and takes its lock after sees it gone (output_folder_lock compares
// the inode it locked with the path's) and takes the lock of a new file.
constexpr int kRemovedLocksMax = 1024;   // (a test process locks hundreds; 160 KB of zeros until used)
char g_lock_files[kRemovedLocksMax][160];
int g_lock_fds[kRemovedLocksMax];   // each file's descriptor: removed only while the path still names that file
volatile std::sig_atomic_t g_lock_file_count = 0;
pid_t g_lock_files_pid = 0;   // the process that took them (a forked child's exit removes none)

void remember_lock_file(const std::string& path, int fd) {
    const int n = g_lock_file_count;
    if (n >= kRemovedLocksMax || path.size() >= sizeof g_lock_files[0]) return;   // left in place, as before
    std::memcpy(g_lock_files[n], path.c_str(), path.size() + 1);
    g_lock_fds[n] = fd;
    if (n == 0) {
        g_lock_files_pid = ::getpid();
        std::atexit(output_folder_locks_remove);
    }
    std::atomic_signal_fence(std::memory_order_release);   // (the entry whole before a handler can count it)
    g_lock_file_count = n + 1;
}

// Whether descriptor `fd` and `path` name one file (fstat and stat: async-signal-safe).
bool same_file(int fd, const char* path) {
    struct stat held {}, named {};
    return ::fstat(fd, &held) == 0 && ::stat(path, &named) == 0 && held.st_dev == named.st_dev && held.st_ino == named.st_ino;
}

// Removes the lock files of the lock folder `dir` that no process holds and that are over an hour old: those of runs
// killed by SIGKILL, and the thousands left before runs removed their own (session 69); once a process (about 10 µs a
// file). Each is locked before it is removed, so a live run's file is skipped, and a run that opened one just before
// keeps no lock on a removed file (output_folder_lock's inode check; a run that meets the sweep's brief lock waits
// for it). `own`: this run's file, skipped.
void remove_stale_lock_files(const fs::path& dir, const std::string& own) {
    static bool swept = false;   // (under g_locks_mutex)
    if (swept) return;
    swept = true;
    const auto hour_ago = fs::file_time_type::clock::now() - std::chrono::hours(1);
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        const fs::path& f = it->path();
        if (f.extension() != ".lock" || f == own) continue;
        std::error_code tec;
        if (const auto t = fs::last_write_time(f, tec); tec || t > hour_ago) continue;
        const int fd = ::open(f.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0) continue;
        if (::flock(fd, LOCK_EX | LOCK_NB) == 0 && same_file(fd, f.c_str())) ::unlink(f.c_str());
        ::close(fd);
    }
}

bool holds_lock(const std::string& out) {
    std::lock_guard<std::mutex> lock(g_locks_mutex);
    return g_locks.count(path_resolved(out).string()) != 0;
}

}  // namespace

void output_folder_locks_remove() {
    if (g_lock_files_pid != ::getpid()) return;
    // only where the path still names the file this process locked (one removed and made again meanwhile, by hand or
    // by a /tmp cleaner, is another run's)
    for (int i = 0; i < g_lock_file_count; ++i)
        if (same_file(g_lock_fds[i], g_lock_files[i])) ::unlink(g_lock_files[i]);
    g_lock_file_count = 0;
}

void folder_writable_check(const std::string& named, const fs::path& dir) {
    // a file made and removed there: access(W_OK) says yes to root on read-only places (/proc, an immutable folder).
    // An unnamed file first (O_TMPFILE: nothing is left behind whenever a signal or a kill comes — a named probe
    // killed between mkstemp and unlink stayed in --out: the interrupt campaign, session 55); a named one where the
    // filesystem has no unnamed files (overlayfs before Linux 6.6, NFS, FUSE).
    if (const int fd = ::open(dir.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600); fd >= 0) {
        ::close(fd);
        return;
    }
    if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL && errno != ENOENT)
        user_error_in(named, "cannot be written: no file can be made in " + dir.string() + " (" + std::strerror(errno) + ")");
    std::string probe = (dir / ".retrokit-probe-XXXXXX").string();
    const int fd = ::mkstemp(probe.data());
    if (fd < 0)
        user_error_in(named, "cannot be written: no file can be made in " + dir.string() + " (" + std::strerror(errno) + ")");
    ::close(fd);
    ::unlink(probe.c_str());
}

FolderOwner folder_owner(const std::string& dir) {
    const fs::path d(dir);
    std::error_code ec;
    if (!fs::is_directory(d, ec)) return {};
    if (std::string t = json_file_tool((d / "manifest.json").string()); !t.empty()) return {t, true};
    // an unfinished run: retro-index's and retro-knn's state.json, retro-chunk's progress.json, retro-train's
    // checkpoints/ (its first files: config.json and metrics.jsonl beside them)
    if (std::string t = json_file_tool((d / "state.json").string()); !t.empty()) {
        std::ifstream in(d / "state.json");
        const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
        return {t, false, !(j.is_object() && j.value("resumable", true) == false)};
    }
    if (fs::exists(d / "progress.json", ec)) return {"retro-chunk", false};
    if (fs::exists(d / "config.json", ec) && (fs::is_directory(d / "checkpoints", ec) || fs::exists(d / "metrics.jsonl", ec)))
        return {"retro-train", false};
    return {};
}

std::string tool_command(const std::string& tool) { return tool == "retro-tokenizer" ? "retro-tokenizer train" : tool; }

void refuse_unfinished_run(const std::string& run, const std::string& weights_option) {
    std::error_code ec;
    // (a manifest.json there that cannot be read is named by whatever reads it next, not called missing)
    if (fs::exists(fs::path(run) / "manifest.json", ec)) return;
    const FolderOwner owner = folder_owner(run);
    if (owner.tool != "retro-train" || owner.finished) return;
    const bool has_model = fs::exists(fs::path(run) / "model.safetensors", ec);
    user_error_in(run, has_model ? "is an unfinished retro-train run (no manifest.json, which is written last: its "
                                   "model.safetensors is not a finished run's)"
                                 : "has no model.safetensors yet (an unfinished run)",
                  "finish it with retro-train --resume" +
                      (weights_option.empty() ? std::string()
                                              : ", or use a checkpoint: " + weights_option + " " +
                                                    (fs::path(run) / "checkpoints" / "step_N").string()));
}

void output_name_room_check(const std::string& file, const std::string& suffix) {
    const fs::path f = path_resolved(file);
    const std::string name = f.filename().string();
    long most = ::pathconf(f.parent_path().c_str(), _PC_NAME_MAX);
    if (most <= 0) most = 255;
    const std::size_t limit = static_cast<std::size_t>(most);
    if (name.size() + suffix.size() <= limit) return;
    user_error_in(file, cat("its name is ", name.size(), " bytes, ", name.size() + suffix.size(), " with the ", suffix,
                            " of the copy written first: more than the ", limit, " a name may hold there"),
                  limit > suffix.size() ? cat("give a name of at most ", limit - suffix.size(), " bytes") : std::string("give a shorter name"));
}

void output_file_guard(const std::string& file, const std::string& option) {
    if (file.empty()) return;
    // (these options write files: "-" made a file named "-" where a script meant standard output)
    if (file == "-") user_error_in(option, "'-' (standard output) is not taken: " + option + " writes a file", "give a path (./- for a file named '-')");
    const fs::path f = path_resolved(file);
    std::error_code ec;
    if (fs::is_directory(f, ec))
        user_error_in(file, "is a folder", "give a file for " + option);
    // (path_resolved drops a trailing '/': `--json newdir/` passed here and failed after the run, its results lost)
    if (file.back() == '/') user_error_in(file, "ends in '/', a folder's name", "give a file for " + option);
    refuse_non_regular_target(file);   // a device, pipe or link: the write's rename would replace it
    const fs::path parent = f.parent_path();
    if (!fs::is_directory(parent, ec))
        user_error_in(file, "cannot be written: " + parent.string() + " is not a folder", "make the folder first");
    folder_writable_check(file, parent);
    output_name_room_check(file, ".tmp");
    // the nearest folder above it that a tool made, and the file's path inside it
    for (fs::path dir = f.parent_path(); !dir.empty() && dir != dir.root_path(); dir = dir.parent_path()) {
        const FolderOwner owner = folder_owner(dir.string());
        if (owner.tool.empty()) continue;
        const fs::path rel = f.lexically_relative(dir);
        const std::string first = rel.begin()->string();
        bool its_file = first == "checkpoints" || first == "parts" || rel == "manifest.json" || rel == "state.json" ||
                        rel == "progress.json" || rel.string().rfind("progress.params.", 0) == 0 || rel == "config.json" ||
                        rel == "metrics.jsonl";
        if (!its_file && owner.finished) {
            std::ifstream m(dir / "manifest.json");
            const nlohmann::json j = nlohmann::json::parse(m, nullptr, false);
            if (j.is_object() && j.contains("outputs") && j["outputs"].is_array())
                for (const nlohmann::json& o : j["outputs"])
                    if (o.is_object() && o.value("path", std::string()) == rel.string()) its_file = true;
        }
        if (its_file)
            user_error_in(file, "is a file of " + owner.tool + "'s " + (owner.finished ? "output " : "unfinished run ") +
                                    dir.string() + ": " + option + " would replace it",
                          "give a file of its own to " + option);
        return;
    }
}

fs::path path_resolved(const std::string& p) {
    if (p.empty()) return {};
    std::error_code ec;
    fs::path r = fs::weakly_canonical(fs::absolute(p, ec), ec);
    if (ec) r = fs::absolute(p).lexically_normal();
    // a folder that does not exist yet keeps a trailing separator ("run/"): without it "run" and "run/" are one folder
    if (r.has_relative_path() && r.filename().empty()) r = r.parent_path();
    return r;
}

fs::path path_nearest_existing(const std::string& p) {
    std::error_code ec;
    fs::path r = fs::absolute(p, ec);
    while (!r.empty() && !fs::exists(r, ec) && r != r.parent_path()) r = r.parent_path();
    return fs::exists(r, ec) ? r : fs::path();
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
    if (existed_) return;
    // up the path while the parent is missing too: those folders are made for out_ (create_directories). The path as
    // the kernel resolves it (weakly_canonical: `link/../new` is new beside link's target, not beside link)
    made_ = fs::weakly_canonical(fs::absolute(out_, ec), ec);
    if (ec) made_.clear();
    if (!made_.empty() && !made_.has_filename()) made_ = made_.parent_path();   // (a trailing separator)
    for (fs::path p = made_; !p.empty() && !fs::exists(p, ec); p = p.parent_path()) {
        outermost_ = p;
        if (p == p.parent_path()) break;
    }
}

NewOutputFolder::~NewOutputFolder() {
    if (existed_ || keep_ || std::uncaught_exceptions() <= exceptions_) return;
    // refused before it held the folder's lock (by the lock itself: another run made the folder meanwhile and is
    // writing it), the folder is not this run's to remove
    if (!holds_lock(out_)) return;
    std::error_code ec;
    if (fs::exists(fs::path(out_) / "manifest.json", ec)) return;
    fs::remove_all(out_, ec);
    // the interrupt note no longer describes a folder (a full disk's error line ended with its "OUT keeps its finished
    // parts: ... --resume" for a folder just removed: a review, session 56)
    interrupt_note_clear();
    if (ec || outermost_.empty()) return;
    // the folders made above it, innermost first, each only where empty (fs::remove does not remove a folder with files)
    fs::path p = made_;
    while (p != outermost_ && p.has_parent_path() && p != p.parent_path()) {
        p = p.parent_path();
        if (!fs::remove(p, ec) || ec) return;
    }
}

namespace {
// The lock file of `key` (a resolved output path), in the lock folder of this user.
std::string lock_path(const std::string& key) {
    // /tmp itself, not $TMPDIR: a scheduler's per-job TMPDIR would give two jobs on one node two lock folders
    std::error_code ec;
    const fs::path base = fs::is_directory("/tmp", ec) ? fs::path("/tmp") : fs::temp_directory_path(ec);
    return (base / ("retrokit-locks-" + std::to_string(::getuid())) / (fingerprint_bytes(key.data(), key.size()) + ".lock"))
        .string();
}

// The note a lock holder wrote ("retro-chunk, pid 123, since ..."), read from its open file.
std::string lock_note(int fd) {
    char buf[512] = {0};
    const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
    std::string who = n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string("another process");
    while (!who.empty() && (who.back() == '\n' || who.back() == ' ')) who.pop_back();
    return who;
}
}  // namespace

bool output_folder_holds(const std::string& path) {
    const fs::path p = path_resolved(path);
    std::lock_guard<std::mutex> lock(g_locks_mutex);
    for (const auto& [folder, fd] : g_locks) {
        (void)fd;
        if (path_inside(p, fs::path(folder))) return true;
    }
    return false;
}

std::string output_folder_lock_file(const std::string& out) { return lock_path(path_resolved(out).string()); }

std::string output_folder_writer(const std::string& out) {
    const std::string key = path_resolved(out).string();
    {
        std::lock_guard<std::mutex> lock(g_locks_mutex);
        if (g_locks.count(key)) return "";   // this process
    }
    const int fd = ::open(lock_path(key).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return "";
    std::string who;
    if (::flock(fd, LOCK_SH | LOCK_NB) != 0) {
        if (errno == EWOULDBLOCK) who = lock_note(fd);
    } else {
        ::flock(fd, LOCK_UN);
    }
    ::close(fd);
    return who;
}

void output_folder_lock(const std::string& out, const std::string& tool) {
    const std::string key = path_resolved(out).string();
    std::lock_guard<std::mutex> lock(g_locks_mutex);
    auto& held = g_locks;
    if (held.count(key)) return;   // this process holds it already (a library caller running a stage again)
    const std::string path = lock_path(key);
    std::error_code ec;
    fs::create_directories(fs::path(path).parent_path(), ec);
    int fd = -1;
    int lock_rc = 0;
    for (int attempt = 0;; ++attempt) {
        fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        if (fd < 0) {   // no lock without a lock folder: the run goes on, unguarded against a second one
            log_warn(cat("cannot open the lock ", path, " of ", out, ": ", std::strerror(errno), "; going on without it"));
            held[key] = -1;
            return;
        }
        lock_rc = ::flock(fd, LOCK_EX | LOCK_NB);
        // another process's sweep holds a stale file for microseconds (remove_stale_lock_files): waited for, up to
        // 200 ms, before a live holder is taken for one
        for (int wait = 0; lock_rc != 0 && errno == EWOULDBLOCK && wait < 20; ++wait) {
            ::usleep(10000);
            lock_rc = ::flock(fd, LOCK_EX | LOCK_NB);
        }
        if (lock_rc != 0 || attempt == 100) break;
        // the file locked must still be the one at `path`: its holder removes it as it ends, and a lock taken on the
        // removed file would guard nothing against a run that makes the next one
        if (same_file(fd, path.c_str())) break;
        ::close(fd);
    }
    if (lock_rc != 0) {
        const int err = errno;
        const std::string who = lock_note(fd);
        ::close(fd);
        if (err != EWOULDBLOCK) {
            log_warn(cat("cannot take the lock ", path, " of ", out, ": ", std::strerror(err), "; going on without it"));
            held[key] = -1;
            return;
        }
        // the shards of `--shard auto` launched with one --out (a helper's pass, session 54): each needs its own
        std::string fix = "wait for it to end, or stop it first: two runs in one folder mix their files";
        try {
            if (const LauncherEnv env = launcher_env(); env.launched() && env.size > 1 && tool != "retro-train")
                fix = cat("give each of the ", env.size, " ranks its own --out, expanded by each rank (e.g. mpirun ... ",
                          "bash -c '", tool, " ... --out ", out, ".$", env.source.substr(0, env.source.find('/')),
                          "'), then join them with ", tool, " merge");
        } catch (const UserError&) {   // (a malformed launcher variable: named where --shard auto reads it)
        }
        user_error_in(out, "another run is writing into it (" + who + ")", fix);
    }
    const std::string me = cat(tool, ", pid ", ::getpid(), ", since ", utc_timestamp());
    if (::ftruncate(fd, 0) == 0 && ::pwrite(fd, me.data(), me.size(), 0) < 0) {
        // the lock holds without the note; the message of a refused second run just names no process
    }
    held[key] = fd;
    remember_lock_file(path, fd);
    remove_stale_lock_files(fs::path(path).parent_path(), path);
}

void output_folder_guard(const std::string& out, const std::string& tool, const std::vector<OutputInput>& inputs,
                         bool clears, bool lock) {
    if (out.empty()) user_error_in("--out", "is empty", "name the output folder");
    if (out == "-") user_error_in("--out", "'-' (standard output) is not a folder", "give a folder path (./- for a folder named '-')");
    // a link to a folder that is not there: creating it failed with "File exists", naming neither the link nor its
    // target (a helper's odd-paths campaign, session 57)
    if (std::error_code lec; fs::is_symlink(fs::symlink_status(out, lec)) && !fs::exists(out, lec))
        user_error_in(out, "is a link to " + fs::read_symlink(out, lec).string() + ", which does not exist",
                      "make the folder it points to, or give another --out");
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
    if (fs::exists(o, ec) && !fs::is_directory(o, ec))
        user_error_in(out, "is a file, not a folder", "choose another --out (a folder " + tool + " makes)");
    // retro-index and retro-knn replace their whole folder on --force (output_folder_clear): an --out inside an input
    // folder of theirs would go with it (the other tools remove only their own files)
    for (const OutputInput& in : inputs) {
        if (in.path.empty() || !fs::is_directory(in.path, ec)) continue;
        const fs::path i = path_resolved(in.path);
        const FolderOwner owner = folder_owner(i.string());
        if (i != o && (owner.tool == "retro-index" || owner.tool == "retro-knn") && path_inside(o, i))
            user_error_in(out, "lies inside " + in.option + " " + in.path + " (" + owner.tool + "'s output)",
                          "choose an --out outside it: " + owner.tool + " --force there would delete it");
    }
    // a folder a tool keeps for itself inside its output (a run's checkpoints/, an index's or knn's parts/): that
    // tool prunes it, resumes from it or clears it on --force, so nothing else is written there (a run's --out
    // P/checkpoints/step_N replaced P's checkpoint, which --force, as advised, let it do)
    for (fs::path dir = o.parent_path(); !dir.empty() && dir != dir.root_path(); dir = dir.parent_path()) {
        const FolderOwner above = folder_owner(dir.string());
        if (above.tool.empty()) continue;
        const std::string first = o.lexically_relative(dir).begin()->string();
        const bool kept = (above.tool == "retro-train" && first == "checkpoints") ||
                          ((above.tool == "retro-index" || above.tool == "retro-knn") && first == "parts");
        if (kept)
            user_error_in(out, "lies inside " + (dir / first).string() + ", which " + above.tool + " keeps for itself",
                          "choose an --out outside " + dir.string());
        break;   // the nearest folder a tool made decides
    }
    if (const FolderOwner owner = folder_owner(o.string()); !owner.tool.empty() && owner.tool != tool) {
        if (owner.finished)
            user_error_in(out, "holds " + owner.tool + "'s output (manifest.json), not " + tool + "'s",
                          "choose another --out: --force replaces only a folder " + tool + " made");
        user_error_in(out, "holds an unfinished " + owner.tool + " run, not " + tool + "'s output",
                      owner.resumable
                          ? "choose another --out, or finish it: run that " + tool_command(owner.tool) +
                                " command again with --resume"
                          : "choose another --out, or run that " + owner.tool + " command again with --force");
    }
    if (lock) output_folder_lock(out, tool);   // last: before the caller clears or writes anything
}

namespace {

// What a run of retro-index or retro-knn writes into its folder (its outputs, its state, its parts, a file being
// written): --force removes these and nothing else (the user's files beside them stay; before session 37 the whole
// folder went).
bool written_by(const fs::path& entry, const std::string& tool) {
    static const std::map<std::string, std::vector<std::string>> kOutputs = {
        {"retro-index", {"embeddings.npy", "index.faiss", "idf.npy", "bm25.glass", "images.json"}},
        {"retro-knn", {"neighbours.npy", "distances.npy"}}};
    const auto it = kOutputs.find(tool);
    const std::vector<std::string> names = it == kOutputs.end() ? std::vector<std::string>() : it->second;
    const std::string n = entry.filename().string();
    return n == "parts" || n == "manifest.json" || n == "state.json" || entry.extension() == ".tmp" ||
           std::find(names.begin(), names.end(), n) != names.end();
}

// What a merge killed after its mark went and before its manifest was written leaves in `out`: some of its outputs
// (`outputs`, each done or still NAME.tmp), perhaps manifest.json.tmp and an empty parts/, and nothing else — at least
// one output, no manifest.json or state.json (a folder no tool claims that holds one is the user's). Or what one killed
// while it wrote its mark leaves: `tool`'s state.json.tmp (whole, or empty) beside an empty parts/ (a helper's kill
// soak, session 68: its --resume was refused as a folder of someone else's).
bool holds_merge_leftovers(const std::string& out, const std::string& tool, const std::vector<std::string>& outputs) {
    std::error_code ec;
    bool output = false;
    for (fs::directory_iterator d(out, ec), end; !ec && d != end; d.increment(ec)) {
        const std::string n = d->path().filename().string();
        // an empty parts/ (a kill between removing the mark and removing the parts: a review, session 55)
        if (n == "parts" && d->is_directory(ec) && !d->is_symlink(ec) && fs::is_empty(d->path(), ec)) continue;
        if (!d->is_regular_file(ec) || d->is_symlink(ec)) return false;
        if (n == "state.json.tmp") {
            if (fs::file_size(d->path(), ec) != 0 && json_file_tool(d->path().string()) != tool) return false;
            output = true;
            continue;
        }
        const bool is_output = std::any_of(outputs.begin(), outputs.end(), [&](const std::string& o) { return n == o || n == o + ".tmp"; });
        if (!is_output && n != "manifest.json.tmp") return false;
        output = output || is_output;
    }
    return !ec && output;
}

}  // namespace

void output_folder_clear(const std::string& out, const std::string& tool, bool check_only) {
    std::error_code ec;
    if (!fs::exists(out, ec)) return;
    const auto own = [&](const fs::path& e) { return written_by(e, tool); };
    std::vector<fs::path> entries;
    std::vector<std::string> foreign;
    for (fs::directory_iterator d(out, ec), end; !ec && d != end; d.increment(ec)) {
        entries.push_back(d->path());
        if (!own(d->path())) foreign.push_back(d->path().filename().string() + (d->is_directory(ec) ? "/" : ""));
    }
    if (ec) user_error_in(out, "cannot be listed: " + ec.message());
    // a folder no tool claims that holds other files is the user's: refused, not written into
    if (!foreign.empty() && folder_owner(out).tool != tool) {
        std::sort(foreign.begin(), foreign.end());
        std::string list;
        for (std::size_t i = 0; i < foreign.size() && i < 3; i++) list += (i ? ", " : "") + foreign[i];
        if (foreign.size() > 3) list += ", ...";
        user_error_in(out, "holds files " + tool + " did not write (" + list + ")",
                      "choose another --out, or empty it yourself: --force replaces only " + tool + "'s own files");
    }
    if (check_only) return;
    // the manifest first: a --force stopped midway leaves no folder that says it is finished with outputs missing (in
    // directory order index.faiss or neighbours.npy could go first, and --resume said "already complete": a helper's
    // kill soak, session 68)
    std::stable_partition(entries.begin(), entries.end(), [](const fs::path& e) { return e.filename() == "manifest.json"; });
    for (const fs::path& e : entries)
        if (own(e)) {
            fs::remove_all(e, ec);
            if (ec) user_error_in(e.string(), "cannot be removed: " + ec.message());
        }
}

void merge_resume_force_refuse(bool resume, bool force) {
    if (resume && force)   // --force would remake what --resume means to keep
        user_error_in("--resume and --force", "contradict each other: --force makes the merge again, --resume keeps a finished one",
                      "give one of them");
}

MergeResume merge_resume_check(const std::string& tool, const std::string& out, bool force,
                               const std::vector<OutputInput>& inputs,
                               const std::function<std::string(const nlohmann::json&)>& difference,
                               const std::vector<std::string>& outputs) {
    merge_resume_force_refuse(true, force);
    output_folder_guard(out, tool, inputs, /*clears=*/false);
    std::error_code ec;
    if (!fs::exists(out, ec) || (fs::is_directory(out, ec) && fs::is_empty(out, ec))) return MergeResume::kNew;
    const FolderOwner owner = folder_owner(out);
    if (owner.finished) {   // (another tool's folder: refused by the guard above)
        if (const std::string diff = difference(manifest_read(out)); !diff.empty())
            user_error_in(out, "already holds the output of another job: " + diff,
                          "choose another --out, or pass --force to make the merge again");
        manifest_refuse_missing_outputs(out, tool + " merge");
        log_info(out + " is already complete (manifest.json exists); nothing to resume");
        return MergeResume::kDone;
    }
    if (owner.tool == tool && !owner.resumable) {
        // (a bm25 build marks its folder the same way: another job's, not to be made again as a merge)
        const std::string run = json_read_file((fs::path(out) / "state.json").string()).value("run", std::string("a merge"));
        if (run != "a merge")
            user_error_in(out, "holds an interrupted " + tool + " run of another kind (" + run + "), not a merge",
                          "choose another --out, or pass --force to replace it with the merge");
        log_info(out + " holds an interrupted merge, which cannot be continued: making it again");
        return MergeResume::kRemake;
    }
    if (owner.tool == tool)
        user_error_in(out, "holds an unfinished " + tool + " run that is not a merge (a build or a shard): a merge does not continue it",
                      "resume it with its own command, choose another --out, or pass --force to replace it with the merge");
    // (a merge killed between removing its mark and writing its manifest leaves its outputs alone)
    if (owner.tool.empty() && holds_merge_leftovers(out, tool, outputs)) {
        log_info(out + " holds an interrupted merge (no manifest.json), which cannot be continued: making it again");
        return MergeResume::kRemake;
    }
    user_error_in(out, "already exists and holds no finished " + tool + " output",
                  "choose another --out, or pass --force to replace it");
}

}  // namespace retro
