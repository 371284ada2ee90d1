// Implementation of batch_output.h.
#include "generate/batch_output.h"

#include <filesystem>
#include <fstream>
#include <utility>

#include "core/error.h"
#include "core/fingerprint.h"
#include "core/manifest.h"
#include "text/tokenizer_folder.h"

namespace retro {

namespace fs = std::filesystem;

namespace {

std::string resolved(const std::string& path) {
    if (path.empty()) return "";
    std::error_code ec;
    const fs::path p = fs::weakly_canonical(fs::absolute(path), ec);
    return ec ? fs::absolute(path).string() : p.string();
}

// A folder input as the journal records it: its manifest's fingerprint (a folder rebuilt in place is another input; a
// copy is the same), or where it is when it has no manifest (a folder made by hand).
nlohmann::json folder_stamp(const std::string& dir) {
    if (dir.empty()) return nullptr;
    const fs::path m = fs::path(dir) / "manifest.json";
    if (fs::exists(m)) return {{"manifest", fingerprint_file(m.string())}};
    return {{"path", resolved(dir)}};
}

// The tokenizer a run decodes with, by fingerprint: --tokenizer, or the database's (the same file either way is the
// same job).
std::string tokenizer_stamp(const GenerateOptions& g) {
    std::string path = g.tokenizer;
    if (path.empty() && !g.db.empty() && fs::exists(fs::path(g.db) / "manifest.json"))
        path = manifest_input(json_read_file((fs::path(g.db) / "manifest.json").string()), "tokenizer", "path");
    if (path.empty()) return "";
    path = tokenizer_resolve_path(path);
    return fs::exists(path) ? fingerprint_file(path) : resolved(path);
}

}  // namespace

// Everything that decides a batch's text (generate/generate_journal.h): a journal of another job is refused. The
// weights by path, size and modification time (hashing them again would cost a read of the file; --verify does
// that against the run's manifest); not --batch-size or --threads, which change no text.
nlohmann::json generate_journal_job(const GenerateRunOptions& cli, const std::vector<std::string>& prompts,
                                    const std::vector<nlohmann::json>& ids) {
    const GenerateOptions& g = cli.g;
    const std::string weights = generate_weights_path(g);
    std::error_code ec;
    const auto modified = fs::last_write_time(weights, ec);
    // the prompts as read (not the file's bytes: --prompts may be a pipe)
    const std::string read = nlohmann::json{{"prompts", prompts}, {"ids", ids}}.dump(-1, ' ', false,
                                                                                  nlohmann::json::error_handler_t::replace);
    return {{"prompts", fingerprint_bytes(read.data(), read.size())},
            {"weights", {{"path", resolved(weights)},
                         {"bytes", fs::file_size(weights, ec)},
                         {"modified", ec ? 0 : modified.time_since_epoch().count()}}},
            {"index", g.no_retrieval ? nlohmann::json(nullptr) : folder_stamp(g.index)},
            {"db", folder_stamp(g.db)},
            {"tokenizer", tokenizer_stamp(g)},
            {"no_retrieval", g.no_retrieval},
            {"max_tokens", g.max_tokens},
            {"temperature", g.sampler.temperature},
            {"top_k", g.sampler.top_k},
            {"top_p", g.sampler.top_p},
            {"greedy", g.sampler.greedy},
            {"seed", g.seed},
            {"ignore_eos", !g.stop_at_eos},
            {"nprobe", g.nprobe},
            {"ef_search", g.ef_search},
            {"device", g.device},
            {"dtype", g.dtype}};
}

// --output is replaced by a regular file at the end (AtomicFile's rename): refused up front when it is something else
// (a folder, a device such as /dev/null, a pipe, a symbolic link: the rename would replace the link or the device
// itself), or a file inside one of the run's input folders (the run, the database, the index: their files would be
// replaced).
void generate_output_check(const GenerateRunOptions& cli) {
    std::error_code ec;
    const fs::file_status st = fs::symlink_status(cli.output, ec);
    if (!ec && fs::exists(st)) {
        if (fs::is_symlink(st))
            user_error_in(cli.output, "is a symbolic link: the results would replace the link, not its file",
                          "give the path it points to, or another --output");
        if (fs::is_directory(st)) user_error_in(cli.output, "is a folder", "give a file, e.g. " + (fs::path(cli.output) / "out.jsonl").string());
        if (!fs::is_regular_file(st))
            user_error_in(cli.output, "is not a regular file (a device or a pipe): it would be replaced by one",
                          "give a file; --output - writes to standard output");
    }
    const std::string out = resolved(cli.output);
    for (const auto& [flag, dir] : {std::pair<std::string, std::string>{"the run", cli.g.run}, {"--db", cli.g.db},
                                    {"--index", cli.g.index}, {"--checkpoint", cli.g.checkpoint}}) {
        if (dir.empty() || !fs::is_directory(dir)) continue;
        const std::string d = resolved(dir);
        if (out.size() > d.size() && out.compare(0, d.size(), d) == 0 && out[d.size()] == '/')
            user_error_in(cli.output, "is inside " + flag + " (" + dir + "): the results would write into an input",
                          "give a file outside the input folders");
    }
}

// Whether `output` holds one line per prompt, in order, with the prompts and ids read (a run that finished).
bool generate_output_complete(const std::string& output, const std::vector<std::string>& prompts,
                     const std::vector<nlohmann::json>& ids) {
    std::ifstream in(output);
    if (!in) return false;
    std::size_t i = 0;
    for (std::string line; std::getline(in, line); i++) {
        const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
        if (i >= prompts.size() || !j.is_object() || j.value("prompt", std::string()) != prompts[i] || !j.contains("id") ||
            j.at("id") != ids[i])
            return false;
    }
    return i == prompts.size();
}

}  // namespace retro
