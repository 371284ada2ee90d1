// Implementation of gnuplot.h.
#include "core/gnuplot.h"

#include <sys/wait.h>

#include <cstdlib>
#include <fstream>

#include "core/atomic_file.h"
#include "core/child_process.h"
#include "core/error.h"
#include "core/scratch_dir.h"

namespace retro {

bool gnuplot_available() { return std::system("command -v gnuplot >/dev/null 2>&1") == 0; }

std::string gnuplot_datablock(const std::string& name, const std::string& rows) {
    return "$" + name + " << EOD\n" + rows + "EOD\n";
}

std::string gnuplot_png_bytes(const std::string& body, int width, int height) {
    // the script and gnuplot's messages in a scratch folder of this process: removed however the run ends (Ctrl-C
    // during gnuplot ends the process by the signal, past any unlink)
    const ScratchDir scratch("retrokit-plot");
    const std::string script = scratch.path() + "/plot.gp", messages = scratch.path() + "/gnuplot.err";
    write_file_atomic(script, "set terminal png size " + std::to_string(width) + "," + std::to_string(height) +
                                  "\nset output\n" + body);
    ChildProcess gnuplot({"/bin/sh", "-c", "exec gnuplot \"$0\" 2>\"$1\"", script, messages}, {}, /*capture_stdout=*/true);
    std::string png = gnuplot.read_all_stdout();
    const int status = gnuplot.wait();
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && png.compare(0, 4, "\x89PNG") == 0) return png;
    // gnuplot's first message line says why (a script of ours it refused)
    std::ifstream err(messages);
    std::string first;
    while (first.find_first_not_of(" \t\r") == std::string::npos && std::getline(err, first)) {
    }
    const std::string why = first.find_first_not_of(" \t\r") == std::string::npos ? "" : ": " + first;
    throw InternalError(!WIFEXITED(status)          ? "gnuplot ended by signal " + std::to_string(WTERMSIG(status))
                        : WEXITSTATUS(status) == 127 ? std::string("gnuplot: not found on PATH")
                        : WEXITSTATUS(status) != 0   ? "gnuplot failed (exit " + std::to_string(WEXITSTATUS(status)) + ")" + why
                                                     : "gnuplot wrote no PNG" + why);
}

}  // namespace retro
