// Bash completion for a tool, generated from its own CLI11 declaration (so it never drifts from --help):
// `retro-chunk --completion bash` prints it, `cmake --install` writes one file per tool under
// share/bash-completion/completions/ (docs/tools.md "Installing, manual pages and shell completion").
// provides: bash_completion_script
#pragma once
#include <CLI/CLI.hpp>

#include <string>

namespace retro {

// A bash script defining _TOOL (tool's '-' as '_') and registering it with `complete -F` for `tool`: completes
// subcommand names, the options of the (sub)command the words so far are in (a subcommand also takes the tool's
// --quiet, --verbose and --threads, as tool_main does), an option's choices where CLI11 lists them (IsMember),
// file names for a TEXT value or a positional, nothing for a number or another type name (`--shard I/N`).
// `--opt=value` works too.
std::string bash_completion_script(const CLI::App& app, const std::string& tool);

}  // namespace retro
