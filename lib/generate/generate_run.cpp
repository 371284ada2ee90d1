// Implementation of generate_run.h.
#include "generate/generate_run.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/log.h"
#include "core/progress.h"
#include "text/tokenizer.h"

namespace retro {

namespace fs = std::filesystem;

namespace {

// Prompts of a .jsonl file: each line a JSON string or an object with "prompt" (or "text") and an optional "id".
void read_prompts(const std::string& path, std::vector<std::string>& prompts, std::vector<nlohmann::json>& ids,
                  std::vector<std::string>& names) {
    std::ifstream in(path);
    if (!in) user_error_in(path, "cannot be opened");
    std::string line;
    std::int64_t n = 0;
    while (std::getline(in, line)) {
        n++;
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        const std::string where = path + ":" + std::to_string(n);
        nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
        if (j.is_discarded()) user_error_in(where, "is not valid JSON");
        names.push_back(where);
        if (j.is_string()) {
            prompts.push_back(j.get<std::string>());
            ids.push_back(static_cast<std::int64_t>(prompts.size() - 1));
            continue;
        }
        const char* key = j.is_object() && j.contains("prompt") ? "prompt" : "text";
        if (!j.is_object() || !j.contains(key) || !j.at(key).is_string())
            user_error_in(where, "needs a string or an object with a string \"prompt\"");
        prompts.push_back(j.at(key).get<std::string>());
        ids.push_back(j.contains("id") ? j.at("id") : nlohmann::json(static_cast<std::int64_t>(prompts.size() - 1)));
    }
    if (prompts.empty()) user_error_in(path, "holds no prompts");
}

nlohmann::json neighbours_json(const Generator& gen, const ChunkNeighbours& n, bool with_text) {
    nlohmann::json j = {{"chunk", n.chunk}, {"query", n.query}, {"ids", n.found.ids}, {"scores", n.found.scores}};
    if (with_text) {
        j["query_text"] = gen.tokenizer().decode(std::vector<int>(n.query.begin(), n.query.end()));
        nlohmann::json texts = nlohmann::json::array();
        for (auto id : n.found.ids)
            texts.push_back(id < 0 ? std::string() : chunk_text(gen.retriever()->db(), gen.tokenizer(), id));
        j["texts"] = texts;
    }
    return j;
}

std::string one_line(std::string s, std::size_t max = 160) {
    for (auto& ch : s)
        if (ch == '\n' || ch == '\r' || ch == '\t') ch = ' ';
    if (s.size() > max) s = s.substr(0, max) + "...";
    return s;
}

void print_neighbours(const Generator& gen, std::int64_t prompt, const ChunkNeighbours& n, bool json,
                      bool batch) {
    if (json) {
        nlohmann::json j = neighbours_json(gen, n, true);
        if (batch) j["prompt"] = prompt;
        std::fprintf(stderr, "%s\n", j.dump().c_str());
        return;
    }
    const std::int64_t cs = gen.config().chunk_size;
    std::string head = batch ? cat("[prompt ", prompt + 1, "] ") : std::string();
    std::fprintf(stderr, "\n%sretrieved for chunk %lld (tokens %lld-%lld): \"%s\"\n", head.c_str(),
                 static_cast<long long>(n.chunk), static_cast<long long>(n.chunk * cs),
                 static_cast<long long>(n.chunk * cs + cs - 1),
                 one_line(gen.tokenizer().decode(std::vector<int>(n.query.begin(), n.query.end()))).c_str());
    const auto& db = gen.retriever()->db();
    for (std::size_t j = 0; j < n.found.ids.size(); j++) {
        const auto id = n.found.ids[j];
        if (id < 0) {
            std::fprintf(stderr, "  #%zu  (none)\n", j + 1);
            continue;
        }
        std::fprintf(stderr, "  #%zu  chunk %lld, doc %lld, score %.3f: \"%s\"\n", j + 1, static_cast<long long>(id),
                     static_cast<long long>(db.doc_of_checked(id)), n.found.scores[j],
                     one_line(chunk_text(db, gen.tokenizer(), id)).c_str());
    }
}

}  // namespace

void generate_run(GenerateRunOptions cli) {
    cli.g.stop_at_eos = !cli.ignore_eos;
    const bool batch = !cli.prompts_file.empty();
    std::vector<std::string> prompts;
    std::vector<nlohmann::json> ids;
    std::vector<std::string> names;
    if (batch) {
        if (!cli.prompt.empty()) user_error_in("prompt", "give either a prompt or --prompts, not both");
        if (cli.output.empty()) user_error_in("--output", "is needed with --prompts", "e.g. --output out.jsonl");
        read_prompts(cli.prompts_file, prompts, ids, names);
        // the results are written at the end: a bad --output is refused before the work, not after it
        std::error_code ec;
        if (fs::exists(cli.output) && fs::equivalent(cli.output, cli.prompts_file, ec))
            user_error_in(cli.output, "is the --prompts file: the results would replace the prompts",
                          "give another --output");
        const fs::path parent = fs::absolute(cli.output).parent_path();
        if (!fs::is_directory(parent)) user_error_in(cli.output, "cannot be written: " + parent.string() + " is not a folder");
        if (::access(parent.c_str(), W_OK) != 0)
            user_error_in(cli.output, "cannot be written: " + parent.string() + " is not writable");
        // no more sequences at once than there are prompts (the memory check sizes the batch)
        cli.g.batch_size = std::min<std::int64_t>(cli.g.batch_size, static_cast<std::int64_t>(prompts.size()));
    } else {
        if (!cli.output.empty()) user_error_in("--output", "is only used with --prompts");
        if (cli.prompt.empty()) {   // read the prompt from stdin
            std::ostringstream ss;
            ss << std::cin.rdbuf();
            cli.prompt = ss.str();
            while (!cli.prompt.empty() && (cli.prompt.back() == '\n' || cli.prompt.back() == '\r')) cli.prompt.pop_back();
        }
        prompts.push_back(cli.prompt);
    }
    if (cli.show_neighbours && cli.g.no_retrieval) log_warn("--show-neighbours has nothing to show with --no-retrieval");
    if (cli.json && !cli.show_neighbours)
        log_warn("--json formats --show-neighbours' lines, and there are none (batch results are JSON lines already)");

    Generator gen(cli.g);
    gen.set_prompt_names(names);
    GenerateCallbacks cb;
    if (cli.show_neighbours && gen.retrieval())
        cb.on_retrieval = [&](std::int64_t i, const ChunkNeighbours& n) {
            std::fflush(stdout);
            print_neighbours(gen, i, n, cli.json, batch);
        };
    std::unique_ptr<Progress> progress;
    if (batch) {
        progress = std::make_unique<Progress>("generate", static_cast<std::int64_t>(prompts.size()), "prompts");
        cb.on_done = [&](std::int64_t, const GenerateResult&) { progress->add(1); };
    } else {
        cb.on_text = [](std::int64_t, const std::string& text) {
            std::fwrite(text.data(), 1, text.size(), stdout);
            std::fflush(stdout);
        };
    }
    const auto t0 = std::chrono::steady_clock::now();
    const auto results = gen.generate(prompts, cb);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (progress) progress->finish();
    if (batch) {
        AtomicFile f(cli.output);
        for (std::size_t i = 0; i < results.size(); i++) {
            const auto& r = results[i];
            nlohmann::json j = {{"id", ids[i]},
                                {"prompt", r.prompt},
                                {"completion", r.completion},
                                {"prompt_tokens", r.prompt_ids.size()},
                                {"completion_tokens", r.ids.size()},
                                {"stop", r.stop}};
            if (gen.retrieval()) {
                nlohmann::json ns = nlohmann::json::array();
                for (const auto& n : r.neighbours) ns.push_back(neighbours_json(gen, n, false));
                j["neighbours"] = ns;
            }
            f.write(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
        }
        f.commit();
    } else {
        std::fputc('\n', stdout);
        std::fflush(stdout);
    }
    const double made = static_cast<double>(gen.tokens_made());
    log_info(cat("made ", gen.tokens_made(), " tokens for ", results.size(), " prompt(s) in ",
                               format_seconds(secs), " (", made > 0 ? made / secs : 0.0, " tokens/s), ",
                               gen.retrievals(), " retrievals", gen.retrieval() ? "" : " (no retrieval)",
                               results.size() == 1 ? ", stop: " + results[0].stop : std::string()));
}


}  // namespace retro
