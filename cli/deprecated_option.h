// An old spelling of an option, kept working: hidden from --help, it fills the same variable as its new
// spelling and, when used, prints one line on stderr (none with --quiet), e.g. for retro-train
// "warning: --neighbours is deprecated: use --knn (the neighbours folder)".
// provides: add_deprecated_option
#pragma once
#include <CLI/CLI.hpp>

#include <string>

#include "core/tool_context.h"

namespace retro {

// `note` follows "use NEW_NAME" in the warning (may be empty). ctx.quiet is read when the option is seen
// (tool_main's --quiet is processed first).
CLI::Option* add_deprecated_option(CLI::App& app, const std::string& old_name, const std::string& new_name,
                                   std::string& target, const ToolContext& ctx, const std::string& note = "");

}  // namespace retro
