// Implementation of log.h: one mutex so lines from worker threads never interleave.
#include "core/log.h"

#include <atomic>
#include <cstdio>
#include <mutex>

#include "core/terminal_text.h"

namespace retro {
namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::LOG_INFO)};
std::mutex g_mutex;

void emit(LogLevel level, const char* tag, const std::string& msg) {
    if (static_cast<int>(level) > g_level.load()) return;
    std::lock_guard<std::mutex> lock(g_mutex);
    std::fprintf(stderr, "%s%s\n", tag, terminal_text(msg, true).c_str());   // a file name's escape codes and newlines as text
    std::fflush(stderr);
}
}  // namespace

void log_set_level(LogLevel level) { g_level.store(static_cast<int>(level)); }
LogLevel log_level() { return static_cast<LogLevel>(g_level.load()); }
void log_error(const std::string& msg) { emit(LogLevel::LOG_ERROR, "error: ", msg); }
void log_warn(const std::string& msg) { emit(LogLevel::LOG_WARN, "warning: ", msg); }
void log_info(const std::string& msg) { emit(LogLevel::LOG_INFO, "", msg); }
void log_debug(const std::string& msg) { emit(LogLevel::LOG_DEBUG, "debug: ", msg); }

}  // namespace retro
