// Implementation of blas_core.h.
#include "core/blas_core.h"

#include <cblas.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <string>
#include <string_view>

#include "core/memory_budget.h"

namespace retro {

namespace {

// OpenBLAS's x86 core names (driver/others/dynamic.c's corename table) for CPUs without AVX2: what a CPU it does not
// know falls back to ("Prescott" on x86-64), and what it rightly picks for old CPUs (left alone unless the CPU
// itself reports AVX2 and FMA).
constexpr std::array<std::string_view, 20> kPreAvx2Cores = {
    "Unknown", "Katmai", "Coppermine", "Northwood", "Prescott", "Banias", "Atom", "Core2", "Penryn", "Dunnington",
    "Nehalem", "Sandybridge", "Opteron", "Opteron_SSE3", "Barcelona", "Bobcat", "Bulldozer", "Piledriver",
    "Steamroller", "Nano"};

bool cpu_avx512() {
#if defined(__x86_64__) || defined(__i386__)
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512vl");
#else
    return false;
#endif
}

bool cpu_avx2_fma() {
#if defined(__x86_64__) || defined(__i386__)
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    return false;
#endif
}

// Whether libgomp refuses `value` for OMP_NUM_THREADS (env.c: a comma-separated list of positive integers, white
// space around each). A superset of what it takes counts as valid, so a value it takes is never dropped.
bool omp_num_threads_refused(std::string_view value) {
    bool positive = false;   // the current item has a digit other than 0
    for (std::size_t i = 0; i <= value.size(); ++i) {
        const char c = i < value.size() ? value[i] : ',';
        if (c == ',') {
            if (!positive) return true;
            positive = false;
        } else if (c >= '1' && c <= '9') {
            positive = true;
        } else if (c != '0' && c != '+' && !std::isspace(static_cast<unsigned char>(c))) {   // (libgomp skips isspace)
            return true;
        }
    }
    return false;
}

}  // namespace

std::string blas_core_name() {
    const char* name = openblas_get_corename();
    return name ? name : "";
}

std::string blas_core_upgrade(const std::string& detected, bool avx512, bool avx2_fma) {
    const bool pre_avx2 = std::find(kPreAvx2Cores.begin(), kPreAvx2Cores.end(), detected) != kPreAvx2Cores.end();
    if (!pre_avx2) return "";
    if (avx512) return "SkylakeX";
    if (avx2_fma) return "Haswell";
    return "";
}

std::string blas_core_upgrade_here(const std::string& detected) {
    return blas_core_upgrade(detected, cpu_avx512(), cpu_avx2_fma());
}

namespace {
// The running program, if it is the one argv names (under valgrind /proc/self/exe is valgrind's tool), or "".
std::string self_program(char** argv) {
    if (!argv || !argv[0]) return "";
    char self[PATH_MAX];
    const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) return "";
    self[n] = '\0';
    namespace fs = std::filesystem;
    return fs::path(self).filename() == fs::path(argv[0]).filename() ? std::string(self) : std::string();
}

// Replaces the process with `self` and argv, the environment as set now; returns only where the exec fails.
void exec_self(const std::string& self, char** argv) {
    // libgomp warned of a value it refused and runs without it: the restarted program would warn again
    if (const char* omp = std::getenv("OMP_NUM_THREADS"); omp && omp_num_threads_refused(omp)) ::unsetenv("OMP_NUM_THREADS");
    ::execv(self.c_str(), argv);
}
}  // namespace

void reexec_for_blas_core(char** argv) {
    if (!argv || !argv[0]) return;
    if (std::getenv("OPENBLAS_CORETYPE") || std::getenv("RETRO_BLAS_CORE_FROM")) return;   // chosen, or tried once
    if (const char* keep = std::getenv("RETRO_BLAS_CORE"); keep && std::string_view(keep) == "keep") return;
    const std::string detected = blas_core_name();
    const std::string better = blas_core_upgrade_here(detected);
    if (better.empty()) return;
    const std::string self = self_program(argv);
    if (self.empty()) return;
    // (RETRO_BLAS_CORE_FROM first: the restarted program must see it, or it could try again)
    if (::setenv("RETRO_BLAS_CORE_FROM", detected.c_str(), 1) != 0) return;
    if (::setenv("OPENBLAS_CORETYPE", better.c_str(), 1) == 0) exec_self(self, argv);   // (failed: the detected kernels)
    ::unsetenv("OPENBLAS_CORETYPE");
    ::unsetenv("RETRO_BLAS_CORE_FROM");
}

int blas_threads_for_address_limit(std::int64_t limit_bytes, int threads) {
    if (limit_bytes <= 0 || threads <= 1) return threads;
    const std::int64_t affordable = limit_bytes / 4 / kBlasThreadBufferBytes;
    return static_cast<int>(std::clamp<std::int64_t>(affordable, 1, threads));
}

void reexec_for_address_limit(char** argv) {
    const std::int64_t limit = address_space_limit();
    if (limit == std::numeric_limits<std::int64_t>::max()) return;
    // a count the user chose (OpenBLAS reads these three, in this order), or one this set already
    for (const char* chosen : {"OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS", "RETRO_BLAS_THREADS_FROM"})
        if (const char* v = std::getenv(chosen); v && *v) return;
    const int started = openblas_get_num_threads();
    const int fits = blas_threads_for_address_limit(limit, started);
    if (fits >= started) return;
    const std::string self = self_program(argv);
    if (self.empty()) return;
    if (::setenv("RETRO_BLAS_THREADS_FROM", std::to_string(started).c_str(), 1) != 0) return;
    if (::setenv("OPENBLAS_NUM_THREADS", std::to_string(fits).c_str(), 1) == 0) exec_self(self, argv);
    ::unsetenv("OPENBLAS_NUM_THREADS");
    ::unsetenv("RETRO_BLAS_THREADS_FROM");
}

std::string blas_core_note() {
    const std::string core = blas_core_name();
    std::string note = "OpenBLAS kernels: " + core;
    // (a child that inherited RETRO_BLAS_CORE_FROM without OPENBLAS_CORETYPE runs the detected kernels: no claim)
    if (const char* from = std::getenv("RETRO_BLAS_CORE_FROM"); from && std::getenv("OPENBLAS_CORETYPE") && core != from)
        note += std::string(" (OPENBLAS_CORETYPE set by RetroKit: OpenBLAS had detected ") + from +
                ", a generic fallback, on a CPU with better; RETRO_BLAS_CORE=keep to keep it)";
    return note;
}

}  // namespace retro
