// Implementation of gnuplot.h.
#include "core/gnuplot.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "core/atomic_file.h"
#include "core/child_process.h"
#include "core/error.h"

namespace fs = std::filesystem;

namespace retro {

bool gnuplot_available() { return std::system("command -v gnuplot >/dev/null 2>&1") == 0; }

std::string gnuplot_datablock(const std::string& name, const std::string& rows) {
    return "$" + name + " << EOD\n" + rows + "EOD\n";
}

std::string gnuplot_png_bytes(const std::string& body, int width, int height) {
    std::error_code ec;
    fs::path dir = fs::temp_directory_path(ec);
    if (ec) dir = "/tmp";
    std::string script = (dir / "retrokit-plot-XXXXXX").string();
    const int fd = ::mkstemp(script.data());
    if (fd < 0) user_error_in(script, std::string("cannot be made: ") + std::strerror(errno));
    struct Unlink {   // the script goes whatever happens
        const std::string& path;
        ~Unlink() { ::unlink(path.c_str()); }
    } unlink_script{script};
    try {
        const std::string text = "set terminal png size " + std::to_string(width) + "," + std::to_string(height) +
                                 "\nset output\n" + body;
        write_all(fd, text.data(), text.size(), script);
    } catch (...) {
        ::close(fd);
        throw;
    }
    ::close(fd);
    // (gnuplot's own messages are about our scripts, not the user's input: left out, as before)
    ChildProcess gnuplot({"/bin/sh", "-c", "exec gnuplot \"$0\" 2>/dev/null", script}, {}, /*capture_stdout=*/true);
    std::string png = gnuplot.read_all_stdout();
    const int status = gnuplot.wait();
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || png.compare(0, 4, "\x89PNG") != 0)
        throw InternalError(!WIFEXITED(status) ? "gnuplot ended by signal " + std::to_string(WTERMSIG(status))
                            : WEXITSTATUS(status) == 127 ? std::string("gnuplot: not found on PATH")
                            : WEXITSTATUS(status) != 0   ? "gnuplot failed (exit " + std::to_string(WEXITSTATUS(status)) + ")"
                                                         : std::string("gnuplot wrote no PNG"));
    return png;
}

}  // namespace retro
