// Implementation of manifest.h.
#include "core/manifest.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <utility>
#include <vector>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/input_stamps.h"
#include "core/fingerprint.h"
#include "core/interrupt_note.h"
#include "core/lfs_pointer.h"
#include "core/npy.h"
#include "core/output_folder.h"
#include "core/progress.h"
#include "retrokit/version.h"

namespace fs = std::filesystem;

namespace retro {

std::string utc_timestamp() {
    std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

Manifest::Manifest(const ToolContext& ctx) {
    json_["tool"] = ctx.tool;
    json_["version"] = RETROKIT_VERSION;
    json_["git_commit"] = RETROKIT_GIT_COMMIT;
    json_["command_line"] = ctx.command_line;
    json_["created"] = utc_timestamp();
    json_["parameters"] = nlohmann::json::object();
    json_["inputs"] = nlohmann::json::array();
    json_["outputs"] = nlohmann::json::array();
}

void Manifest::add_input(const std::string& role, const std::string& path) {
    std::error_code ec;
    auto size = fs::file_size(path, ec);
    if (ec) user_error_in(path, "cannot read input: " + ec.message());
    // with its modification time (Unix ns): a --resume of a finished folder re-hashes only an input whose time moved
    // (text/corpus.h's corpus_inputs_difference), where a same-size edit passed before (a helper's pass, session 54)
    struct stat st {};
    const bool timed = ::stat(path.c_str(), &st) == 0;
    nlohmann::json in = {{"role", role},
                         {"path", fs::absolute(path).lexically_normal().string()},
                         {"size", size},
                         {"fingerprint", fingerprint_file(path)}};
    if (timed) in["mtime_ns"] = static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
    json_["inputs"].push_back(std::move(in));
}

void Manifest::add_input_as_read(const std::string& role, const std::string& path, std::int64_t bytes,
                                 const std::string& fingerprint) {
    const std::string absolute = fs::absolute(path).lexically_normal().string();
    json_["inputs"].push_back({{"role", role}, {"path", absolute}, {"size", bytes}, {"fingerprint", fingerprint}});
    as_read_.push_back(absolute);
}

void Manifest::add_input_folder(const std::string& role, const std::string& dir) {
    nlohmann::json m = manifest_read(dir);
    json_["inputs"].push_back({{"role", role},
                               {"path", fs::absolute(dir).lexically_normal().string()},
                               {"tool", m.value("tool", "")},
                               {"fingerprint", folder_fingerprint(m)}});
}

void Manifest::add_output(const std::string& dir, const std::string& name, const std::string& dtype_tag) {
    std::string path = (fs::path(dir) / name).string();
    nlohmann::json out{{"path", name}, {"size", fs::file_size(path)}, {"fingerprint", fingerprint_file(path)}};
    if (name.size() > 4 && name.substr(name.size() - 4) == ".npy") {
        NpyArray a(path);
        out["shape"] = a.shape();
        out["dtype"] = dtype_tag.empty() ? dtype_name(a.dtype()) : dtype_tag;
    } else if (!dtype_tag.empty()) {
        out["dtype"] = dtype_tag;
    }
    json_["outputs"].push_back(out);
}

void Manifest::inputs_check() const {
    std::vector<std::string> paths;
    for (const nlohmann::json& in : json_.value("inputs", nlohmann::json::array()))
        if (in.is_object() && in.contains("path") && in["path"].is_string() &&
            std::find(as_read_.begin(), as_read_.end(), in["path"].get<std::string>()) == as_read_.end())
            paths.push_back(in["path"].get<std::string>());
    input_stamps_check(paths);
}

void Manifest::write(const std::string& dir) const {
    // not complete from inputs made again while the run read them (an input folder rebuilt with --force meanwhile)
    inputs_check();
    AtomicFile file((fs::path(dir) / "manifest.json").string());
    file.write(json_.dump(2) + "\n");
    // complete once the manifest has its name: a Ctrl-C from then on has nothing to resume (cleared after the folder's
    // sync, a signal during it printed the unfinished run's line: a helper's soak, session 70)
    file.commit(&interrupt_note_clear);
}

namespace {
std::mutex g_json_files_mutex;
std::vector<std::string> g_json_files;
void note_json_file(const std::string& path) {
    std::lock_guard<std::mutex> lock(g_json_files_mutex);
    g_json_files.erase(std::remove(g_json_files.begin(), g_json_files.end(), path), g_json_files.end());
    g_json_files.push_back(path);   // the newest read last
}

// The fields every reader goes through (docs/formats.md "manifest.json"), so that a hand-edited one of the wrong
// type is named here rather than met as a bare type error later.
void check_manifest_fields(const nlohmann::json& j, const std::string& path) {
    for (const char* key : {"tool", "version"})
        if (j.contains(key) && !j[key].is_string()) user_error_in(path, cat("malformed manifest: '", key, "' is not a string"));
    if (j.contains("parameters") && !j["parameters"].is_object())
        user_error_in(path, "malformed manifest: 'parameters' is not an object");
    auto check_entries = [&](const char* list, std::initializer_list<const char*> strings) {
        if (!j.contains(list)) return;
        if (!j[list].is_array()) user_error_in(path, cat("malformed manifest: '", list, "' is not a list"));
        for (std::size_t i = 0; i < j[list].size(); ++i) {
            const auto& e = j[list][i];
            if (!e.is_object()) user_error_in(path, cat("malformed manifest: ", list, "[", i, "] is not an object"));
            for (const char* key : strings)
                if (e.contains(key) && !e[key].is_string())
                    user_error_in(path, cat("malformed manifest: ", list, "[", i, "].", key, " is not a string"));
        }
    };
    check_entries("inputs", {"role", "path", "tool", "fingerprint"});
    check_entries("outputs", {"path", "fingerprint", "dtype"});
}
}  // namespace

std::vector<std::string> json_files_read() {
    std::lock_guard<std::mutex> lock(g_json_files_mutex);
    return g_json_files;
}

void json_files_read_reset() {
    std::lock_guard<std::mutex> lock(g_json_files_mutex);
    g_json_files.clear();
}

namespace {
std::string json_brief(const nlohmann::json* v) {
    if (!v) return "absent";
    std::string s = v->dump();
    return s.size() > 60 ? s.substr(0, 57) + "..." : s;
}
}  // namespace

std::string json_first_difference(const nlohmann::json& recorded, const nlohmann::json& now, const std::string& path,
                                  const std::string& whose) {
    if (recorded == now) return "";
    const auto at = [&](const std::string& key) { return path.empty() ? key : path + "." + key; };
    if (recorded.is_object() && now.is_object()) {
        std::vector<std::string> keys;
        for (const auto& [k, v] : recorded.items()) keys.push_back(k);
        for (const auto& [k, v] : now.items())
            if (!recorded.contains(k)) keys.push_back(k);
        std::sort(keys.begin(), keys.end());
        for (const auto& k : keys) {
            const nlohmann::json* r = recorded.contains(k) ? &recorded.at(k) : nullptr;
            const nlohmann::json* n = now.contains(k) ? &now.at(k) : nullptr;
            if (r && n) {
                if (std::string d = json_first_difference(*r, *n, at(k), whose); !d.empty()) return d;
            } else {
                return at(k) + " is " + json_brief(n) + ", " + whose + " " + json_brief(r);
            }
        }
    }
    if (recorded.is_array() && now.is_array() && recorded.size() == now.size())
        for (std::size_t i = 0; i < now.size(); i++)
            if (std::string d = json_first_difference(recorded[i], now[i], path + "[" + std::to_string(i) + "]", whose);
                !d.empty())
                return d;
    return (path.empty() ? std::string("the value") : path) + " is " + json_brief(&now) + ", " + whose + " " +
           json_brief(&recorded);
}

nlohmann::json json_read_file(const std::string& path) {
    note_json_file(path);
    std::string text;
    // (the file read is the one stamped: a config or an input folder's file, for the run's record, core/input_stamps.h)
    if (!input_read_whole(path, text)) user_error_in(path, "missing");
    try {
        return nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
        user_error_in(path, std::string("malformed JSON: ") + e.what());
    }
}

namespace {

// The first tool (in pipeline order) whose outputs lie in `dir`, and those of its files (as "a, b and c"): what a
// folder without manifest.json or a mark holds. {"", ""} where none.
std::pair<std::string, std::string> tool_outputs_in(const std::string& dir) {
    static const std::vector<std::pair<std::string, std::vector<std::string>>> kOutputs = {
        {"retro-chunk", {"chunks.npy", "doc_ids.npy", "doc_offsets.npy", "seq_starts.npy", "sources.jsonl"}},
        {"retro-index", {"embeddings.npy", "index.faiss", "idf.npy", "bm25.glass", "images.json"}},
        {"retro-knn", {"neighbours.npy", "distances.npy"}}};
    std::error_code ec;
    for (const auto& [tool, outputs] : kOutputs) {
        std::vector<std::string> found;
        for (const auto& name : outputs)
            if (fs::is_regular_file(fs::path(dir) / name, ec)) found.push_back(name);
        if (found.empty()) continue;
        std::string names;
        for (std::size_t i = 0; i < found.size(); ++i)
            names += (i == 0 ? "" : i + 1 == found.size() ? " and " : ", ") + found[i];
        return {tool, names};
    }
    return {};
}

}  // namespace

nlohmann::json manifest_read(const std::string& dir) {
    std::string path = (fs::path(dir) / "manifest.json").string();
    note_json_file(path);
    std::string text;
    // (the file read is the one stamped: an input folder as this run read it, core/input_stamps.h)
    if (!input_read_whole(path, text)) {
        std::error_code ec;
        // (fs::exists is false on an error too: a link loop, a path past PATH_MAX, a folder that may not be searched)
        if (!fs::exists(dir, ec)) user_error_in(dir, ec ? ec.message() : "no such folder");
        if (!fs::is_directory(dir, ec)) user_error_in(dir, "is a file, not a folder", "give the folder a RetroKit tool wrote");
        // a folder this user may not search or read (mode 000, another user's): said of the folder or the manifest,
        // not of the first file the checks below happen to stat
        if (::access(dir.c_str(), R_OK | X_OK) != 0)
            user_error_in(dir, std::string("cannot be read: ") + std::strerror(errno),
                          "give this user read and search permission on the folder (chmod u+rx), or run as its owner");
        if (::access(path.c_str(), F_OK) == 0 && ::access(path.c_str(), R_OK) != 0)
            user_error_in(path, std::string("cannot be read: ") + std::strerror(errno),
                          "give this user read permission on it (chmod u+r), or run as its owner");
        // a run writing the folder now (before its first checkpoint it looks like no tool's)
        if (const std::string who = output_folder_writer(dir); !who.empty())
            user_error_in(path, "missing: a run is writing the folder now (" + who + ")", "wait for it to end");
        // an interrupted run's folder says which tool left it (its state.json; retro-chunk's progress.json, or before
        // its first checkpoint the progress.params.*.json it writes as it starts)
        std::string tool = json_file_tool((fs::path(dir) / "state.json").string());
        if (tool.empty() && fs::exists(fs::path(dir) / "progress.json", ec)) tool = "retro-chunk";
        if (tool.empty())
            for (const auto& e : fs::directory_iterator(dir, ec))
                if (e.path().filename().string().rfind("progress.params.", 0) == 0) {
                    tool = "retro-chunk";
                    break;
                }
        if (!tool.empty()) {
            std::string shard;
            try {
                shard = json_read_file((fs::path(dir) / "state.json").string()).value("shard_done", std::string());
            } catch (const std::exception&) {
            }
            if (!shard.empty())
                user_error_in(path, "missing: the folder is shard " + shard + " of a sharded " + tool +
                                        " run, finished; the shards' merge writes the complete folder",
                              tool + " merge SHARD_DIRS... --out DIR, and give that folder");
        }
        if (!tool.empty()) {
            const bool resumable = folder_owner(dir).resumable;   // (a merge or a bm25 build marks its folder so)
            user_error_in(path, "missing: the folder is an unfinished " + tool + " run (stopped before its end)",
                          resumable ? "finish it: run the same " + tool_command(tool) + " command again with --resume"
                                    : "run the same " + tool + " command again with --force (it cannot be resumed)");
        }
        // a tool's outputs without its manifest and without a mark: a run stopped between them (retro-chunk's merge
        // leaves no mark; retro-index's and retro-knn's runs remove theirs just before the manifest; a --force stopped
        // as it cleared), or files copied or made without it. It said "incomplete or was not made by a RetroKit tool"
        // (the kill soak, session 68).
        if (const auto [tool, names] = tool_outputs_in(dir); !tool.empty())
            user_error_in(path, "missing: the folder holds " + names + ", as " + tool + "'s output does, but no manifest.json, "
                                    "which " + tool + " writes last (a run stopped before its end, or files copied or made "
                                    "without it)",
                          "make it again: run the " + tool + " command that made it again (with --resume, or --force), or "
                          "copy the whole folder");
        user_error_in(path, "missing: the folder is incomplete or was not made by a RetroKit tool");
    }
    try {
        nlohmann::json j = nlohmann::json::parse(text);
        if (!j.is_object() || !j.contains("outputs") || !j["outputs"].is_array())
            user_error_in(path, "malformed manifest: no 'outputs' list");
        check_manifest_fields(j, path);
        return j;
    } catch (const nlohmann::json::exception& e) {
        user_error_in(path, std::string("malformed manifest: ") + e.what());
    }
}

void state_mark_shard_done(const std::string& dir, int index, int count) {
    const std::string path = (fs::path(dir) / "state.json").string();
    nlohmann::json st = json_read_file(path);
    st["shard_done"] = std::to_string(index) + "/" + std::to_string(count);
    write_file_atomic(path, st.dump(2));
}

nlohmann::json state_shard_record(int index, int count) { return {{"index", index}, {"count", count}}; }

std::pair<int, int> state_shard(const nlohmann::json& state) {
    const nlohmann::json s = state.is_object() ? state.value("shard", nlohmann::json()) : nlohmann::json();
    if (!s.is_object()) return {-1, -1};
    const nlohmann::json i = s.value("index", nlohmann::json()), n = s.value("count", nlohmann::json());
    return {i.is_number_integer() ? i.get<int>() : -1, n.is_number_integer() ? n.get<int>() : -1};
}

void state_check_same_shard(const nlohmann::json& old, const std::string& path, int index, int count) {
    if (count <= 1) return;   // the whole job may finish any folder: a shard's parts are what a killed run leaves
    if (!old.is_object() || !old.value("shard", nlohmann::json()).is_object()) return;
    const auto [was_index, was_count] = state_shard(old);
    if (was_index == index && was_count == count) return;
    auto name = [](int i, int n) { return n <= 1 ? std::string("the whole job (no --shard)") : "shard " + std::to_string(i) + "/" + std::to_string(n); };
    user_error_in(path, "records " + name(was_index, was_count) + ", this is " + name(index, count),
                  "resume each shard in its own folder, with its own --shard");
}

void shards_check_complete(const std::vector<std::string>& dirs, const std::string& tool) {
    std::map<int, std::string> seen;   // shard index -> its folder
    int count = -1;
    std::string count_dir;
    for (const auto& d : dirs) {   // folders that are not shards, named before any is compared
        std::error_code ec;
        if (!fs::exists(d, ec)) user_error_in(d, ec ? ec.message() : "no such folder");
        if (fs::exists(fs::path(d) / "state.json", ec)) continue;
        if (fs::exists(fs::path(d) / "manifest.json", ec))
            user_error_in(d, "is a finished " + json_file_tool((fs::path(d) / "manifest.json").string()) +
                                 " folder, not a shard of a --shard run: there is nothing to merge",
                          "give the folders of a --shard i/n run");
        user_error_in(d, "holds no state.json: not a shard folder of " + tool, "give the folders of a --shard i/n run");
    }
    for (const auto& d : dirs) {
        std::string done;
        nlohmann::json st;
        try {
            st = json_read_file((fs::path(d) / "state.json").string());
            done = st.value("shard_done", std::string());
        } catch (const std::exception&) {
            return;
        }
        if (const auto [index, shards] = state_shard(st); done.empty() && shards > 1)
            user_error_in(d, cat("is shard ", index, "/", shards, ", unfinished (stopped before its end)"),
                          "finish it: rerun its command with --resume, then merge");
        int i = -1, n = -1;
        if (done.empty() || std::sscanf(done.c_str(), "%d/%d", &i, &n) != 2 || i < 0 || n < 1 || i >= n) return;
        if (count >= 0 && n != count)
            user_error_in(d, cat("is shard ", done, ", ", count_dir, " a shard of ", count),
                          "merge the shards of one --shard i/n run");
        count = n, count_dir = d;
        if (const auto it = seen.find(i); it != seen.end())
            user_error_in(d, it->second == d ? cat("is given twice") : cat("is shard ", done, " again (", it->second, " is too)"),
                          "give each shard's folder once");
        seen[i] = d;
    }
    for (int i = 0; i < count; ++i)
        if (!seen.count(i))
            user_error_in(cat("shard ", i, "/", count), cat("is missing: the folders given hold ", seen.size(), " of the ", count,
                                                             " shards"),
                          cat("run ", tool, " with --shard ", i, "/", count, " into a folder of its own and add it"));
}

std::string json_file_tool(const std::string& path) {
    std::ifstream in(path);
    if (!in) return "";
    try {
        const nlohmann::json j = nlohmann::json::parse(in);
        return j.is_object() ? j.value("tool", std::string()) : std::string();
    } catch (const nlohmann::json::exception&) {
        return "";
    }
}

std::string manifest_input(const nlohmann::json& manifest, const std::string& role, const std::string& field) {
    if (!manifest.is_object()) return "";   // no manifest (null): a folder without one records no inputs
    for (const auto& in : manifest.value("inputs", nlohmann::json::array()))
        if (in.value("role", "") == role) return in.value(field, "");
    return "";
}

std::string manifest_recorded_folder(const std::string& dir, const std::string& role, const std::string& what,
                                     const std::string& made_from, const std::string& option) {
    const fs::path path = fs::path(dir) / "manifest.json";
    std::error_code ec;
    if (!fs::is_regular_file(path, ec)) {
        // an unfinished run's folder: that is the news (`retro-train eval RUN` of a stopped run said "--db: is
        // required", a helper's kill soak, session 68)
        if (const FolderOwner owner = folder_owner(dir); !owner.tool.empty() && !owner.finished)
            user_error_in(dir, cat("is an unfinished ", owner.tool, " run (no manifest.json yet, which is written last), ",
                                   "so it records no ", what, " to take"),
                          cat("finish it with ", tool_command(owner.tool), " --resume, or pass ", option));
        user_error_in(option, cat("is required: ", dir, " has no manifest.json to take the ", what, " from"),
                      cat("pass ", option));
    }
    const std::string recorded = manifest_input(manifest_read(dir), role);
    if (recorded.empty()) user_error_in(path.string(), cat("records no ", what, " folder"), cat("pass ", option));
    if (!fs::exists(recorded, ec))
        user_error_in(recorded, cat("the ", what, " ", made_from, " is gone"), cat("pass ", option, " with its new place"));
    return recorded;
}

std::string folder_fingerprint(const nlohmann::json& manifest) {
    std::string all;
    for (const auto& o : manifest["outputs"]) all += o.value("path", "") + "=" + o.value("fingerprint", "") + ";";
    return fingerprint_bytes(all.data(), all.size());
}

void recorded_folder_check(const std::string& state_file, const std::string& what, const std::string& dir,
                           const std::string& fingerprint, const std::string& fix, const std::string& recorded_by) {
    if (dir.empty() || fingerprint.empty()) return;   // (a shard of a version that did not record it)
    std::error_code ec;
    if (!fs::exists(fs::path(dir) / "manifest.json", ec))
        user_error_in(state_file, "records " + what + " " + dir + ", which is no longer there (no manifest.json)",
                      "put it back at that path (the merged manifest records it), or " + fix);
    if (folder_fingerprint(manifest_read(dir)) != fingerprint)
        user_error_in(dir, "has been made again since the shards read it as " + what + " (" +
                               (recorded_by.empty() ? state_file : recorded_by) + " records other outputs)", fix);
}

namespace {
// Hashes each (path, recorded fingerprint) and refuses the first that differs, naming the record it differs from.
void verify_files(const std::string& dir, const std::vector<std::pair<std::string, std::string>>& files,
                  std::int64_t bytes, const std::string& writer, const std::string& record, const std::string& fix) {
    std::unique_ptr<Progress> progress;
    if (bytes > (std::int64_t(256) << 20)) progress = std::make_unique<Progress>("verifying " + dir, bytes, "B");
    for (const auto& [path, recorded] : files)
        if (fingerprint_file(path, progress.get()) != recorded) {
            refuse_lfs_pointer_file(path);   // a folder copied through a clone without git-lfs
            user_error_in(path,
                          "has changed since " + writer + " wrote it: its bytes no longer match the fingerprint in " +
                              record + " (edited, replaced or damaged)",
                          fix);
        }
    if (progress) progress->finish();
}
}  // namespace

void manifest_verify_outputs(const std::string& dir, const std::vector<std::string>& names) {
    if (names.empty()) return;
    const nlohmann::json m = manifest_read(dir);
    const std::string manifest_path = (fs::path(dir) / "manifest.json").string();
    const std::string tool = m.contains("tool") && m["tool"].is_string() ? m["tool"].get<std::string>() : "";
    std::vector<std::pair<std::string, std::string>> files;   // path, recorded fingerprint
    std::int64_t bytes = 0;
    for (const auto& name : names) {
        const std::string path = (fs::path(dir) / name).string();
        std::string recorded;
        for (const auto& o : m["outputs"])
            if (o.is_object() && o.value("path", nlohmann::json()) == name && o.contains("fingerprint") &&
                o["fingerprint"].is_string())
                recorded = o["fingerprint"].get<std::string>();
        if (recorded.empty()) continue;   // a folder written by other code than RetroKit's may record none
        std::error_code ec;
        const auto size = fs::file_size(path, ec);
        if (ec) user_error_in(path, "missing or unreadable: " + ec.message());
        bytes += static_cast<std::int64_t>(size);
        files.emplace_back(path, recorded);
    }
    verify_files(dir, files, bytes, tool.empty() ? std::string("its tool") : tool, manifest_path,
                 "make the folder again with " + (tool.empty() ? std::string("its tool") : tool) +
                     ", or pass --no-verify to take it as it is");
}

void manifest_refuse_missing_outputs(const std::string& dir, const std::string& tool) {
    const nlohmann::json m = manifest_read(dir);
    if (!m.contains("outputs") || !m["outputs"].is_array()) return;
    for (const auto& o : m["outputs"]) {
        if (!o.is_object() || !o.contains("path") || !o["path"].is_string()) continue;
        const fs::path path = fs::path(dir) / o["path"].get<std::string>();
        std::error_code ec;
        if (!fs::exists(path, ec))
            user_error_in(path.string(), "missing, though " + (fs::path(dir) / "manifest.json").string() +
                                             " records it: the folder is not whole (a removal stopped midway, or a file deleted)",
                          "make it again with " + tool + " --force");
    }
}

void checkpoint_verify_files(const std::string& dir) {
    const std::string state_path = (fs::path(dir) / "state.json").string();
    const nlohmann::json st = json_read_file(state_path);
    if (!st.is_object() || !st.contains("fingerprints")) return;   // a checkpoint from before 2026-12-01
    if (!st["fingerprints"].is_object()) user_error_in(state_path, "'fingerprints' is not an object");
    std::vector<std::pair<std::string, std::string>> files;
    std::int64_t bytes = 0;
    for (const auto& [name, fp] : st["fingerprints"].items()) {
        const std::string path = (fs::path(dir) / name).string();
        if (!fp.is_string()) user_error_in(state_path, "fingerprints." + name + " is not a string");
        std::error_code ec;
        const auto size = fs::file_size(path, ec);
        if (ec) user_error_in(path, "missing or unreadable: " + ec.message(), "resume from an earlier checkpoint");
        bytes += static_cast<std::int64_t>(size);
        files.emplace_back(path, fp.get<std::string>());
    }
    verify_files(dir, files, bytes, "retro-train", state_path,
                 "use an earlier checkpoint (--resume takes the one before once " + dir +
                     " is deleted), or pass --no-verify to take it as it is");
}

void named_weights_verify(const std::string& weights_file) {
    const fs::path file(weights_file), holder = file.parent_path();
    if (file.filename() != "model.safetensors") return;
    if (fs::exists(holder / "state.json")) checkpoint_verify_files(holder.string());
    else manifest_verify_outputs_if_any(holder.string(), {"model.safetensors"});
}

void manifest_verify_outputs_if_any(const std::string& dir, const std::vector<std::string>& names) {
    if (fs::exists(fs::path(dir) / "manifest.json")) manifest_verify_outputs(dir, names);
}

}  // namespace retro
