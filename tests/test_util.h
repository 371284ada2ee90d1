// Helpers shared by the tests: visible skips, temp folders, running the built tools.
#pragma once
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "address_sanitizer.h"
#include "core/threads.h"

namespace retro::test {

extern bool g_skipped;

// Built with AddressSanitizer (`make sanitize` instruments the tools too)? It reserves terabytes of address space for
// its shadow as a process starts, so nothing it instruments can run under `ulimit -v`.
#ifdef RETRO_TEST_ASAN
inline constexpr bool kAddressSanitizer = true;
#else
inline constexpr bool kAddressSanitizer = false;
#endif

// A fresh empty folder under the system temp dir, removed when the object dies.
struct TempDir {
    std::filesystem::path path;
    explicit TempDir(const std::string& tag = "t");
    ~TempDir();
    std::filesystem::path operator/(const std::string& name) const { return path / name; }
};

struct RunResult {
    int exit_code = -1;
    std::string out;   // stdout
    std::string err;   // stderr
};

// Runs a built tool (bin/<tool>) with a shell-quoted argument string; captures stdout and stderr.
RunResult run_tool(const std::string& tool, const std::string& args, const std::string& stdin_text = "");
// Runs a shell command line (e.g. "mpirun -np 2 " + tool_path("retro-train") + " ..."); the same capture.
RunResult run_command(const std::string& command, const std::string& stdin_text = "");
std::string tool_path(const std::string& tool);   // bin/<tool> of this build

std::string read_text(const std::filesystem::path& p);
void write_text(const std::filesystem::path& p, const std::string& s);
std::filesystem::path source_dir();   // the repository root
// rms(got - ref) / rms(ref), fla's metric (the op harness's bound); the plain rms of got - ref where ref is all zero.
double rms_ratio(const std::vector<float>& got, const std::vector<double>& ref);
// An environment variable set (value) or unset (nullopt) for the object's life, then put back as it was — so that a
// test's setting neither leaks into later tests and tools nor clobbers one the whole run was started with.
class ScopedEnv {
public:
    ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
        if (const char* v = std::getenv(name)) before_ = v;
        value ? ::setenv(name, value->c_str(), 1) : ::unsetenv(name);
    }
    ~ScopedEnv() { before_ ? ::setenv(name_.c_str(), before_->c_str(), 1) : ::unsetenv(name_.c_str()); }
    ScopedEnv(const ScopedEnv&) = delete;
    ScopedEnv& operator=(const ScopedEnv&) = delete;

private:
    std::string name_;
    std::optional<std::string> before_;
};
// retro's thread count (core/threads.h: what parallel_for and the GEMM tiles use) for the object's life, then the one
// before put back.
class ThreadCountScope {
public:
    explicit ThreadCountScope(int n) : before_(retro::thread_count()) { retro::set_thread_count(n); }
    ~ThreadCountScope() { retro::set_thread_count(before_); }
    ThreadCountScope(const ThreadCountScope&) = delete;
    ThreadCountScope& operator=(const ThreadCountScope&) = delete;

private:
    int before_;
};

// Runs `child` in a forked process as the user nobody (root reads every file, so permission checks need another user)
// and returns the exit code it returns; -1 where the child cannot become nobody or nobody cannot reach `must_reach`
// (a private TMPDIR): the caller then skips. An exception out of `child` exits 125.
int exit_code_as_nobody(const std::filesystem::path& must_reach, const std::function<int()>& child);
// n standard normal floats from rng (the host-emulator kernel tests' inputs).
inline std::vector<float> normal_floats(std::size_t n, std::mt19937& rng) {
    std::normal_distribution<float> d(0.0f, 1.0f);
    std::vector<float> x(n);
    for (auto& e : x) e = d(rng);
    return x;
}

}  // namespace retro::test

// Marks the current test skipped (printed, and exit 77 under ctest) and leaves it.
#define RETRO_SKIP(why)                                             \
    do {                                                            \
        std::printf("skipped: %s\n", why);                          \
        ::retro::test::g_skipped = true;                            \
        return;                                                     \
    } while (0)
