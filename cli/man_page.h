// A tool's manual page (man(7) roff, section 1), generated from its own CLI11 declaration as the shell completion is
// (so it never drifts from --help): `retro-chunk --man` prints it, `cmake --install` writes share/man/man1/TOOL.1
// (docs/tools.md "Installing, manual pages and shell completion"), `man retro-chunk` shows it.
// provides: man_page
#pragma once
#include <CLI/CLI.hpp>

#include <string>

namespace retro {

// NAME, SYNOPSIS (the tool and each subcommand), DESCRIPTION, OPTIONS and POSITIONALS (each with its value's type and
// default, as --help gives them), one COMMANDS section a subcommand, EXIT STATUS, ENVIRONMENT and SEE ALSO (the
// other tools). `tool` is the program name.
std::string man_page(const CLI::App& app, const std::string& tool);

}  // namespace retro
