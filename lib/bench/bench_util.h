// Helpers shared by the retro-bench subcommands: median timing, the machine's sgemm rate, peak
// resident memory around one call (Linux VmHWM), the device description and a JSON stamp.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace retro::bench {

// Runs fn once to warm up, then `repeats` times; returns the median wall time in milliseconds.
double median_ms(const std::function<void()>& fn, int repeats);

// GFLOP/s of a square n×n×n cblas_sgemm on all threads (best of `repeats`), 2n^3 flops per call.
double sgemm_gflops(int n = 2048, int repeats = 3);
// Host memory copy bandwidth in GB/s, counting bytes read and written (memcpy of n bytes moves 2n), best of
// `repeats` after a warm-up, split over thread_count() threads (one contiguous slice each).
double memcpy_gbps(std::size_t bytes = std::size_t(256) << 20, int repeats = 3);

// Bytes the process's resident set grew to above its size before fn ran (VmHWM after reset), or -1.
std::int64_t peak_extra_rss(const std::function<void()>& fn);

// /proc/cpuinfo "model name" (or "unknown cpu") and the OpenBLAS kernels in use (core/blas_core.h), e.g.
// "Intel(R) Xeon(R) Processor (OpenBLAS SkylakeX)": a figure's GEMMs depend on both
std::string cpu_model();
std::string today_utc();   // YYYY-MM-DDTHH:MM:SSZ

// {"tool", "version", "commit", "date", "command"} for every result file.
nlohmann::json stamp(const std::string& tool, const std::string& command_line);

// Writes a subcommand's --json result to `path` atomically, with the envelope every result file shares since session
// 42 added where the subcommand's own layout lacks it (its own keys are kept as they are, for older readers):
// "stamp" {tool, version, commit, date, command} (chunk, knn and retention also keep those at the top level) and
// "machine" {cpu, hardware_threads}.
void bench_json_write(const std::string& path, nlohmann::json result, const std::string& tool, const std::string& command_line);
// `--json -`: the JSON goes to standard output and everything the bench prints there (its tables) to stderr from now
// on, so that `retro-bench ... --json - | jq` reads the JSON alone (a new user's pass, session 54: a script needed a
// temporary file). Idempotent; bench_json_write("-") then writes to the standard output saved here. A closed standard
// output is refused.
void bench_json_to_stdout();
// First thing in every subcommand: `--json -` as above; without --json the table is the result, and a closed standard
// output is refused (the table went nowhere, exit 0).
void bench_outputs_begin(const std::string& json);

// An output option (--json, --plot, ...) that names an input of the run (a file or a folder it reads) or a path
// inside one, or two outputs that name the same file: UserError naming the option, before any work (every
// subcommand's --json wrote over its --config, --base-npy, --corpus or tokenizer, exit 0). Empty paths are skipped.
struct BenchPath {
    std::string what;   // "--config", "the --model folder", ...
    std::string path;
};
void bench_refuse_outputs_over_inputs(const std::vector<BenchPath>& outputs, const std::vector<BenchPath>& inputs);

// Runs a shell command (a peer script) and returns the last stdout line that parses as a JSON object,
// or null when there is none; the command's stderr passes through.
nlohmann::json run_json_command(const std::string& command);

// v with `digits` decimals ("%.*f"), for table cells.
// std::system(command), but a command stopped by Ctrl-C or SIGTERM (the shell reports 130/143, or died of the signal)
// stops this process too, by the same signal: std::system ignores SIGINT while it waits, so a Ctrl-C reached only the
// peer and the bench went on to blame the peer's packages. Returns the exit status otherwise.
int run_shell(const std::string& command);

std::string format_fixed(double v, int digits);
// Seconds of steady clock since t0.
double seconds_since(std::chrono::steady_clock::time_point t0);

// Renders rows of cells as an aligned text table (first row = header).
std::string format_table(const std::vector<std::vector<std::string>>& rows);

// Writes a gnuplot script + data and runs gnuplot to make `png`; returns false with a note on stderr
// (how to install gnuplot) when it is not available.
bool gnuplot_png(const std::string& png, const std::string& script_body, const std::string& data);
// Whether gnuplot is missing, warned of once (at --plot's parsing, before the timing, and not again at the end).
bool gnuplot_missing_warned(const std::string& png);

}  // namespace retro::bench
