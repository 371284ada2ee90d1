// A misspelt or guessed subcommand, refused before parsing in one line that names it: `retro-knn shwo knn/` said
// "'knn/': left over", `retro-chunk inspcet db/` "--tokenizer: is required" and `retro-train evl --run r` "did you
// mean --knn or --out?", because the word went to the tool's own form (its positional, or its words left over).
// provides: refuse_misnamed_subcommand, first_bare_word
#pragma once
#include <CLI/CLI.hpp>

#include <string>

namespace retro {

// Where in argv the first word stands that is neither an option nor the value of one of `app`'s options (`--out x`
// and `--out=x` alike), up to a `--`; 0 where there is none, or where an option `app` does not know comes first
// (whether it takes a value is not known, so what follows it is not read).
int first_bare_word(const CLI::App& app, int argc, const char* const* argv);

// For a tool with subcommands: its first bare word, where that is a plain word (letters, digits, '-', '_'; not
// "-"), neither one of its subcommands nor a file or folder that exists, is refused (UserError):
// - near a subcommand's name (a misspelling, or its first three letters or more): "'shwo' is not a subcommand of
//   retro-knn (merge, show)" with "did you mean retro-knn show?";
// - else, unless `near_only`, where the word comes first (the place of a subcommand): "'build' is neither a
//   subcommand of retro-chunk (merge, inspect) nor a file or folder" where the tool's own form takes positional
//   arguments, "'build' is not a subcommand of retro-train (eval, plot)" where it takes none. tool_main asks for this
//   where CLI11's refusal would otherwise name another word or option (a word left over, a required option).
// Nothing is refused when --help, -h or --version is among the words (they are answered as before).
void refuse_misnamed_subcommand(const CLI::App& app, int argc, const char* const* argv, bool near_only);

}  // namespace retro
