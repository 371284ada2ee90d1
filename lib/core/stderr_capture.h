// What a library prints to the process's stderr by itself (FAISS's k-means: "WARNING clustering 1000 points to 256
// centroids: please provide at least 9984 training points", an fprintf that no option of ours reaches), captured so
// that the tools pass it on through the log, which --quiet silences, instead of letting it through raw.
// provides: capture_stderr, pass_on_library_lines
#pragma once
#include <functional>
#include <string>

namespace retro {

// Runs fn with fd 2 sent to an unnamed temporary file and returns what was written there; fn's exceptions pass through
// once stderr is restored. The interrupt note (core/interrupt_note.h) goes to the real stderr meanwhile. Where no
// temporary file can be made, fn runs with stderr as it is and "" comes back. Nests. Not for code that logs through
// core/log.h itself (its lines would come back as the library's).
std::string capture_stderr(const std::function<void()>& fn);

// Each non-empty line of `text` as a warning "LIBRARY: line" (a leading "WARNING" and its ':' or space dropped).
void pass_on_library_lines(const std::string& library, const std::string& text);

}  // namespace retro
