// Implementation of bench_util.h (timing, sgemm rate, peak RSS via /proc/self/{clear_refs,status}, stamps,
// peer commands through popen).
#include "bench/bench_util.h"

#include "core/output_folder.h"

#include <cblas.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cerrno>
#include <cstring>
#include <iostream>
#include <ctime>
#include <filesystem>
#include <memory>
#include <fstream>
#include <sstream>
#include <vector>

#include "core/atomic_file.h"
#include "core/blas_core.h"
#include "core/child_process.h"
#include "core/error.h"
#include "core/gnuplot.h"
#include "core/interrupt_note.h"
#include "core/log.h"
#include "core/std_streams.h"
#include "core/threads.h"
#include "retrokit/version.h"

namespace retro::bench {

double median_ms(const std::function<void()>& fn, int repeats) {
    fn();
    std::vector<double> t;
    for (int r = 0; r < std::max(1, repeats); ++r) {
        auto a = std::chrono::steady_clock::now();
        fn();
        auto b = std::chrono::steady_clock::now();
        t.push_back(std::chrono::duration<double, std::milli>(b - a).count());
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

double sgemm_gflops(int n, int repeats) {
    std::vector<float> A(static_cast<std::size_t>(n) * n, 0.5f), B(A.size(), 0.25f), C(A.size(), 0.0f);
    openblas_set_num_threads(thread_count());
    double best = 1e300;
    for (int r = 0; r < repeats + 1; ++r) {
        auto a = std::chrono::steady_clock::now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, A.data(), n, B.data(), n, 0.0f,
                    C.data(), n);
        auto b = std::chrono::steady_clock::now();
        if (r > 0) best = std::min(best, std::chrono::duration<double>(b - a).count());
    }
    return 2.0 * n * double(n) * n / best / 1e9;
}

double memcpy_gbps(std::size_t bytes, int repeats) {
    std::vector<char> a(bytes, 1), b(bytes, 0);
    const std::int64_t T = std::max(1, thread_count()), slice = static_cast<std::int64_t>(bytes) / T;
    double best = 1e300;
    for (int r = 0; r < repeats + 1; ++r) {
        auto t0 = std::chrono::steady_clock::now();
        parallel_for(T, [&](std::int64_t t) {
            const std::int64_t from = t * slice, to = t + 1 == T ? static_cast<std::int64_t>(bytes) : from + slice;
            std::memcpy(b.data() + from, a.data() + from, static_cast<std::size_t>(to - from));
        });
        auto t1 = std::chrono::steady_clock::now();
        if (r > 0) best = std::min(best, std::chrono::duration<double>(t1 - t0).count());
    }
    return 2.0 * static_cast<double>(bytes) / best / 1e9;
}

namespace {
std::int64_t status_kb(const char* key) {
    std::ifstream f("/proc/self/status");
    std::string line;
    while (std::getline(f, line))
        if (line.rfind(key, 0) == 0) return std::atoll(line.c_str() + std::string(key).size());
    return -1;
}
}  // namespace

std::int64_t peak_extra_rss(const std::function<void()>& fn) {
    const std::int64_t before = status_kb("VmRSS:");
    bool reset = false;
    if (std::FILE* f = std::fopen("/proc/self/clear_refs", "w")) {   // "5" resets VmHWM to VmRSS
        reset = std::fputs("5", f) >= 0;
        reset = (std::fclose(f) == 0) && reset;
    }
    fn();
    const std::int64_t peak = status_kb("VmHWM:");
    if (!reset || before < 0 || peak < 0) return -1;
    return std::max<std::int64_t>(0, peak - before) * 1024;
}

std::string cpu_model() {
    std::ifstream f("/proc/cpuinfo");
    std::string line, model = "unknown cpu";
    while (std::getline(f, line))
        if (line.rfind("model name", 0) == 0) {
            auto p = line.find(':');
            if (p != std::string::npos) {
                model = line.substr(p + 2);
                break;
            }
        }
    return model + " (OpenBLAS " + blas_core_name() + ")";
}

std::string today_utc() {
    std::time_t t = std::time(nullptr);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
    return buf;
}

nlohmann::json stamp(const std::string& tool, const std::string& command_line) {
    return {{"tool", tool}, {"version", RETROKIT_VERSION}, {"commit", RETROKIT_GIT_COMMIT},
            {"date", today_utc()}, {"command", command_line}};
}

namespace {
int g_json_fd = -1;   // bench_json_to_stdout: the standard output the JSON goes to
}  // namespace

void bench_json_write(const std::string& path, nlohmann::json result, const std::string& tool, const std::string& command_line) {
    RETRO_CHECK(result.is_object(), "a bench result is a JSON object");
    if (!result.contains("stamp") || !result["stamp"].is_object()) {
        nlohmann::json st = stamp(tool, command_line);
        for (auto& [key, value] : st.items())   // the subcommand's own stamp fields where it wrote them at the top level
            if (result.contains(key)) value = result[key];
        result["stamp"] = st;
    }
    if (!result.contains("machine") || !result["machine"].is_object()) result["machine"] = nlohmann::json::object();
    nlohmann::json& machine = result["machine"];
    if (!machine.contains("cpu")) machine["cpu"] = cpu_model();
    if (!machine.contains("hardware_threads")) machine["hardware_threads"] = hardware_threads();
    if (path == "-") {
        bench_json_to_stdout();
        const std::string text = result.dump(2) + "\n";
        std::fflush(stdout);   // (the tables, on stderr by now)
        for (std::size_t at = 0; at < text.size();) {
            const ssize_t n = ::write(g_json_fd, text.data() + at, text.size() - at);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) user_error_in("standard output", std::string("write failed: ") + std::strerror(errno));
            at += static_cast<std::size_t>(n);
        }
        return;
    }
    write_file_atomic(path, result.dump(2) + "\n");
}

void bench_json_to_stdout() {
    if (g_json_fd >= 0) return;
    std_output_required("the JSON");
    std::fflush(stdout);
    std::cout.flush();
    g_json_fd = ::fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);   // (not inherited by the peers and tools the bench runs)
    if (g_json_fd < 0 || ::dup2(STDERR_FILENO, STDOUT_FILENO) < 0)
        user_error_in("standard output", std::string("cannot be kept for the JSON: ") + std::strerror(errno));
    std::setvbuf(stdout, nullptr, _IOLBF, 0);   // the tables in step with the log lines on stderr, not held back
}

void bench_outputs_begin(const std::string& json) {
    if (json == "-") bench_json_to_stdout();
    else if (json.empty()) std_output_required("the table");   // (with --json FILE the results are kept in the file)
}

nlohmann::json run_json_command(const std::string& command) {
    ChildProcess child({"/bin/sh", "-c", command}, {}, true);   // (a signal to the bench reaches the peer too)
    const std::string out = child.read_all_stdout();
    child.wait();
    std::istringstream lines(out);
    nlohmann::json last;
    for (std::string line; std::getline(lines, line);)
        if (!line.empty() && line.front() == '{') {
            auto j = nlohmann::json::parse(line, nullptr, false);
            if (!j.is_discarded()) last = std::move(j);
        }
    return last;
}

int run_shell(const std::string& command) {
    const int status = ChildProcess::shell(command);   // (a SIGINT or SIGTERM to the bench is passed on, then ends it)
    int sig = 0;
    if (WIFSIGNALED(status)) sig = WTERMSIG(status);
    else if (WIFEXITED(status) && (WEXITSTATUS(status) == 128 + SIGINT || WEXITSTATUS(status) == 128 + SIGTERM))
        sig = WEXITSTATUS(status) - 128;   // sh -c reports its child's death by a signal as 128 + n
    if (sig == SIGINT || sig == SIGTERM) {
        std::fflush(stdout);
        interrupt_note_die(sig);   // the default action: scratch folders go with their watchdogs, a script stops
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + sig;
}

std::string format_fixed(double v, int digits) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*f", digits, v);
    return buf;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::string format_table(const std::vector<std::vector<std::string>>& rows) {
    std::vector<std::size_t> w;
    for (const auto& r : rows)
        for (std::size_t i = 0; i < r.size(); ++i) {
            if (w.size() <= i) w.push_back(0);
            w[i] = std::max(w[i], r[i].size());
        }
    std::ostringstream os;
    for (const auto& r : rows) {
        for (std::size_t i = 0; i < r.size(); ++i)
            os << (i ? "  " : "") << std::string(w[i] - r[i].size(), ' ') << r[i];
        os << "\n";
    }
    return os.str();
}

bool gnuplot_missing_warned(const std::string& png) {
    static bool warned = false;
    if (gnuplot_available()) return false;
    if (!warned) log_warn("--plot " + png + ": gnuplot is not installed (fix: apt-get install gnuplot-nox); table and JSON are unaffected");
    warned = true;
    return true;
}

bool gnuplot_png(const std::string& png, const std::string& script_body, const std::string& data) {
    if (gnuplot_missing_warned(png)) return false;
    // the plot is a side output: a failure (gnuplot's, or a full disk) is said and the table and JSON stand
    try {
        write_file_atomic(png, gnuplot_png_bytes(gnuplot_datablock("data", data) + "datafile = '$data'\n" + script_body, 1000, 650));
    } catch (const std::exception& e) {
        log_warn("--plot " + png + ": " + e.what() + "; table and JSON are unaffected");
        return false;
    }
    return true;
}

void bench_refuse_outputs_over_inputs(const std::vector<BenchPath>& outputs, const std::vector<BenchPath>& inputs) {
    for (std::size_t i = 0; i < outputs.size(); ++i) {
        const BenchPath& out = outputs[i];
        if (out.path.empty() || (out.what == "--json" && out.path == "-")) continue;   // (standard output: no file)
        const auto at = path_resolved(out.path);
        for (const BenchPath& in : inputs)
            if (!in.path.empty() && path_inside(at, path_resolved(in.path)))
                user_error_in(out.what, "is " + out.path + ", " + (at == path_resolved(in.path) ? "" : "inside ") + in.what +
                                            " " + in.path + ": writing it would replace an input of this run",
                              "give a path outside the run's inputs");
        for (std::size_t j = 0; j < i; ++j)
            if (!outputs[j].path.empty() && at == path_resolved(outputs[j].path))
                user_error_in(out.what, "is " + out.path + ", the file " + outputs[j].what + " writes too",
                              "give each output its own file");
    }
}

}  // namespace retro::bench
