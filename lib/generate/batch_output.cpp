// Implementation of batch_output.h.
#include "generate/batch_output.h"

#include <sys/stat.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <utility>

#include "core/error.h"
#include "core/fingerprint.h"
#include "core/manifest.h"
#include "core/output_folder.h"
#include "text/tokenizer_folder.h"

namespace retro {

namespace fs = std::filesystem;

namespace {

// A folder input as the journal records it: its manifest's fingerprint (a folder rebuilt in place is another input; a
// copy is the same), or where it is when it has no manifest (a folder made by hand).
nlohmann::json folder_stamp(const std::string& dir) {
    if (dir.empty()) return nullptr;
    const fs::path m = fs::path(dir) / "manifest.json";
    if (fs::exists(m)) return {{"manifest", fingerprint_file(m.string())}};
    return {{"path", path_resolved(dir).string()}};
}

// The tokenizer a run decodes with, by fingerprint: --tokenizer, or the database's (the same file either way is the
// same job).
std::string tokenizer_stamp(const GenerateOptions& g) {
    std::string path = g.tokenizer;
    if (path.empty() && !g.db.empty() && fs::exists(fs::path(g.db) / "manifest.json"))
        path = manifest_input(json_read_file((fs::path(g.db) / "manifest.json").string()), "tokenizer", "path");
    if (path.empty()) return "";
    path = tokenizer_resolve_path(path);
    return fs::exists(path) ? fingerprint_file(path) : path_resolved(path).string();
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
    struct stat st {};
    const bool timed = ::stat(weights.c_str(), &st) == 0;
    // the prompts as read (not the file's bytes: --prompts may be a pipe)
    const std::string read = nlohmann::json{{"prompts", prompts}, {"ids", ids}}.dump(-1, ' ', false,
                                                                                  nlohmann::json::error_handler_t::replace);
    return {{"prompts", fingerprint_bytes(read.data(), read.size())},
            {"weights", {{"path", path_resolved(weights).string()},
                         {"bytes", fs::file_size(weights, ec)},
                         // Unix ns, as manifests record times (before session 69 "modified", the library clock's count)
                         {"modified_ns", timed ? static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec
                                               : std::int64_t(0)}}},
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

void generate_output_check(const GenerateRunOptions& cli) {
    std::error_code ec;
    // (before its folder is looked for: `--output new/` said ".../new is not a folder" of a folder not there)
    if (cli.output.back() == '/') user_error_in(cli.output, "ends in '/', a folder's name", "give a file for --output");
    // the journal of finished prompts (generate_journal.h), rewritten through OUTPUT.partial.tmp on a --resume
    output_name_room_check(cli.output, ".partial.tmp");
    if (cli.prompts_file != "-") {
        if (fs::exists(cli.output) && fs::equivalent(cli.output, cli.prompts_file, ec))
            user_error_in(cli.output, "is the --prompts file: the results would replace the prompts",
                          "give another --output");
        const std::string journal = cli.output + ".partial";
        if (fs::exists(journal) && fs::equivalent(journal, cli.prompts_file, ec))
            user_error_in(cli.prompts_file, "is --output's journal (" + journal + "), not a prompts file",
                          "give the prompts file, or another --output");
    }
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
    const fs::path out = path_resolved(cli.output);
    for (const auto& [flag, dir] : {std::pair<std::string, std::string>{"the run", cli.g.run}, {"--db", cli.g.db},
                                    {"--index", cli.g.index}, {"--checkpoint", cli.g.checkpoint}}) {
        if (!dir.empty() && fs::is_directory(dir) && path_inside(out, path_resolved(dir)))
            user_error_in(cli.output, "is inside " + flag + " (" + dir + "): the results would write into an input",
                          "give a file outside the input folders");
    }
    // an input named as a file (--checkpoint w.safetensors, --tokenizer tok.model): --force replaced the weights
    for (const auto& [flag, file] : {std::pair<std::string, std::string>{"--checkpoint", cli.g.checkpoint}, {"--tokenizer", cli.g.tokenizer}})
        if (!file.empty() && fs::is_regular_file(file, ec) && fs::exists(cli.output, ec) && fs::equivalent(cli.output, file, ec))
            user_error_in(cli.output, "is the " + flag + " file: the results would replace an input", "give another --output");
    const fs::path parent = fs::absolute(cli.output).parent_path();
    if (!fs::is_directory(parent)) user_error_in(cli.output, "cannot be written: " + parent.string() + " is not a folder");
    // nor a file of a folder a tool made (the database's tokenizer, tok/tok.model: "exists (the results of an earlier
    // run)" said, and --force replaced it)
    output_file_guard(cli.output, "--output");
    // the journal and the output are made in this folder at the first finished prompt, after the decoding started
    folder_writable_check(cli.output, parent);
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
