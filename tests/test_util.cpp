// Implementation of test_util.h.
#include "test_util.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>

namespace fs = std::filesystem;

namespace retro::test {

int exit_code_as_nobody(const fs::path& must_reach, const std::function<int()>& child) {
    constexpr int kCannot = 124;
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        if (::geteuid() == 0 && (::setresgid(65534, 65534, 65534) != 0 || ::setresuid(65534, 65534, 65534) != 0)) ::_exit(kCannot);
        if (::access(must_reach.c_str(), X_OK) != 0) ::_exit(kCannot);
        try {
            ::_exit(child());
        } catch (...) {
            ::_exit(125);
        }
    }
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    REQUIRE(WIFEXITED(status));
    return WEXITSTATUS(status) == kCannot ? -1 : WEXITSTATUS(status);
}

TempDir::TempDir(const std::string& tag) {
    std::random_device rd;
    path = fs::temp_directory_path() / ("retrokit-" + tag + "-" + std::to_string(getpid()) + "-" +
                                        std::to_string(rd()));
    fs::create_directories(path);
}

TempDir::~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
}

std::string read_text(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

void write_text(const fs::path& p, const std::string& s) {
    std::ofstream out(p, std::ios::binary);
    out << s;
}

// RETRO_TEST_SOURCE_DIR / RETRO_TEST_BIN_DIR, when set, stand in for the paths compiled in: the test binary then runs
// away from its build tree (scripts/device-gpu-checks.sh on a GPU machine, with the tools of a staged devkit)
namespace {
std::string env_or(const char* name, const char* compiled_in) {
    const char* v = std::getenv(name);
    return v && *v ? v : compiled_in;
}
}  // namespace

fs::path source_dir() { return env_or("RETRO_TEST_SOURCE_DIR", RETRO_SOURCE_DIR); }

std::string tool_path(const std::string& tool) { return env_or("RETRO_TEST_BIN_DIR", RETRO_BIN_DIR) + "/" + tool; }

RunResult run_command(const std::string& command, const std::string& stdin_text) {
    TempDir tmp("run");
    write_text(tmp / "stdin", stdin_text);
    std::string cmd = command + " <" + (tmp / "stdin").string() + " >" + (tmp / "stdout").string() + " 2>" +
                      (tmp / "stderr").string();
    int status = std::system(cmd.c_str());
    RunResult r;
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.out = read_text(tmp / "stdout");
    r.err = read_text(tmp / "stderr");
    return r;
}

RunResult run_tool(const std::string& tool, const std::string& args, const std::string& stdin_text) {
    return run_command(tool_path(tool) + " " + args, stdin_text);
}

double rms_ratio(const std::vector<float>& got, const std::vector<double>& ref) {
    double num = 0, den = 0;
    for (std::size_t i = 0; i < ref.size(); ++i) {
        num += (got[i] - ref[i]) * (got[i] - ref[i]);
        den += ref[i] * ref[i];
    }
    return std::sqrt(num / (den > 0 ? den : 1));
}

}  // namespace retro::test
