// test_help_oracle.h's help_of: a tool's --help, parsed.
#include "test_help_oracle.h"

#include <doctest/doctest.h>

#include <sstream>

#include "test_util.h"

namespace retro::test {

Help help_of(const std::string& tool, const std::string& sub) {
    const RunResult r = run_tool(tool, sub + " --help");
    REQUIRE_MESSAGE(r.exit_code == 0, tool << " " << sub << " --help: " << r.err);
    Help h;
    std::istringstream lines(r.out);
    std::string section;
    for (std::string line; std::getline(lines, line);) {
        if (!line.empty() && line[0] != ' ') {
            section = line;
            continue;
        }
        if (line.size() < 3 || line[0] != ' ' || line[1] != ' ' || line[2] == ' ') continue;
        const std::string first = line.substr(2, line.find(' ', 2) - 2);
        if (section == "Options:") {
            std::stringstream names(first);
            for (std::string name; std::getline(names, name, ',');)
                if (name.rfind("--", 0) == 0) h.options.insert(name);
        } else if (section == "Subcommands:") {
            h.subcommands.insert(first);
        }
    }
    return h;
}

}  // namespace retro::test
