// Progress on stderr: a bar with rate and ETA when stderr is a TTY, a plain line every few
// seconds otherwise, nothing under --quiet. Never writes to stdout. add() is thread-safe.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

namespace retro {

class Progress {
public:
    // total <= 0: unknown total (no ETA, no bar).
    Progress(std::string label, std::int64_t total, std::string unit = "items");
    ~Progress();
    void add(std::int64_t n);
    void set(std::int64_t done);
    void finish();   // prints the final line once (none when nothing was done)

private:
    void draw(bool final_line);
    std::string label_, unit_;
    std::int64_t total_;
    std::atomic<std::int64_t> done_{0};
    std::chrono::steady_clock::time_point start_, last_draw_;
    std::mutex mutex_;
    bool tty_ = false, enabled_ = true, finished_ = false;
};

// Whether progress redraws one line in place ("\r", "\033[K"): stderr is a terminal and TERM is not "dumb" (Emacs'
// shell, some CI ptys show the codes as text; they get the plain line every few seconds, as a file does).
bool progress_redraws();

std::string format_count(double v);      // 1.2k, 3.4M
std::string format_seconds(double s);     // 1h02m, 3m05s, 12s

}  // namespace retro
