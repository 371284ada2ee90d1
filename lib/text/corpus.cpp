// Implementation of corpus.h.
#include "text/corpus.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/fingerprint.h"
#include "core/output_folder.h"
#include "core/folder_walk.h"
#include "core/lfs_pointer.h"
#include "core/log.h"
#include "core/output_folder.h"
#include "text/corpus_parquet.h"
#include "text/line_reader.h"
#include "text/utf8.h"

namespace fs = std::filesystem;

namespace retro {

void CorpusCounts::merge(const CorpusCounts& o) {
    files += o.files;
    documents += o.documents;
    bytes += o.bytes;
    empty_skipped += o.empty_skipped;
    malformed_skipped += o.malformed_skipped;
    invalid_utf8_replaced += o.invalid_utf8_replaced;
}

namespace {

// Whether `path` is retro-chunk's --resume checkpoint (data/chunk_build.cpp): an object with its params, next_block
// and writer state, not a user's file of that name.
bool retro_chunk_checkpoint(const fs::path& path) {
    std::ifstream in(path);
    if (!in) return false;
    const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
    // (the params inline before session 54, their fingerprint since: they are in progress.params.FINGERPRINT.json beside it)
    return j.is_object() && (j.contains("params") || j.contains("params_fingerprint")) && j.contains("next_block") &&
           j.contains("writer");
}

// `glob` against `path` from positions (g, s). A call that failed is remembered (failed_[g * (|path| + 1) + s]), so
// a pattern with many stars ("*a*a*a*a*b") tries each (g, s) once, not every way to split the path among them.
class GlobMatcher {
public:
    GlobMatcher(const std::string& glob, const std::string& path)
        : g_(glob), s_(path), failed_((glob.size() + 1) * (path.size() + 1), 0) {}
    bool match(std::size_t g, std::size_t s) {
        char& failed = failed_[g * (s_.size() + 1) + s];
        if (failed) return false;
        if (match_from(g, s)) return true;
        failed = 1;
        return false;
    }

private:
    char glob_at(std::size_t i) const { return i < g_.size() ? g_[i] : '\0'; }
    char path_at(std::size_t i) const { return i < s_.size() ? s_[i] : '\0'; }
    bool match_from(std::size_t g, std::size_t s) {
        while (glob_at(g)) {
            // '**' as a whole component ("**/x", "a/**/x", "a/**"): any number of folders; elsewhere ("a**") two '*'
            const bool component_start = g == 0 || glob_at(g - 1) == '/';
            if (component_start && glob_at(g) == '*' && glob_at(g + 1) == '*' &&
                (glob_at(g + 2) == '/' || glob_at(g + 2) == '\0')) {
                if (!glob_at(g + 2)) return true;   // trailing ** matches everything
                for (std::size_t p = s;; ++p) {     // try every component boundary
                    if ((p == s || path_at(p - 1) == '/') && match(g + 3, p)) return true;
                    if (!path_at(p)) return false;
                }
            }
            if (glob_at(g) == '*') {
                for (std::size_t p = s;; ++p) {
                    if (match(g + 1, p)) return true;
                    if (!path_at(p) || path_at(p) == '/') return false;
                }
            }
            if (!path_at(s)) return false;
            if (glob_at(g) == '?') {
                if (path_at(s) == '/') return false;
            } else if (glob_at(g) != path_at(s)) {
                return false;
            }
            ++g, ++s;
        }
        return !path_at(s);
    }
    const std::string& g_;
    const std::string& s_;
    std::vector<char> failed_;
};

bool is_jsonl(const std::string& p) {
    for (const char* ext : {".jsonl", ".jsonl.gz", ".jsonl.zst"}) {
        std::string e = ext;
        if (p.size() >= e.size() && p.compare(p.size() - e.size(), e.size(), e) == 0) return true;
    }
    return false;
}
}  // namespace

bool corpus_is_parquet(const std::string& path) { return path.size() >= 8 && path.compare(path.size() - 8, 8, ".parquet") == 0; }

bool glob_match(const std::string& glob, const std::string& relative) { return GlobMatcher(glob, relative).match(0, 0); }

std::vector<CorpusFile> corpus_list_files(const std::vector<std::string>& inputs, const CorpusOptions& opts) {
    std::vector<CorpusFile> out;
    for (const auto& in : inputs) {
        std::error_code ec;
        if (fs::is_directory(in, ec)) {
            std::vector<std::string> found;
            FolderWalkVisitor visit;
            // a RetroKit output inside the corpus (`--out corpus/tok`) is not text: its files are never read.
            // Only a folder its manifest.json or state.json says a retro- tool wrote: the looser signs of an
            // unfinished run (a progress.json, a config.json) may be the user's own files
            visit.enter_folder = [](const fs::path& folder) {
                std::error_code dir_ec;
                const FolderOwner owner = folder_owner(folder.string());
                // (retro-chunk's progress.json by its fields: an unfinished database inside the corpus, e.g. an --out
                // there resumed with --glob '**', listed its own .tmp files as inputs and could never resume)
                const bool claimed = owner.finished || fs::exists(folder / "state.json", dir_ec) ||
                                     (owner.tool == "retro-chunk" && retro_chunk_checkpoint(folder / "progress.json"));
                if (claimed && owner.tool.rfind("retro-", 0) == 0) {
                    log_warn(cat("skipping ", folder.string(), ": ", owner.tool,
                                 owner.finished ? "'s output" : "'s unfinished run", ", not corpus text"));
                    return false;
                }
                return true;
            };
            std::int64_t parquet_files = 0, jsonl_files = 0;   // (for the hint where the glob takes none)
            visit.on_file = [&](const fs::path& file) {
                parquet_files += corpus_is_parquet(file.string());
                jsonl_files += is_jsonl(file.string());
                if (!glob_match(opts.glob, file.lexically_relative(in).generic_string())) return;
                utf8_require_path(file.string(), "a corpus file");   // before any work, not at the manifest
                found.push_back(file.string());
            };
            visit.on_broken_link = [&](const fs::path& link, const std::string& why) {
                if (glob_match(opts.glob, link.lexically_relative(in).generic_string()))
                    log_warn("skipping " + link.string() + ": " + why);
            };
            visit.on_special_file = visit.on_broken_link;   // a pipe or a device named like corpus text: said, as a link
            folder_walk(in, visit);
            if (found.empty()) {
                // a folder of a dataset's Parquet or JSON Lines files (a Hugging Face download) named as such
                const std::string kind = parquet_files >= jsonl_files ? "parquet" : "jsonl";
                const std::int64_t n = std::max(parquet_files, jsonl_files);
                user_error_in(in, "no file matches '" + opts.glob + "'",
                              opts.glob.find_first_of("[{") != std::string::npos
                                  ? "--glob knows *, ? and ** only ([..] and {..} are taken as the characters themselves)"
                              : n > 0 ? cat("the folder holds ", n, " .", kind, " file", n == 1 ? "" : "s", ": pass --glob '**/*.",
                                            kind, kind == "jsonl" ? "*'" : "'")
                                      : "pass --glob PATTERN");
            }
            std::sort(found.begin(), found.end());
            for (auto& f : found) out.push_back({f, is_jsonl(f), corpus_is_parquet(f)});
        } else if (fs::is_regular_file(in, ec)) {
            utf8_require_path(in, "a corpus file");
            const std::string ext = fs::path(in).extension().string();
            if (!is_jsonl(in) && (ext == ".json" || ext == ".ndjson" || ext == ".gz" || ext == ".zst"))
                log_warn(in + ": read as plain text, one document (JSON Lines are read from .jsonl, .jsonl.gz and .jsonl.zst "
                              "files)");
            out.push_back({in, is_jsonl(in), corpus_is_parquet(in)});
        } else if (fs::exists(in, ec)) {
            user_error_in(in, "is not a regular file or a folder (a device, a pipe or a socket)",
                          "give the text as a file or a folder of files");
        } else {
            user_error_in(in, "no such file or folder");
        }
    }
    // a file reached twice (named twice, through a link, or by overlapping folders) is read once: a second copy would
    // be another document, which the same-document filter of retro-knn cannot tell from the first
    std::map<std::pair<std::uintmax_t, std::uintmax_t>, std::string> first;
    std::vector<CorpusFile> unique;
    for (auto& f : out) {
        struct stat st {};
        if (::stat(f.path.c_str(), &st) != 0) {
            unique.push_back(std::move(f));
            continue;
        }
        const auto id = std::make_pair(static_cast<std::uintmax_t>(st.st_dev), static_cast<std::uintmax_t>(st.st_ino));
        if (const auto it = first.find(id); it != first.end()) {
            log_warn(f.path + (f.path == it->second ? ": given twice" : ": the same file as " + it->second) + ", read once");
            continue;
        }
        first.emplace(id, f.path);
        unique.push_back(std::move(f));
    }
    // options that select nothing in these inputs: said (they were ignored without a word, yet recorded)
    if (opts.text_key != CorpusOptions{}.text_key &&
        std::none_of(unique.begin(), unique.end(), [](const CorpusFile& f) { return f.jsonl || f.parquet; }))
        log_warn("--text-key '" + opts.text_key + "' names the text of .jsonl lines and Parquet columns, and no input is a .jsonl "
                 "or .parquet file: it does nothing here");
    if (opts.glob != CorpusOptions{}.glob &&
        std::none_of(inputs.begin(), inputs.end(), [](const std::string& in) {
            std::error_code ec;
            return fs::is_directory(in, ec);
        }))
        log_warn("--glob '" + opts.glob + "' picks files inside folder inputs, and every input is a file: it does nothing here");
    return unique;
}

// Each NUL byte of `text` as U+FFFD; returns how many there were.
std::int64_t corpus_replace_nul_bytes(std::string& text) {
    std::string out;
    out.reserve(text.size());
    std::int64_t n = 0;
    for (const char c : text) {
        if (c != '\0') {
            out += c;
            continue;
        }
        out += "\xEF\xBF\xBD";
        ++n;
    }
    text.swap(out);
    return n;
}

void corpus_read_file(const CorpusFile& file, const CorpusOptions& opts, CorpusCounts& counts,
                      const std::function<void(Document&)>& fn) {
    if (file.parquet) {
        corpus_read_parquet(file, opts, counts, fn);
        return;
    }
    counts.files++;
    Document doc;
    doc.source = file.path;
    if (!file.jsonl) {
        doc.text = read_whole_file(file.path);
        counts.bytes += static_cast<std::int64_t>(doc.text.size());
        if (doc.text.size() < 1024 && is_lfs_pointer(reinterpret_cast<const std::uint8_t*>(doc.text.data()), doc.text.size()))
            log_warn(file.path + ": is a Git LFS pointer (a clone without git-lfs), read as the text it is; fetch the file with "
                                 "`git lfs pull`, or leave it out with --glob");
        // git's rule: a NUL byte in the first 8000 is a binary file (an image, an archive; UTF-16 text of Latin
        // script has one in every other byte), which would enter the database as replacement characters. A NUL
        // later (a crawled page's stray byte, a zero-filled tail after a crash) is replaced and counted as invalid.
        constexpr std::size_t kBinaryProbe = 8000;
        const std::size_t nul = doc.text.find('\0');
        if (nul != std::string::npos && nul < kBinaryProbe) {
            if (opts.on_error == OnError::FAIL)
                user_error_in(file.path, cat("holds a NUL byte at offset ", nul, ": a binary file (or UTF-16 text), not UTF-8 text"),
                              "leave it out (--glob), convert it to UTF-8, or skip such files with --on-error skip");
            counts.malformed_skipped++;
            return;
        }
        if (nul != std::string::npos) counts.invalid_utf8_replaced += corpus_replace_nul_bytes(doc.text);
        counts.invalid_utf8_replaced += utf8_sanitize(doc.text);
        // a UTF-8 byte-order mark (Windows editors write one) is a mark, not text: the document's first chunk held
        // U+FEFF (Python's utf-8-sig drops it as well)
        if (doc.text.rfind("\xEF\xBB\xBF", 0) == 0) doc.text.erase(0, 3);
        if (doc.text.find_first_not_of(" \t\r\n") == std::string::npos) {
            counts.empty_skipped++;
            return;
        }
        counts.documents++;
        fn(doc);
        return;
    }
    LineReader reader(file.path);
    std::string line;
    while (reader.next(line)) {
        counts.bytes += static_cast<std::int64_t>(line.size()) + 1;
        if (line.find_first_not_of(" \t\r") == std::string::npos) {
            counts.empty_skipped++;
            continue;
        }
        counts.invalid_utf8_replaced += utf8_sanitize(line);
        std::string where = file.path + ":" + std::to_string(reader.line_number());
        std::string problem;
        try {
            auto j = nlohmann::json::parse(line);
            if (!j.is_object()) problem = "not a JSON object";
            else if (!j.contains(opts.text_key)) problem = "has no key '" + opts.text_key + "'";
            else if (!j[opts.text_key].is_string()) problem = "'" + opts.text_key + "' is not a string";
            else doc.text = j[opts.text_key].get<std::string>();
        } catch (const nlohmann::json::exception& e) {
            // with the parser's reason and column (a lone surrogate escape \ud800, which the JSON spec allows and
            // nlohmann refuses, was "malformed JSON" alone: a helper's pass, session 54)
            std::string why = e.what();
            const std::size_t at = why.find("column ");
            why = at == std::string::npos ? std::string() : why.substr(at, why.find("; last read") - at);
            problem = why.empty() ? std::string("malformed JSON") : "malformed JSON at " + why;
        }
        if (!problem.empty()) {
            if (opts.on_error == OnError::FAIL) {
                if (reader.line_number() == 1 && is_lfs_pointer(reinterpret_cast<const std::uint8_t*>(line.data()), line.size()))
                    refuse_lfs_pointer_file(file.path);   // a .jsonl left behind by a clone without git-lfs
                // in a compressed file, damaged bytes come out as a garbled line before the stream's own check fails
                const bool compressed = file.path.size() > 3 && (file.path.compare(file.path.size() - 3, 3, ".gz") == 0 ||
                                                                  file.path.compare(file.path.size() - 4, 4, ".zst") == 0);
                user_error_in(where, problem,
                              compressed ? "fix the line, or pass --on-error skip; if the line looks garbled, the compressed "
                                           "file may be damaged (check it with gzip -t or zstd -t)"
                                         : "fix the line, or pass --on-error skip");
            }
            if (reader.line_number() == 1 && is_lfs_pointer(reinterpret_cast<const std::uint8_t*>(line.data()), line.size()))
                log_warn(file.path + ": is a Git LFS pointer (a clone without git-lfs): its lines are skipped; fetch the "
                                     "file with `git lfs pull`");
            counts.malformed_skipped++;
            log_debug(where + ": skipped: " + problem);
            continue;
        }
        // a "\u0000" escape puts a NUL byte in the text: replaced and counted as a text file's stray NUL is
        if (doc.text.find('\0') != std::string::npos) counts.invalid_utf8_replaced += corpus_replace_nul_bytes(doc.text);
        if (doc.text.find_first_not_of(" \t\r\n") == std::string::npos) {
            counts.empty_skipped++;
            continue;
        }
        doc.line = reader.line_number();
        doc.byte_offset = reader.byte_offset();
        counts.documents++;
        fn(doc);
    }
}

std::string corpus_inputs_difference(const nlohmann::json& done, const std::vector<CorpusFile>& files, const std::string& made) {
    namespace fs = std::filesystem;
    const auto same_file = [](const std::string& a, const std::string& b) { return a == b || path_resolved(a) == path_resolved(b); };
    std::vector<std::string> recorded, given;
    std::vector<nlohmann::json> recorded_inputs;
    for (const auto& in : done.value("inputs", nlohmann::json::array()))
        if (in.value("role", "") == "corpus") {
            recorded.push_back(in.value("path", ""));
            recorded_inputs.push_back(in);
        }
    for (const auto& f : files) given.push_back(fs::absolute(f.path).lexically_normal().string());
    if (recorded.size() == given.size() && std::equal(recorded.begin(), recorded.end(), given.begin(), same_file)) {
        for (std::size_t i = 0; i < given.size(); i++) {
            const nlohmann::json& was = recorded_inputs[i];
            std::error_code ec;
            const auto size = static_cast<std::int64_t>(fs::file_size(given[i], ec));
            if (!ec && was.value("size", std::int64_t(-1)) >= 0 && size != was.value("size", std::int64_t(-1)))
                return cat("corpus file ", given[i], " has changed since ", made, " was made (", size, " bytes, then ",
                           was.value("size", std::int64_t(-1)), ")");
            // the same size: where the folder recorded the file's time (since session 54) and it moved, the bytes are
            // hashed again (a same-size edit); an older folder's inputs are compared by size alone
            struct stat st {};
            if (!was.contains("mtime_ns") || !was.contains("fingerprint") || ::stat(given[i].c_str(), &st) != 0) continue;
            if (static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec == was.value("mtime_ns", std::int64_t(0)))
                continue;
            if (fingerprint_file(given[i]) != was.value("fingerprint", std::string()))
                return cat("corpus file ", given[i], " has changed since ", made, " was made (the same size, other bytes)");
        }
        return "";
    }
    for (std::size_t i = 0; i < std::min(recorded.size(), given.size()); i++)   // (a file reached another way is not the one)
        if (!same_file(recorded[i], given[i])) return cat("corpus file ", i + 1, " is ", given[i], ", the folder's ", recorded[i]);
    return cat("the corpus is ", given.size(), " files, the folder's ", recorded.size());
}

}  // namespace retro
