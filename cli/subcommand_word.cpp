// A misspelt or guessed subcommand refused before parsing (subcommand_word.h).
#include "subcommand_word.h"

#include <algorithm>
#include <filesystem>
#include <string_view>
#include <vector>

#include "core/edit_distance.h"
#include "core/error.h"
#include "tool_main.h"

namespace retro {

int first_bare_word(const CLI::App& app, int argc, const char* const* argv) {
    for (int i = 1; i < argc; ++i) {
        const std::string_view word = argv[i];
        if (word == "--") return 0;
        if (word.size() < 2 || word[0] != '-') return i;
        if (word.find('=') != std::string_view::npos) continue;   // --out=x: its value in the word
        const CLI::Option* option = app.get_option_no_throw(std::string(word));
        if (option == nullptr) return 0;   // unknown: its value, if it takes one, cannot be told
        if (option->get_items_expected_max() > 0 && i + 1 < argc) ++i;   // the option's value
    }
    return 0;
}

namespace {

bool plain_word(const std::string& word) {
    return !word.empty() && word != "-" && std::all_of(word.begin(), word.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
    });
}

// The subcommand `word` is near (a misspelling by edit distance, or its start of at least three letters), the nearest
// first; "" where none is.
std::string subcommand_near(const CLI::App& app, const std::string& word) {
    std::string best;
    std::size_t best_distance = 0;
    for (const CLI::App* sub : shown_subcommands(app)) {
        const std::string& name = sub->get_name();
        const std::size_t d = word.size() >= 3 && name.starts_with(word) ? 0 : edit_distance(word, name);
        if (!near_misspelling(d, name) && d != 0) continue;
        if (best.empty() || d < best_distance) best = name, best_distance = d;
    }
    return best;
}

}  // namespace

void refuse_misnamed_subcommand(const CLI::App& app, int argc, const char* const* argv, bool near_only) {
    if (shown_subcommands(app).empty()) return;
    for (int i = 1; i < argc; ++i) {
        const std::string_view word = argv[i];
        if (word == "--") break;
        if (word == "--help" || word == "-h" || word == "--version") return;
    }
    const int at = first_bare_word(app, argc, argv);
    const std::string word = at > 0 ? argv[at] : "";
    if (!plain_word(word)) return;
    for (const CLI::App* sub : shown_subcommands(app))
        if (sub->check_name(word)) return;
    std::error_code ec;
    if (std::filesystem::exists(word, ec) || ec) return;   // a file or folder of that name: the tool's own input
    const std::string tool = app.get_name(), names = subcommand_names(app);
    const std::string quoted = "'" + word + "'";
    if (const std::string near = subcommand_near(app, word); !near.empty())
        user_error_in("", cat(quoted, " is not a subcommand of ", tool, " (", names, ")"),
                      cat("did you mean ", tool, " ", near, "? see ", tool, " --help"));
    if (near_only || at != 1) return;   // a word after options: the tool's own input, which its checks name
    const bool takes_positionals = !app.get_options([](const CLI::Option* o) { return o->get_positional(); }).empty();
    user_error_in("",
                  takes_positionals ? cat(quoted, " is neither a subcommand of ", tool, " (", names, ") nor a file or folder")
                                    : cat(quoted, " is not a subcommand of ", tool, " (", names, ")"),
                  cat("see ", tool, " --help"));
}

}  // namespace retro
