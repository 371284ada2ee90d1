// retro-train's graceful stop (train/train_stop.h): one sender's signal repeated at once (GNU timeout sends its signal
// to the command and then to its process group) is one request, so the step under way still finishes and its
// checkpoint is saved; a second request from elsewhere (a second Ctrl-C) stops at once.
#include <signal.h>

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "test_train_fixtures.h"
#include "test_util.h"
#include "train/train_stop.h"

using namespace retro;
namespace fs = std::filesystem;

namespace {
StopSignalSender sent(int sig, int code, long long pid, double seconds) {
    StopSignalSender s;
    s.signal = sig;
    s.code = code;
    s.pid = pid;
    s.at_ns = static_cast<long long>(seconds * 1e9);
    return s;
}
}  // namespace

TEST_CASE("train stop: a repeat is the same signal by kill(2) from the first's sender or the parent within 250 ms") {
    const long long parent = 777;
    const StopSignalSender first = sent(SIGINT, SI_USER, 4242, 100.0);
    CHECK(stop_signal_repeats_request(first, sent(SIGINT, SI_USER, 4242, 100.00001), parent));   // timeout's pair
    CHECK(stop_signal_repeats_request(first, sent(SIGINT, SI_USER, 4242, 100.2), parent));
    CHECK_FALSE(stop_signal_repeats_request(first, sent(SIGINT, SI_USER, 4242, 100.5), parent));   // asked again, later
    CHECK_FALSE(stop_signal_repeats_request(first, sent(SIGINT, SI_USER, 4343, 100.1), parent));   // another process
    CHECK_FALSE(stop_signal_repeats_request(first, sent(SIGTERM, SI_USER, 4242, 100.1), parent));  // another signal
    // a terminal's Ctrl-C comes from the kernel: a second one is a second request, however soon
    const StopSignalSender tty = sent(SIGINT, SI_KERNEL, 0, 100.0);
    CHECK_FALSE(stop_signal_repeats_request(tty, sent(SIGINT, SI_KERNEL, 0, 100.1), parent));
    // ... but the parent passing that Ctrl-C on (timeout got it from the terminal too) repeats it, as does the parent
    // passing on a `kill %1` that reached both from the shell
    CHECK(stop_signal_repeats_request(tty, sent(SIGINT, SI_USER, parent, 100.001), parent));
    CHECK(stop_signal_repeats_request(sent(SIGTERM, SI_USER, 555, 100.0), sent(SIGTERM, SI_USER, parent, 100.001), parent));
    CHECK_FALSE(stop_signal_repeats_request(tty, sent(SIGINT, SI_USER, parent, 100.3), parent));   // the parent, later
    // raise(3) in the process itself is no sender to repeat
    CHECK_FALSE(stop_signal_repeats_request(sent(SIGINT, SI_TKILL, 4242, 100.0), sent(SIGINT, SI_TKILL, 4242, 100.1), parent));
}

namespace {
// retro-train (steps of a large batch: tenths of a second) started in the background of a shell that waits for its
// first step, signals it with `signals` (shell commands; $pid is the run), waits for it and prints "rc=N"; returns
// that output and retro-train's stderr.
struct StoppedRun {
    std::string script_output, stderr_text;
};
StoppedRun stop_a_run(const fs::path& dir, const fs::path& out, const std::string& signals, const std::string& extra = "") {
    const fs::path err = out.string() + ".err";
    // SIGTERM in the callers: a non-interactive shell's background job ignores SIGINT (and RetroKit keeps it ignored)
    const std::string train = test::tool_path("retro-train") + " --db " + (dir / "db").string() + " --knn " +
                              (dir / "knn").string() + " --config " + test::config_path() +
                              " --batch-size 16 --grad-accum 64 --threads 1 --warmup 1 --steps 1000000 --val-every 0"
                              " --checkpoint-every 1000000 --quiet --out " + out.string() + extra;
    // waitstop: until the run has said "stopping after this step" (the first signal handled), with builtins only (a
    // `sleep` between the two signals, exec'd on a loaded machine, could pass the 250 ms a repeat is taken within)
    const std::string script = "waitstop() { n=0; until read -r l < " + err.string() +
                               " && [ -n \"$l\" ]; do n=$((n+1)); [ $n -gt 3000000 ] && break; done; }; " + train +
                               " 2>" + err.string() + " & pid=$!; i=0; while [ ! -s " + (out / "metrics.jsonl").string() +
                               " ] && kill -0 $pid 2>/dev/null && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done; " +
                               signals + "; wait $pid; echo rc=$?";
    const test::RunResult r = test::run_command(script + " 2>&1");
    std::ifstream in(err);
    return {r.out + r.err, std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>())};
}
}  // namespace

TEST_CASE("train stop: a signal sent twice by one process while a step runs still saves that step's checkpoint") {
    test::TempDir dir("train-stop-twice");
    test::write_tiny_db(dir / "db", dir / "knn", 4, 16, 600, 3);
    const fs::path out = dir / "run";
    // as GNU timeout does (the command, then its process group), but with the first signal handled before the second
    const StoppedRun r = stop_a_run(dir.path, out, "kill -TERM $pid; waitstop; kill -TERM $pid 2>/dev/null");
    INFO("script output: ", r.script_output);
    INFO("retro-train's stderr: ", r.stderr_text);
    CHECK(r.script_output.find("rc=143") != std::string::npos);
    CHECK(r.stderr_text.find("stopping after this step") != std::string::npos);
    const std::string held = "continue with the same command and --resume: " + out.string() + " holds a complete checkpoint at step ";
    const auto at = r.stderr_text.find(held);
    REQUIRE(at != std::string::npos);   // (not "before the first checkpoint": the repeat did not stop it at once)
    const long long step = std::stoll(r.stderr_text.substr(at + held.size()));
    CHECK(step >= 1);
    char name[32];
    std::snprintf(name, sizeof name, "step_%08lld", step);
    CHECK(fs::exists(out / "checkpoints" / name / "DONE"));
    std::ifstream metrics(out / "metrics.jsonl");
    long long lines = 0;
    for (std::string line; std::getline(metrics, line);) lines++;
    CHECK(lines == step);

    // a second request from another process (a shell of its own) stops at once, saving nothing more; a run given
    // --force is told to resume with --resume in place of it (the two contradict each other)
    const fs::path out2 = dir / "run2";
    const StoppedRun r2 = stop_a_run(dir.path, out2, "kill -TERM $pid; waitstop; sh -c \"kill -TERM $pid\" 2>/dev/null", " --force");
    INFO("second run's script output: ", r2.script_output);
    INFO("second run's stderr: ", r2.stderr_text);
    CHECK(r2.script_output.find("rc=143") != std::string::npos);
    CHECK(r2.stderr_text.find("stopping after this step") != std::string::npos);
    CHECK(r2.stderr_text.find("retro-train: interrupted; before the first checkpoint: run the same command, --resume in "
                              "place of --force (it starts at step 0)") != std::string::npos);
    CHECK_FALSE(fs::exists(out2 / "checkpoints"));
}

// A helper's kill soak (session 68): a stop asked for during the last step let the run finish and exit 0, so a
// script's Ctrl-C went on to its next command. The run still finishes (its work is whole), then dies by the signal.
TEST_CASE("train stop: a signal during the last step finishes the run, then ends it by the signal") {
    test::TempDir dir("train-stop-last");
    test::write_tiny_db(dir / "db", dir / "knn", 4, 16, 2000, 3);
    const fs::path out = dir / "run", err = dir / "run.err";
    // one step of many micro-batches (seconds); the signal goes once config.json is written, just before the step
    const std::string train = test::tool_path("retro-train") + " --db " + (dir / "db").string() + " --knn " +
                              (dir / "knn").string() + " --config " + test::config_path() +
                              " --batch-size 16 --grad-accum 200 --threads 1 --warmup 1 --steps 1 --quiet --out " +
                              out.string();
    const test::RunResult r = test::run_command(
        "{ " + train + " 2>" + err.string() + " & pid=$!; i=0; while [ ! -e " + (out / "config.json").string() +
        " ] && kill -0 $pid 2>/dev/null && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done; sleep 0.3; " +
        "kill -TERM $pid; wait $pid; echo rc=$?; }");
    const std::string stderr_text = test::read_text(err);
    INFO("script output: ", r.out, r.err);
    INFO("retro-train's stderr: ", stderr_text);
    CHECK(r.out == "rc=143\n");
    CHECK(stderr_text.find("stopping after this step") != std::string::npos);
    CHECK(stderr_text.find("retro-train: interrupted; the run ended with the step under way: " + out.string() +
                           " is complete (model.safetensors, manifest.json), nothing to resume") != std::string::npos);
    CHECK(fs::exists(out / "manifest.json"));
    CHECK(fs::exists(out / "model.safetensors"));
    // and it is complete: --resume has nothing to do
    const test::RunResult again = test::run_command(train + " --resume");
    CHECK_MESSAGE(again.exit_code == 0, again.err);
}
