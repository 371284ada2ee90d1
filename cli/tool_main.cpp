// Implementation of tool_main.h.
#include "tool_main.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <iterator>
#include <limits>
#include <filesystem>
#include <new>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "core/blas_core.h"
#include "core/distributed.h"
#include "core/edit_distance.h"
#include "core/error.h"
#include "core/input_stamps.h"
#include "core/interrupt_note.h"
#include "core/log.h"
#include "core/manifest.h"
#include "core/shell_quote.h"
#include "core/heap.h"
#include "core/memory_budget.h"
#include "core/output_folder.h"
#include "core/std_streams.h"
#include "core/terminal_text.h"
#include "core/threads.h"
#include "model/config_files.h"
#include "text/utf8.h"
#include "retrokit/version.h"
#include "man_page.h"
#include "shell_completion.h"
#include "subcommand_word.h"

namespace retro {

namespace {

// CLI11's help ends with an empty line (its options section's own newline, then the footer's); every tool's and
// subcommand's help here ends with its last line instead.
class TrimmedHelpFormatter : public CLI::Formatter {
public:
    std::string make_help(const CLI::App* app, std::string name, CLI::AppFormatMode mode) const override {
        std::string help = CLI::Formatter::make_help(app, std::move(name), mode);
        while (help.size() >= 2 && help[help.size() - 1] == '\n' && help[help.size() - 2] == '\n') help.pop_back();
        return help;
    }
};

constexpr int kMaxThreads = 4096;

// CLI11's messages joined onto one line (a few hold newlines), and CLI::PositiveNumber's "Value 0 not in range
// 0.000000 to 1797693...(309 digits).000000" said as what it means.
std::string one_line(std::string s) {
    for (char& c : s)
        if (c == '\n' || c == '\r') c = ' ';
    while (!s.empty() && s.back() == ' ') s.pop_back();
    static const std::regex unbounded(R"(Value (\S+) not in range (0|0\.0+) to [0-9]{18,}(\.[0-9]+)?)");
    return std::regex_replace(s, unbounded, "value $1 must be positive");
}

// "filesystem error: cannot create directories: Not a directory [afile]" as "afile: cannot create directories: Not a
// directory".
std::string filesystem_message(const std::filesystem::filesystem_error& e) {
    std::string what = e.what();
    const std::string prefix = "filesystem error: ";
    if (what.rfind(prefix, 0) == 0) what.erase(0, prefix.size());
    if (const auto bracket = what.find(" ["); bracket != std::string::npos) what.erase(bracket);
    const std::string path = e.path1().string();
    return (path.empty() ? std::string("(an empty path)") : path) + ": " + what;
}

// A JSON field of the wrong type or a missing one, met after the JSON files were parsed: the files this run read,
// newest first (at most three), since nlohmann's message names only the field's type.
std::string json_field_message(const nlohmann::json::exception& e, const std::vector<std::string>& files) {
    std::string names;
    for (std::size_t i = 0; i < files.size() && i < 3; ++i) names += (i ? ", " : "") + files[files.size() - 1 - i];
    if (files.size() > 3) names += cat(" and ", files.size() - 3, " more");
    return cat("a JSON file this run read holds a field of the wrong type or lacks one (", e.what(), "); read: ", names,
               " (fix: a hand-edited or damaged file? make it again with the tool that wrote it)");
}

// Decimal digits (a leading '-' where `signed_values`), read as decimal: CLI11 reads "010" as octal 8 and "0x10" as
// 16, and saturates a value past the type's range silently; "-1" into an unsigned option is 2^64 - 1.
CLI::Validator decimal_integer(bool signed_values) {
    return CLI::Validator(
        [signed_values](std::string& value) -> std::string {
            const auto a = value.find_first_not_of(" \t"), b = value.find_last_not_of(" \t");
            if (a == std::string::npos) return "value is empty: give a whole number";
            std::string digits = value.substr(a, b - a + 1);
            std::string sign;
            if (digits[0] == '-' && !signed_values) return "value " + value + " is negative: give a whole number >= 0";
            if (digits[0] == '-' || digits[0] == '+') {
                if (digits[0] == '-') sign = "-";
                digits.erase(0, 1);
            }
            if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos)
                return "value " + value + " is not a whole number: give decimal digits";
            digits.erase(0, std::min(digits.find_first_not_of('0'), digits.size() - 1));
            errno = 0;
            if (signed_values) (void)std::strtoll((sign + digits).c_str(), nullptr, 10);
            else (void)std::strtoull(digits.c_str(), nullptr, 10);
            if (errno == ERANGE)
                return "value " + value + " is out of range" +
                       (signed_values ? std::string() : std::string(": at most 18446744073709551615"));
            value = sign + digits;
            return std::string();
        },
        "");
}

// A real number option's value in decimal: CLI11 took C's hex floats (`--lr 0x10` trained at 16, `--lr 0x1p-10`) where
// integer options refuse hex, and a literal too small for a double read as 0 (`--clip 1e-400`: clipping off, the
// opposite of what was asked). nan and inf pass to refuse_non_finite_numbers, which names them.
CLI::Validator decimal_number() {
    return CLI::Validator(
        [](std::string& value) -> std::string {
            if (value.find_first_of("xX") != std::string::npos)
                return "value " + value + " is not a decimal number: give digits (hex floats are not read)";
            const char* text = value.c_str();
            char* end = nullptr;
            errno = 0;
            const double v = std::strtod(text, &end);
            const bool nonzero_digit = value.find_first_of("123456789") < value.find_first_of("eE");
            if (errno == ERANGE && v == 0 && nonzero_digit)
                return "value " + value + " is too small for a double: it would be read as 0";
            return std::string();
        },
        "");
}

// An option given twice takes its last value, as Python's argparse does (`retro-generate $COMMON --seed 4` overrides a
// script's default; CLI11's default refuses it: "At Most 1 required but received 2"). Single-value named options
// only: positional lists (shards, input files) keep every value.
// Every integer option (and list of integers) also reads its values as decimal (decimal_integer), every real number
// option its values as decimal and not underflowing (decimal_number).
void normalize_options(CLI::App& app) {
    for (CLI::Option* opt : app.get_options()) {
        if (!opt->get_positional() && opt->get_items_expected_max() == 1 &&
            opt->get_multi_option_policy() != CLI::MultiOptionPolicy::Join)   // (comma_list_of's string lists add up)
            opt->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
        const std::string type = opt->get_type_name();
        if (type.rfind("INT", 0) == 0 || type.rfind("UINT", 0) == 0) opt->transform(decimal_integer(type[0] == 'I'));
        if (type.rfind("FLOAT", 0) == 0) opt->transform(decimal_number());
        // a flag given a value (`--no-retrieval=false` trained with retrieval, `--force=false` forced): refused
        if (!opt->get_positional() && opt->get_expected_max() == 0) opt->disable_flag_override();
    }
    for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) normalize_options(*sub);
}

// The option a user meant where the tools name one thing two ways (a new user's pass, session 54: `retro-generate
// --out o.jsonl`, `retro-train eval --out e.json`): "" where none is known.
std::string option_meant(const std::string& command, const std::string& option) {
    static const std::vector<std::tuple<std::string, std::string, std::string>> kMeant = {
        {"retro-generate", "--out", "--output FILE (a --prompts run's JSON lines)"},
        {"retro-generate", "--json-out", "--output FILE (a --prompts run's JSON lines)"},
        {"retro-train eval", "--out", "--json-out FILE (the report as JSON)"},
        {"retro-train eval", "--output", "--json-out FILE (the report as JSON)"},
        {"retro-train plot", "--output", "--out FILE.png"},
        {"retro-generate", "--prompt", "the word after RUN: retro-generate RUN \"The prompt\" (or - for standard input; "
                                       "--prompts FILE.jsonl for many)"},
    };
    for (const auto& [cmd, given, meant] : kMeant)
        if (cmd == command && given == option) return "the option is " + meant;
    return "";
}

// What the peers call an option RetroKit names otherwise (Megatron-LM's and Hugging Face's flags, FAISS's k, PyTorch
// scripts' habits), dashes for underscores: the one meant where the command has it.
const std::vector<std::pair<std::string, std::string>>& peer_option_names() {
    static const std::vector<std::pair<std::string, std::string>> kNames = {
        {"k", "neighbours"},                 {"num-neighbours", "neighbours"}, {"num-neighbors", "neighbours"},
        {"retro-num-neighbors", "neighbours"}, {"max-new-tokens", "max-tokens"}, {"learning-rate", "lr"},
        {"max-steps", "steps"},              {"num-steps", "steps"},           {"train-iters", "steps"},
        {"iters", "steps"},                  {"output-dir", "out"},            {"num-threads", "threads"},
        {"nthreads", "threads"},             {"micro-batch-size", "batch-size"}, {"global-batch-size", "batch-size"},
    };
    return kNames;
}

// Long option names `given` may be a misspelling of among `command`'s (and those a subcommand takes from its tool):
// within a small edit distance (`--neighbour`, `--neighbors`: --neighbours; `--nprob`: --nprobe; `--otu`: --out), or starting with
// it (3 letters at least), or ending with it (`--tokens`: --max-tokens), or the peers' name for it (`--max-new-tokens`:
// --max-tokens); --help and --version only for a word starting as they do; the closest first, three at most.
std::vector<std::string> options_near(const CLI::App& tool, const CLI::App& command, const std::string& given) {
    std::string word = given.substr(given.find_first_not_of('-') == std::string::npos ? given.size() : given.find_first_not_of('-'));
    std::transform(word.begin(), word.end(), word.begin(), [](unsigned char c) { return std::tolower(c); });
    if (word.empty()) return {};   // (`---`)
    std::string dashed = word;
    std::replace(dashed.begin(), dashed.end(), '_', '-');
    std::vector<std::pair<std::size_t, std::string>> near;
    const auto consider = [&](const CLI::Option* opt) {   // (an option once, by its nearest name)
        if (!shown_in_help(*opt)) return;
        std::optional<std::pair<std::size_t, std::string>> best;
        for (const std::string& spelt : opt->get_lnames()) {
            std::string name = spelt;   // (case-folded on both sides: `--t` is retro-bench retention's --T)
            std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
            const bool peers = std::any_of(peer_option_names().begin(), peer_option_names().end(),
                                           [&](const auto& n) { return n.first == dashed && n.second == name; });
            std::size_t d = peers ? 0 : edit_distance(word, name);
            const bool starts = word.size() >= 3 && name.rfind(word, 0) == 0;
            // the last part of a name (`--tokens`: --max-tokens; `--every`: --val-every), as near as one edit
            const bool ends = word.size() >= 4 && name.size() > word.size() && name.ends_with("-" + word);
            if (ends) d = std::min<std::size_t>(d, 1);
            if (!peers && !near_misspelling(d, name) && !starts && !ends) continue;
            // --help and --version only for a word that starts as they do (`--temp` is not --help at 2 edits)
            if ((name == "help" || name == "version") && word.front() != name.front()) continue;
            const std::pair<std::size_t, std::string> here(starts ? 0 : d, "--" + spelt);
            if (!best || here.first < best->first) best = here;
        }
        if (best) near.push_back(*best);
    };
    for (const CLI::Option* opt : command.get_options()) consider(opt);
    if (&command != &tool)
        for (const CLI::Option* opt : tool.get_options())
            if (passes_to_subcommands(*opt)) consider(opt);
    std::sort(near.begin(), near.end());
    std::vector<std::string> names;
    for (const auto& [d, name] : near)
        if (names.size() < 3 && std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    return names;
}

// CLI11's "The following arguments were not expected: C B A" (its words in reverse, an unknown option among them
// as one more word) made one line in the words' order: the unknown option named first, with the options near it
// (`--neighbour 3`: "did you mean --neighbours?"), or the words no positional took (`retro-train db/ knn/`).
void extras_message(const CLI::App& tool, const CLI::App& command_app, const std::string& command, std::string& message,
                    std::string& fix) {
    const std::vector<std::string> extras = tool.remaining(true);
    if (extras.empty()) return;
    std::string words;
    for (const std::string& w : extras) words += (words.empty() ? "'" : " '") + w + "'";
    // (after `--` every word is a positional's)
    const auto option = std::find_if(extras.begin(), std::find(extras.begin(), extras.end(), "--"),
                                     [](const std::string& w) { return w.size() > 1 && w[0] == '-'; });
    if (option == std::find(extras.begin(), extras.end(), "--")) {
        const auto positionals = command_app.get_options([](const CLI::Option* o) { return o->get_positional(); });
        message = cat(words, ": left over (", command, " takes no ", positionals.empty() ? "" : "more ", "positional arguments)");
        fix = positionals.empty() ? "give its inputs by their options: see " + command + " --help"
                                  : "quote a text with spaces, or see " + command + " --help";
        return;
    }
    const std::string name = option->substr(0, option->find('='));
    if (name == "--man" || name == "--completion") {   // (tool_main takes them as the first word only, before parsing)
        message = cat(name, ": comes alone after the tool's name");
        fix = name == "--man" ? cat(tool.get_name(), " --man (man -l <(", tool.get_name(), " --man))")
                              : cat("source <(", tool.get_name(), " --completion bash)");
        return;
    }
    message = cat(name, ": not an option of ", command, extras.size() > 1 ? cat(" (the words not taken: ", words, ")") : "");
    if (const std::string meant = option_meant(command, name); !meant.empty()) {
        fix = meant;
        return;
    }
    const std::vector<std::string> near = options_near(tool, command_app, name);
    if (near.empty()) return;
    std::string list;
    for (std::size_t i = 0; i < near.size(); ++i) list += (i == 0 ? "" : i + 1 == near.size() ? " or " : ", ") + near[i];
    fix = "did you mean " + list + "? see " + command + " --help";
}

// A command's form from its declarations, for a refusal of a missing positional (`retro-knn show`: "knn is required"
// alone): its positionals in capitals (a list with "...", an optional one in brackets), then its required options.
std::string usage_form(const CLI::App& command, const std::string& command_line) {
    std::string form = command_line;
    for (const CLI::Option* opt : command.get_options([](const CLI::Option* o) { return o->get_positional(); })) {
        std::string name = opt->get_name();
        std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::toupper(c); });
        if (opt->get_expected_max() > 1) name += "...";
        form += " " + (opt->get_required() ? name : "[" + name + "]");
    }
    for (const CLI::Option* opt : command.get_options()) {
        if (opt->get_positional() || !opt->get_required() || opt->get_lnames().empty()) continue;
        std::string value = opt->get_lnames().front();
        std::transform(value.begin(), value.end(), value.begin(), [](unsigned char c) { return std::toupper(c); });
        form += " --" + opt->get_lnames().front() + " " + value;
    }
    return form + " [OPTIONS]";
}

// The tool's own options given with a subcommand (`retro-chunk merge a b --out db --tokenizer t`: app.fallthrough()
// lets CLI11 match --tokenizer on retro-chunk itself) would be ignored by the subcommand without a word: refused. Passed:
// the log level and --threads (every subcommand's are the same variables), hidden options (the deprecated spellings a
// subcommand reads from the tool, test hooks), and --no-verify where the subcommand has none of its own.
void refuse_parent_options(const CLI::App& app) {
    const std::vector<CLI::App*> given = app.get_subcommands();
    if (given.empty()) return;
    const CLI::App& sub = *given.front();
    const std::string tool = app.get_name(), sub_line = tool + " " + sub.get_name();
    for (const CLI::Option* opt : app.get_options()) {
        if (opt->count() == 0 || !shown_in_help(*opt)) continue;
        if (opt->get_positional()) {   // a word the subcommand's own positionals did not take
            user_error_in(sub_line, cat("takes no argument '", opt->results().front(), "' there"),
                          "quote a text with spaces, or see " + sub_line + " --help");
        }
        const std::string name = opt->get_lnames().empty() ? opt->get_name() : "--" + opt->get_lnames().front();
        if (passes_to_subcommands(*opt) || name == "--help") continue;
        const bool sub_has = sub.get_option_no_throw(name) != nullptr;
        if (name == "--no-verify" && !sub_has) continue;
        if (sub_has)
            user_error_in(name, cat("was given before `", sub.get_name(), "`, where it is ", tool, "'s own option"),
                          cat("give it after `", sub.get_name(), "`: ", sub_line, " ... ", name));
        const std::string meant = option_meant(sub_line, name);
        user_error_in(name, cat("is an option of ", tool, " itself, not of `", sub_line, "`, which would ignore it"),
                      meant.empty() ? cat("drop it, or see ", sub_line, " --help") : meant);
    }
}

// CLI11 drops the empty items of a comma-separated list (`--T 32,,64` ran 32 and 64, `--nprobe 8,` one value) without
// a word: a typo (a value left out) would go unnoticed in a benchmark's rows. Refused, naming the option. The value
// is read from argv as given: `--T=32,,64`, or the words after `--T` up to the next option (a list option takes them
// all: `--T 32 ,,64`), joined as they stand, so `--T 32, 64` is the list 32,64 it is to CLI11 too.
// A number option given NaN or an infinity (CLI11 reads "nan" and "inf" as doubles, and its Range and
// PositiveNumber checks let NaN through: `--retrieval-dropout nan` trained as if 0 and wrote null into the run's
// state, which no --resume could read back). No option of the tools takes a non-finite value.
void refuse_non_finite_numbers(const CLI::App& app) {
    for (const CLI::Option* opt : app.get_options()) {
        if (opt->count() == 0 || opt->get_type_name().find("FLOAT") == std::string::npos) continue;
        std::vector<double> values;   // as CLI11 converted them (its own syntax: separators, spaces)
        try {
            values = opt->as<std::vector<double>>();
        } catch (const CLI::Error&) {
            continue;
        }
        // (an option given twice keeps its last value: the values are the results' last ones, `--lr 0.5 --lr nan`
        // quoted '0.5')
        const std::vector<std::string>& given = opt->results();
        const std::size_t skip = given.size() > values.size() ? given.size() - values.size() : 0;
        for (std::size_t i = 0; i < values.size(); ++i)
            if (!std::isfinite(values[i]))
                user_error_in(opt->get_name(), "'" + (skip + i < given.size() ? given[skip + i] : cat(values[i])) +
                                                   "' is not a finite number",
                              "give a number");
    }
    for (const CLI::App* sub : app.get_subcommands()) refuse_non_finite_numbers(*sub);
}

// An option given "" (a script's unset variable: `--init-from "$BASE"` trained from scratch, `--json ""` wrote
// nothing, both with exit 0, as if the option were not there), or "--" (`--output --` wrote a file named "--").
// `--prompt ""` means "no prompt" and stays.
void refuse_empty_values(const CLI::App& app) {
    for (const CLI::Option* opt : app.get_options()) {
        // every option that takes a value (a number list given "" read as 0: `--alphas ""` said "got 0"); not flags
        if (opt->count() == 0 || opt->get_type_size() == 0) continue;
        // texts that may be empty: --prompt ""; the prompt and query-text arguments refuse "" themselves
        if (opt->check_lname("prompt") || (opt->get_lnames().empty() && (opt->get_name() == "prompt" || opt->get_name() == "text")))
            continue;
        for (const std::string& v : opt->results()) {
            if (v.empty())
                user_error_in(opt->get_name(), "is empty", opt->get_lnames().empty() ? "give a value" : "give a value, or leave the option out");
            if (v == "--")   // `--output --` wrote a file named "--": a value left out before the end of the options
                user_error_in(opt->get_name(), "is \"--\" (the end of the options), not a value", "give a value");
        }
    }
    for (const CLI::App* sub : app.get_subcommands()) refuse_empty_values(*sub);
}

void refuse_empty_list_items(const CLI::App& app, int argc, char** argv) {
    const auto is_option_word = [](const std::string& w) {   // "-5" or "-.5" is a value, "-x" / "--x" an option
        return w.size() > 1 && w[0] == '-' && !(std::isdigit(static_cast<unsigned char>(w[1])) || w[1] == '.');
    };
    std::vector<const CLI::App*> apps{&app};
    for (const CLI::App* sub : app.get_subcommands()) apps.push_back(sub);
    for (const CLI::App* a : apps) {
        for (const CLI::Option* opt : a->get_options()) {
            if (opt->count() == 0 || opt->get_delimiter() != ',' || opt->get_lnames().empty()) continue;
            for (const std::string& lname : opt->get_lnames()) {
                const std::string name = "--" + lname;
                for (int i = 1; i < argc; ++i) {
                    const std::string word = argv[i];
                    std::string value;
                    if (word.rfind(name + "=", 0) == 0) {
                        value = word.substr(name.size() + 1);
                    } else if (word == name) {
                        for (int j = i + 1; j < argc && !is_option_word(argv[j]); ++j) value += argv[j];
                    } else {
                        continue;
                    }
                    const bool empty_item = !value.empty() && (value.find(",,") != std::string::npos ||
                                                               value.front() == ',' || value.back() == ',');
                    if (!empty_item) continue;
                    user_error_in(name, cat("'", value, "' has an empty item"),
                                  "separate the values by single commas, e.g. " +
                                      (opt->get_type_name().rfind("LIST", 0) == 0 ? std::string("a,b") : std::string("1,2,4")));
                }
            }
        }
    }
}

// A value twice in a comma-separated list (`--nprobe 8,8`, `--threads 1,1`): each item makes a row or a run of its own,
// so a repeat timed the same row twice under one label (two rows for one setting in the JSON). Refused, naming it.
void refuse_repeated_list_items(const CLI::App& app) {
    std::vector<const CLI::App*> apps{&app};
    for (const CLI::App* sub : app.get_subcommands()) apps.push_back(sub);
    for (const CLI::App* a : apps)
        for (const CLI::Option* opt : a->get_options()) {
            if (opt->count() == 0 || opt->get_delimiter() != ',' || opt->get_lnames().empty()) continue;
            std::set<std::string> seen;
            for (const std::string& item : opt->results())
                if (!seen.insert(item).second)
                    user_error_in("--" + opt->get_lnames().front(), cat("lists ", item, " twice"), "give each value once");
        }
}

// A command-line word that is not valid UTF-8 (a Latin-1 path): the tools record paths and texts in JSON, which holds
// UTF-8 only. Found when the manifest was written, after the work ("internal error: [json.exception.type_error.316]"),
// it left a folder no --resume or --force could finish; refused before anything is read, naming the option.
void refuse_non_utf8_arguments(int argc, char** argv) {
    for (int i = 1; i < argc; ++i) {
        const std::string word = argv[i];
        if (utf8_valid(word)) continue;
        const std::string prev = i > 1 ? argv[i - 1] : "";
        const std::string eq_option = word.rfind("--", 0) == 0 ? word.substr(0, word.find('=')) : "";
        const std::string option = !eq_option.empty() ? eq_option
                                   : prev.rfind("-", 0) == 0 && prev.size() > 1 ? prev
                                                                                 : cat("argument ", i);
        user_error_in(option, "'" + utf8_escape_invalid(word) + "' is not valid UTF-8 (RetroKit records paths and texts in "
                                                                "JSON, which holds UTF-8 only)",
                      "rename the file or folder, e.g. `convmv -f latin1 -t utf8 --notest`, or give the text as UTF-8");
    }
}

// A value of a text option or argument that names a path relative to the current folder: an output option's value,
// or a word that names something there, or whose folder part does (`db`, `runs/new`; not `bow`, `0/2` or `**/*.txt`).
bool names_relative_path(const std::string& value, bool output_option) {
    if (value.empty() || value[0] == '/' || value == "-") return false;
    if (output_option) return true;
    std::error_code ec;
    if (std::filesystem::exists(value, ec)) return true;
    const std::filesystem::path parent = std::filesystem::path(value).parent_path();
    return !parent.empty() && std::filesystem::is_directory(parent, ec);
}

// The current folder's path where it is not valid UTF-8 (a Latin-1 name) and a relative path is given: the manifests
// (and retro-generate's journal, retro-bench's JSON) record the absolute paths of a run's files, so such a run failed
// as it wrote them, after all the work (a helper's odd-paths campaign, session 57: every writing tool exited 1 with
// json's type_error.316 and left a folder no --resume could finish). Refused before anything is read, naming the
// option; with absolute paths alone (retro-bench's children) the current folder is never recorded, and the commands
// that record no path (encode, decode, inspect, query, show, eval, plot, retro-generate of one prompt) run anywhere.
void refuse_non_utf8_current_folder(const CLI::App& app) {
    const std::string tool = app.get_name();
    const std::vector<CLI::App*> subs = app.get_subcommands();
    const std::string sub = subs.empty() ? "" : subs.front()->get_name();
    const bool records_paths =
        (tool == "retro-tokenizer" && sub == "train") || (tool == "retro-train" && sub.empty()) || tool == "retro-bench" ||
        (tool == "retro-generate" && app.count("--output") > 0) ||
        ((tool == "retro-chunk" || tool == "retro-index" || tool == "retro-knn") && (sub.empty() || sub == "merge"));
    if (!records_paths) return;
    std::error_code ec;
    const std::string cwd = std::filesystem::current_path(ec).string();
    if (ec || utf8_valid(cwd)) return;
    static const std::set<std::string> outputs = {"--out", "--output", "--json", "--json-out", "--work-dir", "--texts-out",
                                                  "--images-out", "--index-cache", "--plot"};
    std::vector<const CLI::App*> apps{&app};
    for (const CLI::App* s : subs) apps.push_back(s);
    for (const CLI::App* a : apps)
        for (const CLI::Option* opt : a->get_options()) {
            if (opt->count() == 0 || opt->get_type_name().rfind("TEXT", 0) != 0) continue;
            const std::string name = opt->get_lnames().empty() ? opt->get_name() : "--" + opt->get_lnames().front();
            for (const std::string& value : opt->results())
                if (names_relative_path(value, outputs.count(name) > 0))
                    user_error_in(name, "'" + value + "' is relative to the current folder '" + utf8_escape_invalid(cwd) +
                                            "', whose path is not valid UTF-8 (RetroKit records the absolute paths of a "
                                            "run's files in JSON, which holds UTF-8 only)",
                                  "give absolute paths, or run from a folder whose path is UTF-8 (rename it, e.g. "
                                  "`convmv -f latin1 -t utf8 --notest`)");
        }
}

// CLI11's message on one line, in our words where its own are obscure.
std::string usage_message(const std::string& what) {
    static const std::regex override_value(R"(^(\S+) was given a disallowed flag override)");
    std::smatch m;
    const std::string line = one_line(what);
    if (std::regex_search(line, m, override_value)) return "--" + m[1].str() + " takes no value: give the flag alone";
    // CLI11's "Could not convert: --neighbours = 99999999999" (a value out of the option's integer range, or not a
    // number of its kind): the option first, as every refusal
    static const std::regex not_converted(R"(^Could not convert: (\S+) = (.*)$)");
    if (std::regex_search(line, m, not_converted))
        return m[1].str() + ": '" + m[2].str() + "' is not a value it takes (a number out of its range, or not a number of its kind)";
    return line;
}

// A failure's one line, "TOOL: error: ...", and its exit code. Under mpirun a rank other than 0 lets rank 0 print
// a refusal every rank meets first (core/distributed.h: distributed_before_failure_line).
int failure_line(const std::string& tool, const char* kind, const std::string& message_in, int exit_code) {
    distributed_before_failure_line();
    std::string message = message_in;
    // a full disk stops a run as Ctrl-C does: its line says what the run keeps and how to go on, as the note would
    // (none said so: a helper's disk-full campaign, session 56)
    // (a quota alike; a file size limit, EFBIG — `ulimit -f`, a filesystem's largest file — is not lifted by room)
    const auto says = [&](int err) { return message.find(std::strerror(err)) != std::string::npos; };
    if (message.find("(fix:") == std::string::npos && (says(ENOSPC) || says(EDQUOT) || says(EFBIG)))
        if (const std::string advice = interrupt_note_advice(); !advice.empty())
            message += std::string(" (fix: ") +
                       (says(EFBIG) ? "once the file may grow (a larger `ulimit -f`, or a filesystem that takes larger files), "
                                    : "once there is room, ") +
                       advice + ")";
    std::fprintf(stderr, "%s: %s: %s\n", tool.c_str(), kind, terminal_text(message, true).c_str());   // one line
    return exit_code;
}

// An allocation was refused (tool_run's std::bad_alloc). Under a `ulimit -v` an OpenBLAS thread may be spinning on a
// refused buffer mmap (it retries for ever), and OpenBLAS's exit handler waits for its threads: the tool printed its
// line and never ended (a helper's docs check, session 60). It ends without the exit handlers then (tool_main).
bool g_out_of_memory = false;

int tool_run(const std::string& tool, const std::string& description, int argc, char** argv, const ToolSetup& setup) {
    json_files_read_reset();
    // the run's inputs stamped as it reads them, so that the folder it completes records those files (core/input_stamps.h);
    // not retro-bench's stages, which rewrite their scratch folders' inputs between rounds
    input_stamps_enable(tool != "retro-bench");
    ToolContext ctx;
    ctx.tool = tool;
    for (int i = 0; i < argc; ++i) ctx.command_line += (i ? " " : "") + shell_quote(argv[i]);
    try {
        CLI::App app{description, tool};
        app.formatter(std::make_shared<TrimmedHelpFormatter>());   // before the subcommands: they take it from the app
        app.set_version_flag("--version", std::string(tool) + " (RetroKit) " + RETROKIT_VERSION +
                                              " commit " + RETROKIT_GIT_COMMIT);
        app.add_flag("--quiet", ctx.quiet, "Print errors only (no progress, no notes)");
        app.add_flag("--verbose", ctx.verbose, "Print debug notes");
        app.option_defaults()->always_capture_default();
        app.fallthrough();   // --quiet, --verbose work after a subcommand too
        // Applied when parsing completes, before any subcommand callback runs.
        app.parse_complete_callback([&ctx, &app, argc, argv] {
            // before any subcommand's callback: retro-bench runs its benchmark inside parse()
            refuse_non_utf8_arguments(argc, argv);
            refuse_non_utf8_current_folder(app);
            refuse_parent_options(app);
            refuse_empty_list_items(app, argc, argv);
            refuse_repeated_list_items(app);
            refuse_non_finite_numbers(app);
            refuse_empty_values(app);
            if (ctx.threads < 0 || ctx.threads > kMaxThreads)   // every tool's --threads (0 = all cores)
                user_error_in("--threads", cat(ctx.threads, " is not a thread count in [0, ", kMaxThreads, "]"),
                              "give 0 for all cores");
            log_set_level(ctx.quiet ? LogLevel::LOG_ERROR : ctx.verbose ? LogLevel::LOG_DEBUG : LogLevel::LOG_INFO);
            set_thread_count(ctx.threads);
            log_debug(blas_core_note());
        });
        ToolAction action = setup(app, ctx);
        normalize_options(app);
        // `TOOL --completion bash`: the script shell_completion.h writes (not in --help: docs/tools.md)
        if (const std::string_view word = argc >= 2 ? argv[1] : "";
            word == "--completion" || word.starts_with("--completion=")) {
            const std::string shell = word == "--completion" ? (argc == 3 ? argv[2] : "")
                                      : argc == 2               ? std::string(word.substr(13))
                                                                : "";
            if (shell != "bash")
                user_error_in("--completion", "takes one word, the shell: bash (the one shell it writes for)",
                              "source <(" + tool + " --completion bash) in bash");
            std::cout << bash_completion_script(app, tool);
            return 0;
        }
        // `TOOL --man`: its manual page (man_page.h; installed as share/man/man1/TOOL.1; not in --help either)
        if (argc >= 2 && std::string_view(argv[1]) == "--man") {
            if (argc != 2) user_error_in("--man", "takes no value", "run " + tool + " --man alone (man -l <(" + tool + " --man))");
            std::cout << man_page(app, tool);
            return 0;
        }
        // a misspelt or guessed subcommand (`retro-knn shwo knn/`, `retro-chunk build corpus/`), named before CLI11
        // hands the word to the tool's own form (cli/subcommand_word.h)
        refuse_misnamed_subcommand(app, argc, argv, /*near_only=*/true);
        try {
            app.parse(argc, argv);
        } catch (const CLI::ParseError& e) {
            if (e.get_exit_code() == 0) return app.exit(e);   // --help, --version: printed to stdout
            // A usage error is one line like every other user error (CLI11's own form is two lines).
            std::string message = usage_message(e.what());
            // "A subcommand is required" after a misspelt one (`retro-tokenizer trian corpus`): name the word and the
            // subcommands there are
            // (the first word CLI11 left unparsed: `retro-bench --quiet retntion` as well)
            if (message.find("A subcommand is required") != std::string::npos) {
                const std::string names = subcommand_names(app);
                const std::vector<std::string> left = app.remaining();
                message = !left.empty() && left.front()[0] != '-'
                              ? cat("'", left.front(), "' is not a subcommand of ", tool, " (", names, ")")
                              : cat("a subcommand is required: ", names);   // (none given: `retro-bench --quiet`)
            }
            // the help of the subcommand the error is in (`retro-tokenizer encode ...` pointed at retro-tokenizer --help,
            // which lists no --model), and the option meant where one is known
            std::string command = tool;
            const CLI::App* deepest = &app;
            while (!deepest->get_subcommands().empty()) {
                deepest = deepest->get_subcommands().front();
                command += " " + deepest->get_name();
            }
            std::string fix = "see " + command + " --help";
            // a positional missing: the command's form beside it (`retro-knn show`: "knn is required" alone before)
            static const std::regex positional_required(R"(^(\w+) is required$)");
            if (std::smatch m; std::regex_match(message, m, positional_required)) {
                const CLI::Option* missing = deepest->get_option_no_throw(m[1].str());
                if (missing != nullptr && missing->get_positional())
                    message += ": usage: " + usage_form(*deepest, command);
            }
            if (message.find(" not expected: ") != std::string::npos)   // (one, or several)
                extras_message(app, *deepest, command, message, fix);
            // a required option misspelt (`--otu x`): CLI11 checks requirements before the words left over, so it said
            // only "--out is required"; the misspelling is the likelier news
            else if (message.find(" is required") != std::string::npos && message.rfind("A subcommand", 0) != 0) {
                const std::vector<std::string> left = app.remaining(true);
                if (std::any_of(left.begin(), left.end(), [](const std::string& w) { return w.size() > 1 && w[0] == '-' && w != "--"; })) {
                    const std::string required = message;
                    extras_message(app, *deepest, command, message, fix);
                    message += " — " + required;
                }
            }
            // a word in a subcommand's place that is none and names no file or folder, which took the positional the
            // word left over was for (`retro-index build db/ --out x`: "'db/': left over"), or a required option's
            // place in the news (`retro-knn build`: "--out: is required"): that word is the news
            const std::vector<std::string> left_over = app.remaining(true);
            if ((message.find(": left over (") != std::string::npos && !left_over.empty() && left_over.front()[0] != '-') ||
                (message.find(" is required") != std::string::npos && message.find("not an option") == std::string::npos))
                refuse_misnamed_subcommand(app, argc, argv, /*near_only=*/false);
            // (the words given are in it: a control character among them is shown, not sent to the terminal)
            std::fprintf(stderr, "%s: error: %s (fix: %s)\n", tool.c_str(), terminal_text(message, true).c_str(),
                         terminal_text(fix, true).c_str());
            return EXIT_USER;
        }
        // the tool's own form with a word in a subcommand's place that is none and names no file or folder
        // (`retro-chunk build corpus/ ...` said "build: no such file or folder"; `retro-knn build`, "--out: is required")
        if (app.get_subcommands().empty()) refuse_misnamed_subcommand(app, argc, argv, /*near_only=*/false);
        if (action) action();
        return 0;
    } catch (const UserError& e) {
        return failure_line(tool, "error", e.what(), EXIT_USER);
    } catch (const std::filesystem::filesystem_error& e) {
        // a path the user gave that cannot be made or written (not a folder, no permission, disk full): exit 2,
        // the path first, as every user error
        return failure_line(tool, "error", filesystem_message(e), EXIT_USER);
    } catch (const nlohmann::json::exception& e) {
        // reading a field: a value of the wrong type (302, and 304-306 for at(), [] and value() on a non-object), an
        // index or key not there (401, 403). After JSON files were read these are theirs; any other id (316: a
        // string that is not UTF-8 being written) is ours.
        static const int kReadIds[] = {302, 304, 305, 306, 401, 403};
        const bool read_side = std::find(std::begin(kReadIds), std::end(kReadIds), e.id) != std::end(kReadIds);
        const std::vector<std::string> files = json_files_read();
        if (files.empty() || !read_side) {
            return failure_line(tool, "internal error", e.what(), EXIT_INTERNAL);
        }
        return failure_line(tool, "error", json_field_message(e, files), EXIT_USER);
    } catch (const std::bad_alloc&) {
        // the machine (or a ulimit) refused memory the checks before the work did not foresee: said as such, not as
        // "internal error: std::bad_alloc"
        g_out_of_memory = true;
        return failure_line(tool, "error",
                            "out of memory: an allocation was refused (the machine's memory, or a ulimit -v, is too "
                            "small for this input)",
                            EXIT_INTERNAL);
    } catch (const std::exception& e) {
        return failure_line(tool, "internal error", e.what(), EXIT_INTERNAL);
    }
}

}  // namespace

bool passes_to_subcommands(const CLI::Option& tool_option) {
    if (tool_option.get_lnames().empty()) return false;
    const std::string& name = tool_option.get_lnames().front();
    return name == "quiet" || name == "verbose" || name == "threads";
}

bool shown_in_help(const CLI::Option& option) { return !option.get_group().empty(); }

std::vector<const CLI::App*> shown_subcommands(const CLI::App& app) {
    return app.get_subcommands([](const CLI::App* s) { return !s->get_group().empty(); });
}

std::string subcommand_names(const CLI::App& app) {
    std::string names;
    for (const CLI::App* sub : shown_subcommands(app)) names += (names.empty() ? "" : ", ") + sub->get_name();
    return names;
}

void refuse_usage(const CLI::App& app, const std::string& form) {
    std::string others;
    for (const CLI::App* sub : shown_subcommands(app))
        others += (others.empty() ? "" : ", ") + app.get_name() + " " + sub->get_name() + " ...";
    user_error_in("usage", others.empty() ? form : cat(form, " (or: ", others, ")"), cat("see ", app.get_name(), " --help"));
}

CLI::Validator non_negative_integer() { return decimal_integer(false); }

CLI::Option* model_config_option(CLI::Option* option) {
    const CLI::Validator by_name(
        [](std::string& value) -> std::string {
            value = resolve_model_config(value);
            return std::string();
        },
        "");
    return option->type_name("CONFIG")->transform(by_name);
}

CLI::Option* comma_list_of(CLI::Option* option, const std::vector<std::string>& items) {
    std::string braced, listed;
    for (const std::string& item : items) {
        braced += (braced.empty() ? "" : ",") + item;
        listed += (listed.empty() ? "" : ", ") + item;
    }
    // a vector option's results are split at the delimiter before validation; a string option's are split here
    CLI::Validator each_item(
        [items, listed](std::string& value) -> std::string {
            if (value.empty()) return "names nothing (give a comma list of " + listed + ")";
            std::size_t b = 0;
            while (b <= value.size()) {
                std::size_t e = value.find(',', b);
                if (e == std::string::npos) e = value.size();
                const std::string item = value.substr(b, e - b);
                if (item.empty()) return "has an empty item (expected a comma list of " + listed + ")";
                if (std::find(items.begin(), items.end(), item) == items.end())
                    return "unknown item '" + item + "' (expected " + listed +
                           (item.front() == ' ' || item.back() == ' ' ? "; no spaces around the commas)" : ")");
                b = e + 1;
            }
            return std::string();
        },
        "{" + braced + "}");
    // a string option given twice joins its values (`--train-only cca --train-only encoder`), as a vector one adds them
    if (option->get_items_expected_max() == 1) option->delimiter(',')->multi_option_policy(CLI::MultiOptionPolicy::Join);
    return option->type_name("LIST")->check(each_item);
}

void add_no_verify_flag(CLI::App& app, bool& verify) {
    app.add_flag_function("--no-verify", [&verify](std::int64_t) { verify = false; },
                          "Skip re-hashing the input files against the fingerprints in their manifests (a file changed "
                          "since its tool wrote it is refused otherwise)")
        ->disable_flag_override();   // --no-verify=false would verify nothing: refused instead
}

int tool_main(const std::string& tool, const std::string& description, int argc, char** argv,
              const ToolSetup& setup) {
    std_streams_guard();   // a closed stdin, stdout or stderr filled with /dev/null before any file takes its number
    reexec_for_blas_core(argv);   // OpenBLAS's generic kernels on a CPU it does not know: run again with better ones
    reexec_for_address_limit(argv);   // OpenBLAS's threads' buffers past a `ulimit -v`: run again with fewer threads
    if (address_space_limit() != std::numeric_limits<std::int64_t>::max()) heap_limit_arenas(kLimitedArenas);
    // a write past a file size limit (`ulimit -f`) fails with EFBIG, "File too large", and ends in the line a full disk
    // gets (what the run keeps, how to go on): SIGXFSZ's default killed the tool without a word, exit 153 (a helper's
    // docs check, session 60)
    std::signal(SIGXFSZ, SIG_IGN);
    std_streams_env_clear();
    int rc = tool_run(tool, description, argc, argv, setup);
    // what went to standard output must have arrived: a full disk or /dev/full is an error, not a silent exit 0
    // (the reason is the first failed flush's errno: std::cout's flush is stdout's, and the second finds nothing left
    // to write; errno was cleared between the two, so a full disk said only "write failed")
    errno = 0;
    std::cout.flush();
    int why = std::cout ? 0 : errno;
    errno = 0;
    const bool flushed = std::fflush(stdout) == 0;
    if (!flushed && why == 0) why = errno;
    if (rc == 0 && (!flushed || std::ferror(stdout) || !std::cout)) {
        std::fprintf(stderr, "%s: error: standard output: %s\n", tool.c_str(), stdout_write_failed(why).c_str());
        rc = EXIT_USER;
    }
    distributed_finish(rc);   // MPI ends after a success, aborts the job after a failure (core/distributed.h)
    if (g_out_of_memory && address_space_limit() != std::numeric_limits<std::int64_t>::max()) {
        std::fflush(nullptr);
        output_folder_locks_remove();   // (no atexit after _exit)
        ::_exit(rc);   // (the output folder's own cleanup ran as the exception left the work)
    }
    return rc;
}

}  // namespace retro
