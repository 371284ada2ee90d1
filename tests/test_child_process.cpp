// core/child_process.h: a child program (retro-bench's retro-chunk runs, peer scripts, mpirun) goes when its parent is
// signalled alone (`kill -TERM` of the bench by a timeout or a scheduler left them running under init), the parent
// then ends by the signal; the child's output can be read; its exit status comes back.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <string>
#include <thread>

#include "core/child_process.h"
#include "core/shell_quote.h"
#include "test_util.h"

using namespace retro;

TEST_CASE("child process: its output and exit status come back") {
    ChildProcess echo({"/bin/sh", "-c", "echo one; echo two >&2; exit 3"}, {}, true);
    CHECK(echo.read_all_stdout() == "one\n");
    const int status = echo.wait();
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 3);
    CHECK(WEXITSTATUS(ChildProcess::shell("exit 0")) == 0);
    // its standard input is /dev/null (a group not in the foreground stops on reading the terminal)
    ChildProcess reads({"/bin/sh", "-c", "cat; echo end"}, {}, true);
    CHECK(reads.read_all_stdout() == "end\n");
    reads.wait();
    // the environment given, or this process's
    ChildProcess env({"/bin/sh", "-c", "echo \"$RETRO_CHILD_TEST\""}, {"RETRO_CHILD_TEST=given"}, true);
    CHECK(env.read_all_stdout() == "given\n");
    env.wait();
}

TEST_CASE("child process: SIGTERM, SIGINT or SIGHUP sent to the parent alone reaches the child's group, then ends the parent") {
    for (const int sig : {SIGTERM, SIGINT, SIGHUP}) {
        CAPTURE(sig);
        test::TempDir t("child");
        const std::string pidfile = (t / "pid").string();
        const pid_t parent = ::fork();
        REQUIRE(parent >= 0);
        if (parent == 0) {
            for (const int s : {SIGINT, SIGTERM, SIGHUP}) ::signal(s, SIG_DFL);
            ChildProcess::shell("echo $$ > " + shell_quote(pidfile) + ".tmp && mv " + shell_quote(pidfile) + ".tmp " +
                                shell_quote(pidfile) + " && exec sleep 30");
            ::_exit(0);   // (not reached: the signal ends it)
        }
        pid_t child = 0;
        for (int i = 0; i < 500 && child == 0; ++i) {
            if (std::filesystem::exists(pidfile)) child = std::stoi(test::read_text(pidfile));
            else std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        REQUIRE(child > 0);
        REQUIRE(::kill(parent, sig) == 0);
        int status = 0;
        REQUIRE(::waitpid(parent, &status, 0) == parent);
        CHECK(WIFSIGNALED(status));
        CHECK(WTERMSIG(status) == sig);
        // the sleep went with its parent (it ran under init for 30 s before)
        CHECK(::kill(child, 0) != 0);
    }
}
