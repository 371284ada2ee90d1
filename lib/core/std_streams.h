// Standard streams a tool was started without (`tool <&-`, `2>&-`): each is filled with /dev/null at once, before
// the first open() could take its number (the tool would then read a manifest as its prompt, or write its errors into
// an output file), and remembered, so that a reader of standard input can say it was closed.
// provides: std_streams_guard, std_stream_was_closed, std_output_required, std_streams_env_clear,
//           stdout_write_failed
#pragma once
#include <string>

namespace retro {

// Fills each of fds 0, 1 and 2 that is closed with /dev/null; call first thing in main (tool_main does).
void std_streams_guard();
// Whether `fd` (0, 1 or 2) was closed when std_streams_guard ran (in this process, or in it before it ran itself
// again: the OpenBLAS kernel restart passes the answer on in the environment).
bool std_stream_was_closed(int fd);
// For a command whose data goes to standard output (tokenizer encode, chunk inspect, index query, knn show, eval,
// generate): a standard output that was closed (`>&-`) is refused in one line, exit 2 ("standard output: is closed:
// WHAT would go nowhere"), where the data went to /dev/null with exit 0.
void std_output_required(const char* what);
// Once the process will not run itself again: the answer taken out of the environment its children inherit.
void std_streams_env_clear();
// "write failed: WHY" for standard output, WHY from `err` (the errno of the failed write or flush) or, where that was
// lost (a stream whose earlier write failed refuses the next without a system call: errno 0), from standard output
// itself: a pipe with no reader left says "Broken pipe", as the writes that kept errno did (a helper's walk, session 60:
// tokenizer encode, chunk inspect and knn show --json said only "write failed" under `trap '' PIPE`).
std::string stdout_write_failed(int err);

}  // namespace retro
