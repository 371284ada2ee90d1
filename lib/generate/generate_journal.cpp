// Implementation of generate_journal.h.
#include "generate/generate_journal.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/fingerprint.h"
#include "core/log.h"
#include "core/manifest.h"

namespace retro {

namespace fs = std::filesystem;

namespace {

constexpr int kJournalVersion = 1;

nlohmann::json journal_header(const nlohmann::json& job) {
    return {{"tool", "retro-generate"}, {"journal", kJournalVersion}, {"job", job}};
}

std::string dump_result(const nlohmann::json& result) {
    return result.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// A finished prompt's line: its index, its result, and the xxh3 of the result as dumped, so that damage which leaves
// valid JSON (a changed byte inside a completion) is caught as well as damage which does not.
std::string journal_line(std::int64_t index, const nlohmann::json& result) {
    const std::string r = dump_result(result);
    return nlohmann::json{{"index", index}, {"result", result}, {"xxh3", fingerprint_bytes(r.data(), r.size())}}.dump(
        -1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

void GenerateJournal::weights_change_refuse(nlohmann::json& recorded, nlohmann::json& job) const {
    if (!recorded.is_object() || !job.is_object() || !recorded.contains("weights") || !job.contains("weights")) return;
    const nlohmann::json was = recorded["weights"], now = job["weights"];
    if (!was.is_object() || !now.is_object() || was.value("path", nlohmann::json()) != now.value("path", nlohmann::json()))
        return;   // other weights: json_first_difference names their paths
    recorded.erase("weights");
    job.erase("weights");
    // the same file, changed since the interrupted run (retrained, replaced): said so, rather than as two raw clock
    // counts with the fix "run the interrupted command again with --resume" (what was just run: a helper's audit,
    // session 69). A journal of before session 69 records "modified" as the library clock's count.
    const std::string weights = now.value("path", std::string());
    std::int64_t was_time = was.value("modified_ns", std::int64_t(-1)), now_time = now.value("modified_ns", std::int64_t(-1));
    if (!was.contains("modified_ns") && was.contains("modified")) {
        std::error_code ec;
        was_time = was.value("modified", std::int64_t(-1));
        const auto t = fs::last_write_time(weights, ec);
        now_time = ec ? -1 : static_cast<std::int64_t>(t.time_since_epoch().count());
    }
    if (was.value("bytes", nlohmann::json()) != now.value("bytes", nlohmann::json()) || was_time != now_time)
        user_error_in(path_, "holds prompts decoded with " + weights + " as it was: the file has changed since (retrained "
                                 "or replaced; its size or modification time differ)",
                      "remove " + path_ + " to decode every prompt with the weights now there, or restore the ones it had");
}

GenerateJournal::GenerateJournal(const std::string& output, const nlohmann::json& job, bool resume,
                                 std::int64_t prompts)
    : path_(output + ".partial"), job_(job) {
    if (!fs::exists(path_)) return;
    nlohmann::json recorded;
    std::size_t cut = 0, size = 0;
    load(recorded, prompts, cut, size);
    std::error_code ec;
    const bool superseded = fs::exists(output) && fs::last_write_time(output, ec) >= fs::last_write_time(path_, ec);
    if (done_.empty() && !damaged_.empty() && !superseded)   // (every finished line damaged: said, not dropped silently)
        log_warn(cat(path_, ": ", damaged_.size() == 1 ? "its one finished prompt's line is" : "all its finished prompts' lines are",
                     " damaged: every prompt is decoded again"));
    if (done_.empty() || superseded) {   // stale: nothing kept, or already written into the output
        if (superseded && !done_.empty())
            log_info(path_ + " is older than " + output + " (written after it): stale, replaced at the first finished prompt");
        done_.clear();
        return;
    }
    if (!resume)
        user_error_in(path_, cat("holds ", done_.size(), " finished prompts of an interrupted retro-generate into ", output),
                      "run the same command with --resume to keep them, or remove " + path_ +
                          " to start again (--force replaces a finished output, never a journal's prompts)");
    // greedy decoding reads no temperature, top-k or top-p: both greedy, those are not compared (--greedy
    // --temperature 2 interrupted was refused as "temperature is 1.0, the journal's 2.0" resumed with --greedy alone)
    nlohmann::json recorded_cmp = recorded, job_cmp = job;
    if (recorded.is_object() && job.is_object() && recorded.value("greedy", false) == true && job.value("greedy", false) == true)
        for (const char* key : {"temperature", "top_k", "top_p"}) {
            recorded_cmp.erase(key);
            job_cmp.erase(key);
        }
    weights_change_refuse(recorded_cmp, job_cmp);
    if (const std::string d = json_first_difference(recorded_cmp, job_cmp, "", "the journal's"); !d.empty())
        user_error_in(path_, "was written by another retro-generate job: " + d,
                      "run the interrupted command again with --resume, or remove " + path_ + " to start again");
    if (cut < size) {   // drop a line cut short by a kill
        if (::truncate(path_.c_str(), static_cast<off_t>(cut)) != 0)
            user_error_in(path_, std::string("cannot be written: ") + std::strerror(errno));
        log_info(cat(path_, ": dropped a last line cut short (", size - cut, " bytes)"));
    }
    if (!damaged_.empty()) rewrite_without_damaged();   // the journal the run appends to holds only good lines
    fresh_ = false;
}

GenerateJournal::~GenerateJournal() {
    if (fd_ >= 0) ::close(fd_);
}

void GenerateJournal::load(nlohmann::json& recorded_job, std::int64_t prompts, std::size_t& cut, std::size_t& size) {
    std::ifstream in(path_, std::ios::binary);
    if (!in) user_error_in(path_, "cannot be read");
    std::ostringstream ss;
    ss << in.rdbuf();
    const std::string bytes = ss.str();
    size = bytes.size();
    std::size_t pos = 0;
    std::int64_t line_no = 0;
    bool header_seen = false;
    while (pos < bytes.size()) {
        const std::size_t nl = bytes.find('\n', pos);
        if (nl == std::string::npos) break;   // cut short by a kill: not counted
        line_no++;
        const std::string where = cat(path_, ":", line_no);
        const nlohmann::json j = nlohmann::json::parse(bytes.begin() + static_cast<std::ptrdiff_t>(pos),
                                                       bytes.begin() + static_cast<std::ptrdiff_t>(nl), nullptr, false);
        pos = nl + 1;
        if (!header_seen) {
            if (j.is_discarded() || !j.is_object() || !j.contains("tool") || j.at("tool") != "retro-generate" ||
                !j.contains("job"))
                user_error_in(where, "is not a retro-generate journal", "remove " + path_ + " to start again");
            if (!j.contains("journal") || j.at("journal") != kJournalVersion)
                user_error_in(where, cat("is a journal of another version (", j.value("journal", nlohmann::json()).dump(),
                                         "); this retro-generate writes ", kJournalVersion),
                              "remove " + path_ + " to start again");
            recorded_job = j.at("job");
            header_seen = true;
            cut = pos;
            continue;
        }
        cut = pos;
        // a damaged line (a disk error, a hand edit) costs only its prompt: it is decoded again
        if (j.is_discarded() || !j.is_object() || !j.contains("index") || !j.at("index").is_number_integer() ||
            !j.contains("result") || !j.at("result").is_object()) {
            damaged_.push_back(line_no);
            continue;
        }
        const std::int64_t index = j.at("index").get<std::int64_t>();
        if (index < 0 || index >= prompts || done_.count(index)) {   // beyond the prompts, or a prompt's second line
            damaged_.push_back(line_no);
            continue;
        }
        if (j.contains("xxh3")) {   // (a journal before session 52 has none: its lines are taken as they parse)
            const std::string r = dump_result(j.at("result"));
            if (!j.at("xxh3").is_string() || j.at("xxh3").get<std::string>() != fingerprint_bytes(r.data(), r.size())) {
                damaged_.push_back(line_no);
                continue;
            }
        }
        done_[index] = j.at("result");
    }
}

void GenerateJournal::rewrite_without_damaged() {
    std::string lines = journal_header(job_).dump() + "\n";
    for (const auto& [index, result] : done_) lines += journal_line(index, result) + "\n";
    AtomicFile f(path_);
    f.write(lines);
    f.commit();
    std::string which;
    for (std::size_t i = 0; i < damaged_.size() && i < 8; i++) which += (i ? ", " : "") + std::to_string(damaged_[i]);
    if (damaged_.size() > 8) which += cat(" and ", damaged_.size() - 8, " more");
    log_warn(cat(path_, ": ", damaged_.size() == 1 ? "line " : "lines ", which,
                 damaged_.size() == 1 ? " is damaged (not a finished prompt's line, or a prompt's second): dropped, its "
                                        "prompt decoded again"
                                      : " are damaged (not finished prompts' lines, or a prompt's second): dropped, their "
                                        "prompts decoded again"));
}

void GenerateJournal::add(std::int64_t index, const nlohmann::json& result) {
    if (fd_ < 0) {
        fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | (fresh_ ? O_TRUNC : O_APPEND), 0644);
        if (fd_ < 0) user_error_in(path_, std::string("cannot be written: ") + std::strerror(errno));
        if (fresh_) {
            const std::string head = journal_header(job_).dump() + "\n";
            write_all(fd_, head.data(), head.size(), path_);
            fsync_parent_dir(path_);
            fresh_ = false;
        }
    }
    const std::string line = journal_line(index, result) + "\n";
    write_all(fd_, line.data(), line.size(), path_);
    done_[index] = result;
    if (on_written_) on_written_(done_.size());
    if (::fdatasync(fd_) != 0) user_error_in(path_, std::string("write failed: ") + std::strerror(errno));
}

void GenerateJournal::remove() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    std::error_code ec;
    fs::remove(path_, ec);
}

}  // namespace retro
