// Implementation of progress.h.
#include "core/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/log.h"

namespace retro {

std::string format_count(double v) {
    char buf[32];
    if (v >= 1e9) std::snprintf(buf, sizeof buf, "%.2fG", v / 1e9);
    else if (v >= 1e6) std::snprintf(buf, sizeof buf, "%.2fM", v / 1e6);
    else if (v >= 1e4) std::snprintf(buf, sizeof buf, "%.1fk", v / 1e3);
    else std::snprintf(buf, sizeof buf, "%.0f", v);
    return buf;
}

std::string format_seconds(double s) {
    char buf[32];
    long t = static_cast<long>(s + 0.5);
    if (t >= 3600) std::snprintf(buf, sizeof buf, "%ldh%02ldm", t / 3600, (t / 60) % 60);
    else if (t >= 60) std::snprintf(buf, sizeof buf, "%ldm%02lds", t / 60, t % 60);
    else std::snprintf(buf, sizeof buf, "%lds", t);
    return buf;
}

bool progress_redraws() {
    const char* term = std::getenv("TERM");
    return ::isatty(STDERR_FILENO) == 1 && !(term && std::strcmp(term, "dumb") == 0);
}

Progress::Progress(std::string label, std::int64_t total, std::string unit)
    : label_(std::move(label)), unit_(std::move(unit)), total_(total) {
    start_ = last_draw_ = std::chrono::steady_clock::now();
    tty_ = progress_redraws();
    enabled_ = log_level() >= LogLevel::LOG_INFO;
}

Progress::~Progress() {
    if (!finished_ && tty_ && enabled_) std::fputc('\n', stderr);
}

void Progress::add(std::int64_t n) {
    done_.fetch_add(n);
    draw(false);
}

void Progress::set(std::int64_t done) {
    done_.store(done);
    draw(false);
}

void Progress::finish() {
    if (finished_) return;
    if (done_.load() > 0) draw(true);   // no "0 queries, 0 queries/s" line where nothing was left to do
    finished_ = true;
}

void Progress::draw(bool final_line) {
    if (!enabled_) return;
    auto now = std::chrono::steady_clock::now();
    std::unique_lock<std::mutex> lock(mutex_, std::try_to_lock);
    if (!lock.owns_lock() && !final_line) return;
    if (!lock.owns_lock()) lock.lock();
    double since = std::chrono::duration<double>(now - last_draw_).count();
    if (!final_line && since < (tty_ ? 0.1 : 10.0)) return;
    last_draw_ = now;
    double elapsed = std::chrono::duration<double>(now - start_).count();
    std::int64_t done = done_.load();
    double rate = elapsed > 0 ? done / elapsed : 0;
    std::string line = label_ + " ";
    if (total_ > 0) {
        double frac = std::min(1.0, static_cast<double>(done) / total_);
        if (tty_) {
            const int width = 24;
            const int fill = std::clamp(static_cast<int>(frac * width), 0, width);
            line += '[';
            line.append(static_cast<std::size_t>(fill), '#');
            line.append(static_cast<std::size_t>(width - fill), '.');
            line += "] ";
        }
        char pct[16];
        std::snprintf(pct, sizeof pct, "%3.0f%% ", 100 * frac);
        line += pct + format_count(done) + "/" + format_count(total_) + " " + unit_;
        line += ", " + format_count(rate) + " " + unit_ + "/s";
        if (!final_line && rate > 0) line += ", ETA " + format_seconds((total_ - done) / rate);
    } else {
        line += format_count(done) + " " + unit_ + ", " + format_count(rate) + " " + unit_ + "/s";
    }
    if (final_line) line += ", " + format_seconds(elapsed);
    if (tty_) std::fprintf(stderr, "\r\033[K%s%s", line.c_str(), final_line ? "\n" : "");
    else std::fprintf(stderr, "%s\n", line.c_str());
    std::fflush(stderr);
}

}  // namespace retro
