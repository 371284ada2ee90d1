// core/stderr_capture.h: what a library prints to fd 2 comes back as text with stderr put back (nested, through
// exceptions), the interrupt note still reaches the real stderr meanwhile, and FAISS's k-means warning on a small
// training set goes through the log (so --quiet silences it) instead of through raw.
#include "core/interrupt_note.h"
#include "core/error.h"
#include "core/log.h"
#include "core/output_folder.h"
#include "core/stderr_capture.h"
#include "index/faiss_index.h"

#include <doctest/doctest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <csignal>
#include <cstdio>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

using namespace retro;

namespace {
ino_t stderr_inode() {
    struct stat st {};
    REQUIRE(::fstat(2, &st) == 0);
    return st.st_ino;
}
}  // namespace

TEST_CASE("core: capture_stderr returns what fd 2 got, nests, and puts stderr back, also after an exception") {
    const ino_t before = stderr_inode();
    std::string inner;
    const std::string outer = capture_stderr([&] {
        std::fprintf(stderr, "one %d\n", 1);
        inner = capture_stderr([] {
            const char line[] = "two\n";
            CHECK(::write(2, line, sizeof line - 1) == 4);
        });
        std::fputs("three\n", stderr);
    });
    CHECK(inner == "two\n");
    CHECK(outer == "one 1\nthree\n");
    CHECK(stderr_inode() == before);
    std::string thrown;
    try {
        (void)capture_stderr([] {
            std::fputs("lost with the exception\n", stderr);
            throw std::runtime_error("from fn");
        });
    } catch (const std::runtime_error& e) {
        thrown = e.what();
    }
    CHECK(thrown == "from fn");
    CHECK(stderr_inode() == before);
}

TEST_CASE("core: pass_on_library_lines gives each line as the library's warning, or nothing under --quiet") {
    const LogLevel level = log_level();
    log_set_level(LogLevel::LOG_WARN);
    const std::string said = capture_stderr(
        [] { pass_on_library_lines("FAISS", "WARNING clustering 10 points to 4 centroids\n\n  WARNING: other \r\nplain"); });
    CHECK(said == "warning: FAISS: clustering 10 points to 4 centroids\nwarning: FAISS: other\nwarning: FAISS: plain\n");
    log_set_level(LogLevel::LOG_ERROR);
    CHECK(capture_stderr([] { pass_on_library_lines("FAISS", "WARNING clustering\n"); }).empty());
    log_set_level(level);
}

namespace {

// Runs `body` in a forked child whose fd 2 is a pipe (the handlers a test installs are the process's: a child keeps
// them from the test runner); returns what the child wrote there, and sets `status` as waitpid gives it.
std::string child_stderr(const std::function<void()>& body, int& status) {
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        ::close(fds[0]);
        ::dup2(fds[1], 2);
        // (a handler an earlier case installed in this process, when the cases run in one: not the child's to keep)
        ::signal(SIGINT, SIG_DFL);
        ::signal(SIGTERM, SIG_DFL);
        body();
        ::_exit(0);
    }
    ::close(fds[1]);
    std::string got;
    char buf[512];
    for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) got.append(buf, static_cast<std::size_t>(n));
    ::close(fds[0]);
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    return got;
}

}  // namespace

TEST_CASE("core: a Ctrl-C while stderr is captured still prints the interrupt note on the real stderr") {
    int status = 0;
    const std::string got = child_stderr(
        [] {
            interrupt_note_install("retro-test", "out", "continue with the same command and --resume");
            (void)capture_stderr([] {
                std::fputs("captured\n", stderr);
                ::raise(SIGINT);   // (the note's handler ends the process by the signal)
            });
        },
        status);
    CHECK(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == SIGINT);
    CHECK(got.find("retro-test: interrupted; out keeps its finished parts: continue with the same command") !=
          std::string::npos);
    CHECK(got.find("captured") == std::string::npos);
}

TEST_CASE("core: the interrupt note starts its own line only where a progress bar is drawn in place") {
    // stderr a pipe here, as a log file is: the note alone (an empty line came first; a new user's pass, session 54)
    int status = 0;
    const std::string got = child_stderr(
        [] {
            interrupt_note_install_line("retro-test: interrupted; nothing was written: run the same command again");
            ::raise(SIGINT);
        },
        status);
    CHECK(WIFSIGNALED(status));
    CHECK(got == "retro-test: interrupted; nothing was written: run the same command again\n");
}

TEST_CASE("core: the interrupt note removes the empty folder the run made, and only an empty one") {
    // retro-tokenizer train stopped by Ctrl-C left its empty --out (a helper's pass, session 54)
    const std::string base = "/tmp/retrokit-note-" + std::to_string(::getpid());
    for (const bool with_file : {false, true}) {
        CAPTURE(with_file);
        const std::string dir = base + (with_file ? "-full" : "-empty");
        REQUIRE(::mkdir(dir.c_str(), 0755) == 0);
        if (with_file) std::fclose(std::fopen((dir + "/kept").c_str(), "w"));
        int status = 0;
        (void)child_stderr(
            [&] {
                interrupt_note_install_line("retro-test: interrupted");
                interrupt_note_remove_empty(dir);
                ::raise(SIGINT);
            },
            status);
        CHECK(WIFSIGNALED(status));
        struct stat st {};
        CHECK((::stat(dir.c_str(), &st) == 0) == with_file);
        if (with_file) {
            std::remove((dir + "/kept").c_str());
            ::rmdir(dir.c_str());
        }
    }
}

TEST_CASE("core: the interrupt note removes the folders above --out the run made, up to the outermost, where empty") {
    // Ctrl-C of retro-tokenizer train --out deep/a/b left deep/a (the notes' list, sessions 53-55)
    const std::string base = "/tmp/retrokit-chain-" + std::to_string(::getpid());
    REQUIRE(::mkdir(base.c_str(), 0755) == 0);   // exists before the run: never removed
    struct stat st {};
    const auto exists = [&](const std::string& p) { return ::stat(p.c_str(), &st) == 0; };
    for (const int case_ : {0, 1, 2}) {   // 0: all made and empty; 1: a file in deep/a; 2: a trailing separator
        CAPTURE(case_);
        const std::string deep = base + "/deep", a = deep + "/a", b = a + "/b";
        REQUIRE(::mkdir(deep.c_str(), 0755) == 0);
        REQUIRE(::mkdir(a.c_str(), 0755) == 0);
        REQUIRE(::mkdir(b.c_str(), 0755) == 0);
        if (case_ == 1) std::fclose(std::fopen((a + "/kept").c_str(), "w"));
        int status = 0;
        (void)child_stderr(
            [&] {
                interrupt_note_install_line("retro-test: interrupted");
                interrupt_note_remove_empty(case_ == 2 ? b + "/" : b, deep);
                ::raise(SIGINT);
            },
            status);
        CHECK(WIFSIGNALED(status));
        CHECK_FALSE(exists(b));
        CHECK(exists(a) == (case_ == 1));
        CHECK(exists(deep) == (case_ == 1));
        CHECK(exists(base));
        std::remove((a + "/kept").c_str());
        ::rmdir(a.c_str());
        ::rmdir(deep.c_str());
    }
    ::rmdir(base.c_str());
}

TEST_CASE("core: a refused run removes the folders above --out it made for it, and none it did not make") {
    namespace fs = std::filesystem;
    const fs::path base = "/tmp/retrokit-refused-" + std::to_string(::getpid());
    fs::create_directories(base / "kept");
    for (const bool other_file : {false, true}) {
        CAPTURE(other_file);
        const fs::path out = base / "deep" / "a" / "b";
        try {
            NewOutputFolder made(out.string());
            fs::create_directories(out);
            output_folder_lock(out.string(), "retro-test");   // (a folder is removed only while this run holds its lock)
            if (other_file) std::fclose(std::fopen((base / "deep" / "other").c_str(), "w"));   // written meanwhile
            throw UserError("refused");
        } catch (const UserError&) {
        }
        CHECK_FALSE(fs::exists(out));
        CHECK_FALSE(fs::exists(base / "deep" / "a"));
        CHECK(fs::exists(base / "deep") == other_file);
        CHECK(fs::exists(base / "kept"));
        fs::remove_all(base / "deep");
    }
    fs::remove_all(base);
}

TEST_CASE("core: RETRO_INTERRUPT_NOTE=off - a tool run by another tool stops on Ctrl-C without advising a resume") {
    // retro-bench chunk runs retro-chunk in its scratch folder: "continue with the same command and --resume" named a
    // command the user never gave (a helper's pass, session 51)
    int status = 0;
    const std::string got = child_stderr(
        [] {
            ::setenv("RETRO_INTERRUPT_NOTE", "off", 1);
            interrupt_note_install("retro-test", "out", "continue with the same command and --resume");
            ::raise(SIGINT);   // (SIGINT's default action)
        },
        status);
    CHECK(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == SIGINT);
    CHECK(got.empty());
}

TEST_CASE("index: FAISS's k-means warning on a small training set goes through the log, and --quiet silences it") {
    std::mt19937 rng(7);
    std::normal_distribution<float> normal;
    const int d = 16;
    const std::int64_t n = 1000;   // fewer than 39 points for each of a sub-quantizer's 256 centroids
    std::vector<float> x(static_cast<std::size_t>(n * d));
    for (auto& v : x) v = normal(rng);
    const LogLevel level = log_level();
    for (const LogLevel l : {LogLevel::LOG_WARN, LogLevel::LOG_ERROR}) {
        CAPTURE(static_cast<int>(l));
        log_set_level(l);
        FaissIndex index("PQ2", d);
        const std::string said = capture_stderr([&] { index.train(n, x.data()); });
        CHECK_FALSE(index.needs_training());
        if (l == LogLevel::LOG_ERROR) {
            CHECK(said.empty());
            continue;
        }
        std::istringstream lines(said);
        int count = 0;
        for (std::string line; std::getline(lines, line); ++count) {
            CAPTURE(line);
            CHECK(line.rfind("warning: FAISS: clustering 1000 points to 256 centroids", 0) == 0);
        }
        CHECK(count >= 1);
    }
    log_set_level(level);
}
