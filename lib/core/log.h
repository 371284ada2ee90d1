// Logging to stderr with one global level (the only global state allowed, ARCHITECTURE.md).
// --quiet shows errors only; --verbose adds debug lines. Results never go through here.
#pragma once
#include <string>

namespace retro {

enum class LogLevel { LOG_ERROR = 0, LOG_WARN = 1, LOG_INFO = 2, LOG_DEBUG = 3 };

void log_set_level(LogLevel level);
LogLevel log_level();
void log_error(const std::string& msg);
void log_warn(const std::string& msg);
void log_info(const std::string& msg);
void log_debug(const std::string& msg);

}  // namespace retro
