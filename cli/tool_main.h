// The frame every tools/*.cpp main runs in: CLI11 parsing, --quiet/--verbose/--version, and the mapping of
// exceptions to exit codes (UserError -> 2, anything else -> 1) with one line on stderr. A tool's setup()
// declares flags and returns the action to run after parsing. The CLI layer (cli/, a static library that only
// tools/ and tests link): libretrokit itself knows no CLI11.
// provides: ToolAction, ToolSetup, tool_main, add_no_verify_flag, non_negative_integer, model_config_option,
//           comma_list_of, passes_to_subcommands, shown_in_help, shown_subcommands
#pragma once
#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

#include "core/tool_context.h"

namespace retro {

using ToolAction = std::function<void()>;
using ToolSetup = std::function<ToolAction(CLI::App& app, ToolContext& ctx)>;

// `--no-verify` for a command that reads input files whole: clears `verify`, which otherwise has the command
// re-hash them against the fingerprints their folders' manifests record (docs/tools.md "Verified inputs").
void add_no_verify_flag(CLI::App& app, bool& verify);

// For unsigned options such as seeds: decimal digits only. CLI11 reads "-1" into a uint64 as 2^64 - 1, a value past
// 2^64 - 1 as 2^64 - 1, "010" as octal 8 and "0x10" as 16; this refuses the first two and anything but digits, and
// reads leading zeros as decimal. Add it with ->transform() (->check() would drop the decimal rewrite).
CLI::Validator non_negative_integer();

// For --config: a shipped model config by name (`--config demo`: examples/configs/demo.json, or the installed
// share/retrokit/configs/demo.json) becomes its path; a path that exists stays as given (model/config_files.h).
// Its type is CONFIG, and the shell completion offers the shipped configs' names beside file names.
CLI::Option* model_config_option(CLI::Option* option);

// A comma list whose every item is one of `items` (`--modes parallel,recurrent`, `--train-only cca,encoder`), on a
// string option or a vector one with ->delimiter(','): an unknown or empty item is refused at parse time, before any
// work; --help shows LIST:{a,b,c} and the shell completion offers the items after the last comma. Given twice, the
// lists add up (a string option gets them joined by commas).
CLI::Option* comma_list_of(CLI::Option* option, const std::vector<std::string>& items);

// The tool's options a subcommand takes too, before or after its name: --quiet, --verbose, --threads (the app's
// fallthrough; usage errors, "did you mean" and the shell completion count them as the subcommand's).
bool passes_to_subcommands(const CLI::Option& tool_option);

// What --help, the manual page, the shell completion and "did you mean" offer: an option or subcommand with a group
// (CLI11 hides one whose group is ""; the deprecated spellings and the test-only options are hidden so).
bool shown_in_help(const CLI::Option& option);
std::vector<const CLI::App*> shown_subcommands(const CLI::App& app);
// Their names, comma-separated ("merge, query"): the refusals that list them take them from the declarations.
std::string subcommand_names(const CLI::App& app);
// A tool run with neither its own form's inputs nor a subcommand: "usage: FORM (or: TOOL SUB, ...)" in one line,
// exit 2 (`form`: the tool's own form, e.g. "retro-index DB --out DIR").
[[noreturn]] void refuse_usage(const CLI::App& app, const std::string& form);

int tool_main(const std::string& tool, const std::string& description, int argc, char** argv,
              const ToolSetup& setup);

}  // namespace retro
