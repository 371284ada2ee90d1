// The commands the docs show (README.md and docs/*.md, their fenced code blocks, which users copy): every long option
// given to one of the seven tools is an option of that (sub)command, as its own --help lists it
// (tests/test_help_oracle.h) — so renaming or dropping an option without its examples fails here, not in a user's
// shell. Options before a subcommand are the tool's; after it the subcommand's, and the tool's --quiet, --verbose
// and --threads (tool_main's fallthrough). Inline `code` in prose is not read: it also names hidden options
// (`--man`, old spellings) and refusals on purpose.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "test_help_oracle.h"
#include "test_util.h"

namespace fs = std::filesystem;
using namespace retro;

namespace {

struct DocsCheck {
    int commands = 0;                    // tool invocations read
    std::vector<std::string> problems;   // "file:line: tool sub: --opt ..."
};

// The --help of `tool sub`, run once each.
const test::Help& cached_help(const std::string& tool, const std::string& sub) {
    static std::map<std::pair<std::string, std::string>, test::Help> cache;
    auto it = cache.find({tool, sub});
    if (it == cache.end()) it = cache.emplace(std::make_pair(tool, sub), test::help_of(tool, sub)).first;
    return it->second;
}

std::string trim_chars(std::string w, const std::string& front, const std::string& back) {
    const std::size_t a = w.find_first_not_of(front);
    if (a == std::string::npos) return "";
    w = w.substr(a);
    const std::size_t b = w.find_last_not_of(back);
    return b == std::string::npos ? "" : w.substr(0, b + 1);
}

// The tool a shell word runs ("retro-knn", "build/bin/retro-knn", "\"$BIN/retro-knn\""), or "".
std::string tool_named(const std::string& word) {
    std::string w = trim_chars(word, "'\"($", "'\"");
    w = w.substr(w.rfind('/') == std::string::npos ? 0 : w.rfind('/') + 1);
    for (const char* t : test::kToolNames)
        if (w == t) return w;
    return "";
}

// Where a shell command ends: a pipe, a list operator, a redirection, the end of a loop.
bool ends_command(const std::string& w) {
    return w == "|" || w == "||" || w == "&&" || w == "&" || w == ";" || w == "done" || w.rfind('>', 0) == 0 ||
           w.rfind("2>", 0) == 0 || w.rfind('|', 0) == 0 || (w.size() > 1 && w.back() == ';');
}

// The fenced code blocks' lines of a markdown text (a line ending in a backslash joined to the next), with their
// line numbers, comments (a # at a word's start) dropped.
std::vector<std::pair<int, std::string>> code_lines(const std::string& markdown) {
    std::vector<std::pair<int, std::string>> out;
    std::istringstream in(markdown);
    bool inside = false;
    int number = 0, start = 0;
    std::string pending;
    for (std::string line; std::getline(in, line);) {
        ++number;
        if (line.rfind("```", 0) == 0) {
            inside = !inside;
            pending.clear();
            continue;
        }
        if (!inside) continue;
        if (pending.empty()) start = number;
        for (std::size_t i = 0; i < line.size(); i++)
            if (line[i] == '#' && (i == 0 || line[i - 1] == ' ' || line[i - 1] == '\t')) {
                line.resize(i);
                break;
            }
        if (!line.empty() && line.back() == '\\') {
            pending += line.substr(0, line.size() - 1) + " ";
            continue;
        }
        out.emplace_back(start, pending + line);
        pending.clear();
    }
    return out;
}

// Reads one markdown text's code blocks into `check` (`name`: the file, for the messages).
void check_markdown(const std::string& markdown, const std::string& name, DocsCheck& check) {
    for (const auto& [line_number, line] : code_lines(markdown)) {
        std::vector<std::string> words;
        std::istringstream ws(line);
        for (std::string w; ws >> w;) words.push_back(w);
        for (std::size_t i = 0; i < words.size(); i++) {
            const std::string tool = tool_named(words[i]);
            if (tool.empty()) continue;
            ++check.commands;
            std::size_t end = i + 1;
            while (end < words.size() && !ends_command(words[end])) end++;
            const test::Help& top = cached_help(tool, "");
            std::size_t sub_at = end;
            for (std::size_t j = i + 1; j < end && sub_at == end; j++)
                if (top.subcommands.count(words[j])) sub_at = j;
            const std::string sub = sub_at < end ? words[sub_at] : "";
            for (std::size_t j = i + 1; j < end; j++) {
                std::string option = trim_chars(words[j], "[]'\"();", "[]'\"();");
                if (option.rfind("--", 0) != 0 || option.size() < 3) continue;
                option = trim_chars(option.substr(0, option.find('=')), "", "],.;:");
                bool known = false;
                if (j < sub_at) {
                    known = top.options.count(option) > 0;
                } else {
                    known = cached_help(tool, sub).options.count(option) > 0 ||
                            ((option == "--quiet" || option == "--verbose" || option == "--threads") &&
                             top.options.count(option) > 0);
                }
                if (!known)
                    check.problems.push_back(name + ":" + std::to_string(line_number) + ": " + tool +
                                             (sub.empty() ? "" : " " + sub) + ": " + option +
                                             " is not one of its options (--help)");
            }
        }
    }
}

}  // namespace

TEST_CASE("docs: the checker of the docs' commands finds an option a command does not have") {
    DocsCheck check;
    check_markdown("Prose naming `retro-knn --no-such-flag` is not read.\n"
                   "```sh\n"
                   "retro-knn index/ --db db/ --out knn/ --neighbours 2          # fine\n"
                   "retro-knn index/ --db db/ --out knn/ --neighbors 2           # a misspelling\n"
                   "printf 'x\\n' | build/bin/retro-tokenizer encode --model tok/ --piece | retro-tokenizer decode --model tok/\n"
                   "retro-chunk inspect db/ --stats \\\n"
                   "    --glob '*.txt'                                            # the tool's option after its subcommand\n"
                   "retro-bench --threads 1 embed --rounds 3 [--json]            # before and after the subcommand: fine\n"
                   "retro-bench --rounds 3 embed                                 # a subcommand's option before it\n"
                   "retro-train eval --run run/ --quiet --threads 2 > out.txt --not-read\n"
                   "```\n"
                   "```\n"
                   "\"$BIN/retro-index\" query index/ \"text\" --k=10 --kk 3\n"
                   "```\n",
                   "example.md", check);
    CHECK(check.commands == 9);
    const std::vector<std::string> expected = {
        "example.md:4: retro-knn: --neighbors is not one of its options (--help)",
        "example.md:5: retro-tokenizer encode: --piece is not one of its options (--help)",
        "example.md:6: retro-chunk inspect: --glob is not one of its options (--help)",
        "example.md:9: retro-bench embed: --rounds is not one of its options (--help)",
        "example.md:13: retro-index query: --kk is not one of its options (--help)",
    };
    CHECK(check.problems == expected);
}

TEST_CASE("docs: every option the README's and docs' commands give is one the command has") {
    DocsCheck check;
    std::vector<fs::path> files = {test::source_dir() / "README.md"};
    for (const auto& entry : fs::directory_iterator(test::source_dir() / "docs"))
        if (entry.path().extension() == ".md") files.push_back(entry.path());
    std::sort(files.begin(), files.end());
    for (const fs::path& f : files) check_markdown(test::read_text(f), f.lexically_relative(test::source_dir()).string(), check);
    CHECK(check.commands > 150);   // the docs were found and read (162 tool invocations in session 67)
    for (const std::string& p : check.problems) FAIL_CHECK(p);
}
