// A child program run by a tool (retro-bench's timed retro-chunk runs, its peer scripts, mpirun for --ranks) that
// goes when the tool is stopped. std::system ignored SIGINT while it waited (`kill -INT` of the bench under --ranks
// did nothing) and neither it nor posix_spawn passed a SIGTERM on: a `timeout`, a scheduler or a CI runner signalling
// the bench alone left retro-chunk, python or mpirun and its ranks running, re-parented to init.
// provides: ChildProcess
#pragma once
#include <sys/resource.h>
#include <sys/types.h>

#include <string>
#include <vector>

namespace retro {

// Starts `argv` (argv[0] a path) in a process group of its own, standard input /dev/null (a group not in the
// foreground would stop on reading the terminal), with `env` as its environment (empty: this process's). Until the
// child is waited for, SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to this process are passed to the child's whole group
// (and Ctrl-Z's SIGTSTP and SIGCONT, so a stopped bench stops its child); once it has ended, this process ends by
// that signal (interrupt_note_die: a script running it stops too). A SIGKILL of this process's group cannot be
// passed on: the child's group is another. One child at a time.
class ChildProcess {
public:
    // `capture_stdout`: the child's standard output goes to a pipe (read_all_stdout), else it is this process's.
    ChildProcess(const std::vector<std::string>& argv, const std::vector<std::string>& env = {}, bool capture_stdout = false);
    ~ChildProcess();   // a child not waited for is killed (its group, SIGKILL) and reaped
    ChildProcess(const ChildProcess&) = delete;
    ChildProcess& operator=(const ChildProcess&) = delete;

    pid_t pid() const { return pid_; }
    // Everything the child writes to its standard output, until it closes it (with capture_stdout).
    std::string read_all_stdout();
    // Whether the child has ended (without blocking, or blocking with `block`); then `status` is its wait status and
    // `ru` (if given) its resource use. A signal passed to it ends this process here, once it has ended.
    bool poll(int& status, struct rusage* ru = nullptr, bool block = false);
    // Blocks until the child ends; its wait status.
    int wait(struct rusage* ru = nullptr);
    // `sh -c command`'s wait status, run as a ChildProcess.
    static int shell(const std::string& command);

private:
    pid_t pid_ = -1;
    int out_fd_ = -1;
    bool done_ = false;
};

}  // namespace retro
