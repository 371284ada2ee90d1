// The line a tool whose --out can be resumed (retro-chunk, retro-index, retro-knn) prints when Ctrl-C or SIGTERM
// stops it: "retro-index: interrupted; idx keeps its finished parts: continue with the same command and --resume".
// Without it the shell showed nothing (the default action kills silently) and a user could not tell that the work
// done so far is kept. retro-train and retro-generate have their own lines (they name the step or the prompts kept).
// provides: interrupt_note_install
#pragma once
#include <string>

namespace retro {

// From now until the process ends, SIGINT and SIGTERM write that line (formatted here: a signal handler may only
// write(2)) and end the process with 128 + the signal, as the default action's exit status reads in a shell.
void interrupt_note_install(const std::string& tool, const std::string& out);

}  // namespace retro
