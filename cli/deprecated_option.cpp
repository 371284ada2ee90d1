// Implementation of deprecated_option.h.
#include "deprecated_option.h"

#include "core/log.h"

namespace retro {

CLI::Option* add_deprecated_option(CLI::App& app, const std::string& old_name, const std::string& new_name,
                                   std::string& target, const ToolContext& ctx, const std::string& note) {
    const std::string warning = old_name + " is deprecated: use " + new_name + (note.empty() ? "" : " (" + note + ")");
    return app.add_option(old_name, target)->group("")->each([&ctx, warning](const std::string&) {
        if (!ctx.quiet) log_warn(warning);
    });
}

}  // namespace retro
