// retro-generate: sample text from a trained RETRO run, retrieving for every finished chunk
// (lib/generate/generator.h). One prompt (argument or stdin) streams its continuation to stdout;
// --prompts in.jsonl --output out.jsonl decodes many prompts together. Retrieval notes and the summary
// go to stderr.
#include <chrono>
#include <cstdio>
#include <memory>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/log.h"
#include "core/progress.h"
#include "core/tool.h"
#include "generate/generator.h"
#include "text/tokenizer.h"

namespace {

struct Cli {
    retro::GenerateOptions g;
    std::string prompt, prompts_file, output;
    bool show_neighbours = false, json = false, ignore_eos = false;
};

// Prompts of a .jsonl file: each line a JSON string or an object with "prompt" (or "text") and an optional "id".
void read_prompts(const std::string& path, std::vector<std::string>& prompts, std::vector<nlohmann::json>& ids) {
    std::ifstream in(path);
    if (!in) retro::user_error_in(path, "cannot be opened");
    std::string line;
    std::int64_t n = 0;
    while (std::getline(in, line)) {
        n++;
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        const std::string where = path + ":" + std::to_string(n);
        nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
        if (j.is_discarded()) retro::user_error_in(where, "is not valid JSON");
        if (j.is_string()) {
            prompts.push_back(j.get<std::string>());
            ids.push_back(static_cast<std::int64_t>(prompts.size() - 1));
            continue;
        }
        const char* key = j.is_object() && j.contains("prompt") ? "prompt" : "text";
        if (!j.is_object() || !j.contains(key) || !j.at(key).is_string())
            retro::user_error_in(where, "needs a string or an object with a string \"prompt\"");
        prompts.push_back(j.at(key).get<std::string>());
        ids.push_back(j.contains("id") ? j.at("id") : nlohmann::json(static_cast<std::int64_t>(prompts.size() - 1)));
    }
    if (prompts.empty()) retro::user_error_in(path, "holds no prompts");
}

nlohmann::json neighbours_json(const retro::Generator& gen, const retro::ChunkNeighbours& n, bool with_text) {
    nlohmann::json j = {{"chunk", n.chunk}, {"query", n.query}, {"ids", n.found.ids}, {"scores", n.found.scores}};
    if (with_text) {
        j["query_text"] = gen.tokenizer().decode(std::vector<int>(n.query.begin(), n.query.end()));
        nlohmann::json texts = nlohmann::json::array();
        for (auto id : n.found.ids)
            texts.push_back(id < 0 ? std::string() : retro::chunk_text(gen.retriever()->db(), gen.tokenizer(), id));
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

void print_neighbours(const retro::Generator& gen, std::int64_t prompt, const retro::ChunkNeighbours& n, bool json,
                      bool batch) {
    if (json) {
        nlohmann::json j = neighbours_json(gen, n, true);
        if (batch) j["prompt"] = prompt;
        std::fprintf(stderr, "%s\n", j.dump().c_str());
        return;
    }
    const std::int64_t cs = gen.config().chunk_size;
    std::string head = batch ? retro::cat("[prompt ", prompt + 1, "] ") : std::string();
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
                     static_cast<long long>(db.doc_of(id)), n.found.scores[j],
                     one_line(retro::chunk_text(db, gen.tokenizer(), id)).c_str());
    }
}

void run(const retro::ToolContext& ctx, Cli& cli) {
    cli.g.stop_at_eos = !cli.ignore_eos;
    const bool batch = !cli.prompts_file.empty();
    std::vector<std::string> prompts;
    std::vector<nlohmann::json> ids;
    if (batch) {
        if (!cli.prompt.empty()) retro::user_error_in("prompt", "give either a prompt or --prompts, not both");
        if (cli.output.empty()) retro::user_error_in("--output", "is needed with --prompts", "e.g. --output out.jsonl");
        read_prompts(cli.prompts_file, prompts, ids);
    } else {
        if (!cli.output.empty()) retro::user_error_in("--output", "is only used with --prompts");
        if (cli.prompt.empty()) {   // read the prompt from stdin
            std::ostringstream ss;
            ss << std::cin.rdbuf();
            cli.prompt = ss.str();
            while (!cli.prompt.empty() && (cli.prompt.back() == '\n' || cli.prompt.back() == '\r')) cli.prompt.pop_back();
        }
        prompts.push_back(cli.prompt);
    }
    if (cli.show_neighbours && cli.g.no_retrieval) retro::log_warn("--show-neighbours has nothing to show with --no-retrieval");

    retro::Generator gen(cli.g);
    retro::GenerateCallbacks cb;
    if (cli.show_neighbours && gen.retrieval())
        cb.on_retrieval = [&](std::int64_t i, const retro::ChunkNeighbours& n) {
            std::fflush(stdout);
            print_neighbours(gen, i, n, cli.json, batch);
        };
    std::unique_ptr<retro::Progress> progress;
    if (batch) {
        progress = std::make_unique<retro::Progress>("generate", static_cast<std::int64_t>(prompts.size()), "prompts");
        cb.on_done = [&](std::int64_t, const retro::GenerateResult&) { progress->add(1); };
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
        retro::AtomicFile f(cli.output);
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
    retro::log_info(retro::cat("made ", gen.tokens_made(), " tokens for ", results.size(), " prompt(s) in ",
                               retro::format_seconds(secs), " (", made > 0 ? made / secs : 0.0, " tokens/s), ",
                               gen.retrievals(), " retrievals", gen.retrieval() ? "" : " (no retrieval)",
                               results.size() == 1 ? ", stop: " + results[0].stop : std::string()));
    (void)ctx;
}

}  // namespace

int main(int argc, char** argv) {
    return retro::tool_main(
        "retro-generate",
        "Generate text from a trained RETRO run, retrieving neighbours for every finished chunk.\n"
        "  retro-generate run/ --index index/ --db db/ \"The Python tutorial\"", argc, argv,
        [](CLI::App& app, retro::ToolContext& ctx) -> retro::ToolAction {
            static Cli cli;
            auto& g = cli.g;
            g.sampler.top_p = 0.9;   // defaults: T = 1, nucleus 0.9, no top-k
            app.add_option("run", g.run, "Run folder from retro-train (config.json, model.safetensors)")->required();
            app.add_option("prompt", cli.prompt, "Prompt text (default: read from stdin)");
            app.add_option("--index", g.index, "Index folder (retro-index) to retrieve from");
            app.add_option("--db", g.db, "Chunk database the index was built from (its tokenizer is used)");
            app.add_option("--tokenizer", g.tokenizer, "Tokenizer model (default: the database's)");
            app.add_option("--checkpoint", g.checkpoint, "Weights other than RUN/model.safetensors: a checkpoint folder or .safetensors");
            app.add_option("--max-tokens", g.max_tokens, "Tokens to generate at most (also capped by the model's max_seq_len)")->capture_default_str();
            app.add_option("--temperature", g.sampler.temperature, "Softmax temperature (> 0)")->capture_default_str();
            app.add_option("--top-k", g.sampler.top_k, "Keep the k most likely tokens (0 = off)")->capture_default_str();
            app.add_option("--top-p", g.sampler.top_p, "Nucleus: keep the most likely tokens up to this probability mass, in (0, 1] (1 = off)")->capture_default_str();
            app.add_flag("--greedy", g.sampler.greedy, "Always take the most likely token (ignores temperature, top-k, top-p)");
            app.add_option("--seed", g.seed, "Random seed; one seed gives one text")->capture_default_str();
            app.add_flag("--no-retrieval", g.no_retrieval, "Generate without neighbours (CCA skipped), the baseline");
            app.add_flag("--show-neighbours", cli.show_neighbours, "Print each retrieved chunk's neighbours on stderr");
            app.add_flag("--json", cli.json, "With --show-neighbours: JSON lines instead of text");
            app.add_option("--prompts", cli.prompts_file, "Batch mode: a .jsonl of prompts (strings or {\"prompt\": ..., \"id\": ...})");
            app.add_option("--output", cli.output, "Batch mode: write results here as .jsonl (atomically)");
            app.add_option("--batch-size", g.batch_size, "Batch mode: prompts decoded together")->capture_default_str();
            app.add_flag("--ignore-eos", cli.ignore_eos, "Keep going after an end-of-text token");
            app.add_flag("--allow-other-db", g.allow_other_db, "Retrieve from a database other than the run's (same tokenizer)");
            app.add_option("--nprobe", g.nprobe, "IVF lists to search (0 = as the index was saved)");
            app.add_option("--ef-search", g.ef_search, "HNSW search depth (0 = as saved)");
            app.add_option("--threads", ctx.threads, "Threads (0 = all cores)");
            return [&ctx] { run(ctx, cli); };
        });
}
