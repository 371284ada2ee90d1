// The line a tool whose --out can be resumed (retro-chunk, retro-index, retro-knn) prints when Ctrl-C or SIGTERM
// stops it: "retro-index: interrupted; idx keeps its finished parts: continue with the same command and --resume"
// (a merge, which cannot be continued: "idx is incomplete: run the same merge again with --resume (it makes it again)
// or --force"; a --kind bm25 build: "... run the same command with --force (it removes only retro-index's files)").
// Without it the shell showed nothing (the default action kills silently) and a user could not tell that the work
// done so far is kept. retro-train and retro-generate have their own lines (they name the step or the prompts kept).
// provides: interrupt_note_install, interrupt_note_install_line, interrupt_note_advice, interrupt_note_source, interrupt_note_remove_empty, interrupt_handlers_install, interrupt_note_die, interrupt_note_clear,
//           interrupt_note_fd
#pragma once
#include <signal.h>

#include <string>

namespace retro {

// From now until the process ends, SIGINT and SIGTERM write "TOOL: interrupted; OUT keeps its finished parts: HOW"
// (formatted here: a signal handler may only write(2)) and then end the process by the signal itself (its default
// action), so a shell script running the tool stops too, as it does for a tool without the note. `how`: what to run
// ("continue with the same command and --resume"); empty: "OUT is incomplete: run the same command with --force".
// Installed again, the new line replaces the old one (either is written whole, whenever the signal comes).
// A signal the process inherited as ignored (a background job of a script) stays ignored. With RETRO_INTERRUPT_NOTE=off
// in the environment nothing is installed: a tool run by another (retro-bench chunk's timed retro-chunk runs in a
// scratch folder) would advise the user to resume a command they never gave.
void interrupt_note_install(const std::string& tool, const std::string& out, const std::string& how);
// The same with the whole line given (a tool that keeps nothing: retro-tokenizer train's "interrupted; no tokenizer
// was written ...").
void interrupt_note_install_line(const std::string& line);
// What the installed note tells the user to do ("idx keeps its finished parts: continue with the same command and
// --resume": its line after "interrupted; "), or "" where none is installed (none was, or the folder is complete). A
// full disk's error line ends with it (tool_main): the run stops there as it would on Ctrl-C.
std::string interrupt_note_advice();
// For a tool with its own handler (retro-train, retro-generate): `line` gives the note its handler would write now,
// for interrupt_note_advice.
void interrupt_note_source(std::string (*line)());
// The line for a merge (retro-chunk, retro-index, retro-knn merge), which cannot be continued: "TOOL: interrupted; OUT
// is incomplete: run the same merge again with --resume (it makes it again) or --force".
std::string merge_interrupt_note(const std::string& tool, const std::string& out);
// A folder the run made and has written nothing into yet: removed by the note's handler where it is still empty (a
// Ctrl-C of retro-tokenizer train left an empty --out), and the folders above it up to `outermost` (an absolute
// path: the outermost one the run made for it, NewOutputFolder::outermost; "" or `dir` itself: none) each where
// empty (`--out deep/a/b` left deep/a). Forgotten by interrupt_note_clear.
void interrupt_note_remove_empty(const std::string& dir, const std::string& outermost = "");

// The same end for a tool's own note (retro-train, retro-generate): `handler` writes its line and calls
// interrupt_note_die(sig); installed for SIGINT and SIGTERM unless inherited as ignored.
void interrupt_handlers_install(void (*handler)(int));
// The same for a handler told who sent the signal (SA_SIGINFO; retro-train tells GNU timeout's repeat of one signal
// from a second Ctrl-C). Both signals are blocked while it runs, and interrupted system calls restart, as for the other.
void interrupt_handlers_install(void (*handler)(int, siginfo_t*, void*));
[[noreturn]] void interrupt_note_die(int sig);

// Where the note is written: fd 2, or the real stderr while core/stderr_capture.h sends fd 2 to a file (set and reset
// there, so that a Ctrl-C during a captured library call still shows the note). Async-signal-safe to read.
void interrupt_note_fd(int fd);

// The folder is complete (Manifest::write calls this once manifest.json is in place): SIGINT and SIGTERM go back to
// their default action (still ignored where inherited as ignored), so a Ctrl-C after the end no longer says to
// --resume a run that is finished. Only where interrupt_handlers_install (or interrupt_note_install) put RetroKit's
// handlers there: a process that never installed them keeps its own.
void interrupt_note_clear();

}  // namespace retro
