// Implementation of generate_run.h.
#include "generate/generate_run.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cerrno>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/interrupt_note.h"
#include "core/log.h"
#include "core/output_folder.h"
#include "core/progress.h"
#include "core/std_streams.h"
#include "text/stdin_text.h"
#include "core/terminal_text.h"
#include "generate/batch_output.h"
#include "generate/generate_journal.h"
#include "generate/retrieval_defaults.h"
#include "text/tokenizer.h"
#include "text/utf8.h"

namespace retro {

namespace fs = std::filesystem;

namespace {

// Prompts of a .jsonl file: each line a JSON string or an object with "prompt" (or "text") and an optional "id".
void read_prompts(const std::string& path, std::vector<std::string>& prompts, std::vector<nlohmann::json>& ids,
                  std::vector<std::string>& names) {
    const bool from_stdin = path == "-";   // a pipe: `jq -c ... | retro-generate run/ --prompts - --output out.jsonl`
    std::ifstream file;
    if (!from_stdin) {
        if (std::error_code ec; std::filesystem::is_directory(path, ec))   // (an ifstream opens one and reads no line)
            user_error_in(path, "is a folder, not a prompts file", "give a .jsonl file of prompts, one a line");
        file.open(path);
        if (!file) user_error_in(path, "cannot be opened");
    }
    std::istream& in = from_stdin ? std::cin : file;
    const std::string name = from_stdin ? std::string("standard input") : path;
    std::string line;
    std::int64_t n = 0;
    while (std::getline(in, line)) {
        n++;
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        const std::string where = name + ":" + std::to_string(n);
        nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
        if (j.is_discarded())   // (plain text lines are the usual mistake: how to make JSON lines of them)
            user_error_in(where, "is not valid JSON (a --prompts file holds one JSON string or object a line)",
                          "make JSON lines of a text file's lines with: jq -R . FILE");
        names.push_back(where);
        if (j.is_string()) {
            prompts.push_back(j.get<std::string>());
            ids.push_back(static_cast<std::int64_t>(prompts.size() - 1));
            continue;
        }
        const char* key = j.is_object() && j.contains("prompt") ? "prompt" : "text";
        if (!j.is_object() || !j.contains(key) || !j.at(key).is_string())
            user_error_in(where, "needs a string or an object with a string \"prompt\"");
        // an id that is a number past 64-bit integers, or with a fraction or exponent, would not come back as written
        // (12345678901234567890123 as 1.2345678901234568e+22, two such ids then "the same"; 1e2 as 100.0)
        if (j.contains("id") && j.at("id").is_number_float())
            user_error_in(where, "has the id " + j.at("id").dump() + ", a number that is not a 64-bit integer: it would "
                                 "not come back as written", "give the id as a string, or a whole number");
        prompts.push_back(j.at(key).get<std::string>());
        ids.push_back(j.contains("id") ? j.at("id") : nlohmann::json(static_cast<std::int64_t>(prompts.size() - 1)));
    }
    if (prompts.empty()) user_error_in(name, "holds no prompts");
    // an id joins a result (and its --show-neighbours lines) to its prompt: two prompts with one id cannot be told
    // apart (a line without "id" takes its 0-based position, which an explicit id may repeat)
    std::map<std::string, std::size_t> seen;
    for (std::size_t i = 0; i < ids.size(); i++)
        if (const auto [it, fresh] = seen.emplace(ids[i].dump(), i); !fresh)
            user_error_in(names[i], cat("has the id ", ids[i].dump(), ", as ", names[it->second], " has"),
                          "give each prompt its own \"id\" (a line without one takes its 0-based position)");
}

// Text written to standard output must arrive: a full disk or a closed pipe ends the run at once, named, rather than
// after decoding every token (and its summary line) for nothing.
void stdout_check() {
    errno = 0;
    if (std::fflush(stdout) != 0 || std::ferror(stdout))
        user_error_in("standard output", stdout_write_failed(errno));
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

// `s` on one line (line breaks and tabs as spaces), shown safely and cut to about `max` bytes at a character.
std::string one_line(std::string s, std::size_t max = 160) {
    for (auto& ch : s)
        if (ch == '\n' || ch == '\r' || ch == '\t') ch = ' ';
    return terminal_text_cut(s, max);
}

// `prompt`: the prompt's 0-based index; `id` (batch mode): its id, as its result line has it (to join the two).
// The lines are data (docs/generate.md captures them with `2> n.jsonl`): one that cannot be written (a full disk) is an
// error, exit 2 ("standard error: write failed: No space left on device"), where they were cut short under exit 0 (a
// helper's disk-full campaign, session 56).
void print_neighbours(const Generator& gen, std::int64_t prompt, const ChunkNeighbours& n, bool json,
                      bool batch, const nlohmann::json& id) {
    std::string text;
    if (json) {
        nlohmann::json j = neighbours_json(gen, n, true);
        if (batch) {
            j["prompt"] = prompt;
            j["id"] = id;
        }
        text = json_line(j) + "\n";
    } else {
        const std::int64_t cs = gen.config().chunk_size;
        // (the prompt's line in the file, and its id, the join key --json and the results carry: a numbered line alone
        // read as the id off by one)
        const std::string head =
            batch ? cat("[prompt ", prompt + 1, ", id ", terminal_text(json_line(id), true), "] ") : std::string();
        text = cat("\n", head, "retrieved for chunk ", n.chunk, " (tokens ", n.chunk * cs, "-", n.chunk * cs + cs - 1, "): \"",
                   one_line(gen.tokenizer().decode(std::vector<int>(n.query.begin(), n.query.end()))), "\"\n");
        const auto& db = gen.retriever()->db();
        char score[32];
        for (std::size_t j = 0; j < n.found.ids.size(); j++) {
            const auto found = n.found.ids[j];
            if (found < 0) {
                text += cat("  #", j + 1, "  (none)\n");
                continue;
            }
            std::snprintf(score, sizeof score, "%.3f", n.found.scores[j]);
            text += cat("  #", j + 1, "  chunk ", found, ", doc ", db.doc_of_checked(found), ", score ", score, ": \"",
                        one_line(chunk_text(db, gen.tokenizer(), found)), "\"\n");
        }
    }
    std::fflush(stderr);   // (after any log line stdio holds)
    write_all(STDERR_FILENO, text.data(), text.size(), "standard error");
}

// The line out.jsonl holds for one prompt (and its journal keeps).
nlohmann::json result_json(const Generator& gen, const GenerateResult& r, const nlohmann::json& id) {
    nlohmann::json j = {{"id", id},
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
    return j;
}

// Ctrl-C / SIGTERM in batch mode: one line saying what the journal keeps. Written from the signal handler, so the
// text is formatted beforehand (two buffers: the handler reads the one last finished).
char g_interrupt_text[2][640];
std::atomic<int> g_interrupt_current{-1};

void set_interrupt_text(const std::string& journal, std::size_t kept, std::size_t total) {
    const int next = g_interrupt_current.load() == 0 ? 1 : 0;
    if (kept == 0)   // (no journal is written before the first finished prompt: it named a file that was not there)
        std::snprintf(g_interrupt_text[next], sizeof g_interrupt_text[next],
                      "retro-generate: interrupted before the first of %zu prompts finished; nothing is kept: run the "
                      "same command again\n",
                      total);
    else
        std::snprintf(g_interrupt_text[next], sizeof g_interrupt_text[next],
                      "retro-generate: interrupted; %s keeps %zu of %zu prompts: continue with the same command and "
                      "--resume\n",
                      journal.c_str(), kept, total);
    g_interrupt_current.store(next);
}

extern "C" void on_generate_interrupt(int sig) {
    const int cur = g_interrupt_current.load();
    if (cur >= 0) {
        ssize_t w = ::write(2, g_interrupt_text[cur], std::strlen(g_interrupt_text[cur]));
        (void)w;
    }
    interrupt_note_die(sig);   // by the signal itself: a script running retro-generate stops too
}

// The note as the handler would write it now (a full disk's error line ends with its advice: tool_main).
std::string current_interrupt_text() {
    const int cur = g_interrupt_current.load();
    return cur >= 0 ? std::string(g_interrupt_text[cur]) : std::string();
}

struct StopAfterForTesting {};

}  // namespace

void generate_run(GenerateRunOptions cli) {
    cli.g.stop_at_eos = !cli.ignore_eos;
    retrieval_inputs_default(cli.g);   // --index and --db left out: the ones the run's folders record
    const bool batch = !cli.prompts_file.empty();
    const bool to_stdout = batch && cli.output == "-";   // JSON lines streamed in input order, no journal
    std::vector<std::string> prompts;
    std::vector<nlohmann::json> ids;
    std::vector<std::string> names;
    // the text's destination closed (`>&-`: it went to the /dev/null core/std_streams.h put there, exit 0)
    if ((!batch || to_stdout) && std_stream_was_closed(STDOUT_FILENO))
        user_error_in("standard output", "is closed: the generated text would go nowhere",
                      "redirect it to a file, or give --prompts with --output FILE");
    if (batch) {
        if (!cli.prompt.empty()) user_error_in("prompt", "give either a prompt or --prompts, not both");
        if (cli.output.empty()) user_error_in("--output", "is needed with --prompts", "e.g. --output out.jsonl");
        read_prompts(cli.prompts_file, prompts, ids, names);
        if (to_stdout && cli.resume)
            user_error_in("--resume", "continues a file --output from its journal; standard output has none",
                          "give --output FILE to be able to resume");
        if (!to_stdout) generate_output_check(cli);   // the results are written at the end: checked before the work
    } else {
        if (cli.batch_size_given && cli.g.batch_size >= 1)   // (a bad one is refused as such below)
            log_warn("--batch-size has no effect on a single prompt (it is for --prompts)");
        if (cli.force) log_warn("--force has no effect on a single prompt (it replaces a --prompts run's --output)");
        if (!cli.output.empty()) user_error_in("--output", "is only used with --prompts");
        if (cli.resume) user_error_in("--resume", "is only used with --prompts (a single prompt streams to stdout)");
        if (cli.prompt == "-") cli.prompt.clear();   // `-`: standard input, as --prompts - (it was the prompt "-")
        if (cli.prompt.empty())   // read the prompt from stdin (the generator refuses a long one by its size and tokens)
            cli.prompt = stdin_text_read("prompt", "give the prompt as an argument, or a --prompts file");
        prompts.push_back(cli.prompt);
    }
    if (cli.show_neighbours && cli.g.no_retrieval) log_warn("--show-neighbours has nothing to show with --no-retrieval");
    if (cli.json && !cli.show_neighbours)
        log_warn(batch ? "--json formats --show-neighbours' lines, and there are none (batch results are JSON lines already)"
                       : "--json formats --show-neighbours' lines, and there are none (a single prompt's text goes to "
                         "stdout as it is made; --prompts FILE --output OUT.jsonl writes JSON lines)");

    // batch mode: every finished prompt goes to OUT.partial first; --resume decodes only the prompts it lacks
    std::unique_ptr<GenerateJournal> journal;
    std::vector<std::int64_t> todo;   // positions in the file of the prompts decoded now
    if (to_stdout) {
        for (std::int64_t i = 0; i < static_cast<std::int64_t>(prompts.size()); i++) todo.push_back(i);
    } else if (batch) {
        output_folder_lock(cli.output, "retro-generate");   // one run at a time into one --output (and its journal)
        journal = std::make_unique<GenerateJournal>(cli.output, generate_journal_job(cli, prompts, ids), cli.resume,
                                                    static_cast<std::int64_t>(prompts.size()));
        for (const auto& [i, line] : journal->done())   // a hand-edited journal is not taken for these prompts
            if (!line.is_object() || line.value("prompt", std::string()) != prompts[static_cast<std::size_t>(i)] ||
                !line.contains("id") || line.at("id") != ids[static_cast<std::size_t>(i)])
                user_error_in(journal->path(), cat("holds a result for prompt ", i, " (", names[static_cast<std::size_t>(i)],
                                                   ") whose prompt or id differs from the file's"),
                              "remove " + journal->path() + " to start again");
        if (cli.resume && journal->done().empty() && generate_output_complete(cli.output, prompts, ids)) {
            log_info(cli.output + " already holds a line for each of the " + std::to_string(prompts.size()) +
                     " prompts: nothing to resume (its options are not recorded: remove it to decode again)");
            journal->remove();   // (a stale journal beside the finished file stayed on disk)
            return;
        }
        // a finished --output is kept unless --force: a run into it replaces it only when asked, or when it resumes a
        // journal (the interrupted job was going to replace it)
        if (!cli.force && fs::is_regular_file(cli.output) && !(cli.resume && !journal->done().empty()))
            user_error_in(cli.output, cli.resume ? "exists, and is not this job's finished output (and no journal holds "
                                                   "finished prompts of it)"
                                                 : "exists (the results of an earlier run)",
                          "give --force to replace it, or another --output");
        for (std::int64_t i = 0; i < static_cast<std::int64_t>(prompts.size()); i++)
            if (!journal->done().count(i)) todo.push_back(i);
        if (cli.resume)
            log_info(journal->done().empty()
                         ? "--resume: " + journal->path() + " holds no finished prompt; starting from the first"
                         : cat("--resume: ", journal->path(), " holds ", journal->done().size(), " of ", prompts.size(),
                               " prompts; decoding the other ", todo.size()));
        set_interrupt_text(journal->path(), journal->done().size(), prompts.size());
        // the note counts a prompt once its line is written, before the sync where a run spends most of its writing
        // time (updated after the sync, a SIGTERM there said one prompt fewer than the journal held)
        journal->set_on_written([&, total = prompts.size()](std::size_t kept) { set_interrupt_text(journal->path(), kept, total); });
        interrupt_handlers_install(on_generate_interrupt);
        interrupt_note_source(current_interrupt_text);
    } else {
        todo.push_back(0);
    }

    std::int64_t tokens_made = 0, retrievals = 0;
    bool retrieval = false;
    std::string single_stop;
    const auto t0 = std::chrono::steady_clock::now();
    if (!todo.empty()) {
        std::vector<std::string> todo_prompts, todo_names;
        for (auto i : todo) {
            todo_prompts.push_back(prompts[static_cast<std::size_t>(i)]);
            if (batch) todo_names.push_back(names[static_cast<std::size_t>(i)]);
        }
        // no more sequences at once than there are prompts (the memory check sizes the batch)
        cli.g.batch_size = std::min<std::int64_t>(cli.g.batch_size, static_cast<std::int64_t>(todo.size()));
        Generator gen(cli.g);
        gen.set_prompt_names(todo_names);
        gen.set_prompt_streams(todo);
        retrieval = gen.retrieval();
        GenerateCallbacks cb;
        if (cli.show_neighbours && gen.retrieval())
            cb.on_retrieval = [&](std::int64_t i, const ChunkNeighbours& n) {
                std::fflush(stdout);
                const std::int64_t index = todo[static_cast<std::size_t>(i)];
                print_neighbours(gen, index, n, cli.json, batch,
                                 batch ? ids[static_cast<std::size_t>(index)] : nlohmann::json());
            };
        std::unique_ptr<Progress> progress;
        std::int64_t finished_now = 0, printed = 0;
        std::map<std::int64_t, nlohmann::json> finished;   // --output -: lines waiting for an earlier prompt
        if (batch) {
            progress = std::make_unique<Progress>("generate", static_cast<std::int64_t>(todo.size()), "prompts");
            cb.on_done = [&](std::int64_t i, const GenerateResult& r) {
                const std::int64_t index = todo[static_cast<std::size_t>(i)];
                nlohmann::json line = result_json(gen, r, ids[static_cast<std::size_t>(index)]);
                if (journal) {
                    journal->add(index, line);   // (the interrupt note follows it: set_on_written below)
                } else {   // standard output: each line once every earlier prompt's is out
                    finished[index] = std::move(line);
                    for (auto it = finished.find(printed); it != finished.end(); it = finished.find(++printed)) {
                        const std::string text =
                            it->second.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
                        std::fwrite(text.data(), 1, text.size(), stdout);
                        finished.erase(it);
                    }
                    stdout_check();
                }
                progress->add(1);
                if (cli.stop_after > 0 && ++finished_now >= cli.stop_after) throw StopAfterForTesting{};
            };
        } else {
            cb.on_text = [](std::int64_t, const std::string& text) {
                std::fwrite(text.data(), 1, text.size(), stdout);
                stdout_check();
            };
        }
        std::vector<GenerateResult> results;
        try {
            results = gen.generate(todo_prompts, cb);
        } catch (const StopAfterForTesting&) {
            log_info(cat("stopped after ", finished_now, " prompts (--stop-after)",
                         journal ? cat("; ", journal->path(), " keeps ", journal->done().size()) : std::string()));
            return;
        }
        if (progress) progress->finish();
        tokens_made = gen.tokens_made();
        retrievals = gen.retrievals();
        if (!batch) single_stop = results[0].stop;
    } else {
        log_info(cat("every prompt is finished in ", journal->path(), "; writing ", cli.output));
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (journal) {
        AtomicFile f(cli.output);
        for (std::int64_t i = 0; i < static_cast<std::int64_t>(prompts.size()); i++)
            f.write(journal->done().at(i).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
        f.commit();
        journal->remove();   // after the commit: a kill between the two leaves a journal older than the output (stale)
        interrupt_note_clear();   // nothing left to keep: the interrupt line would name a removed journal
    } else if (!batch) {
        std::fputc('\n', stdout);
        stdout_check();
    }
    const double made = static_cast<double>(tokens_made);
    const std::size_t kept = prompts.size() - todo.size();
    log_info(cat("made ", tokens_made, " tokens for ", todo.size(), " prompt(s) in ", format_seconds(secs), " (",
                 made > 0 ? made / secs : 0.0, " tokens/s), ", retrievals, " retrievals",
                 todo.empty() || retrieval ? "" : " (no retrieval)",
                 kept > 0 ? cat(", ", kept, " more kept from the journal") : std::string(),
                 batch ? std::string() : ", stop: " + single_stop));
}


}  // namespace retro
