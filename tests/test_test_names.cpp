// The test names themselves: CTest learns them from the doctest binary (doctest_discover_tests) and splits a name at
// each semicolon into several tests that match nothing, so a name holding one fails in CI, not here (sessions 43
// and 45 met it). Every TEST_CASE name under tests/ is read from the sources and must hold no semicolon.
#include <doctest/doctest.h>

#include <filesystem>
#include <regex>
#include <string>

#include "test_util.h"

namespace fs = std::filesystem;

TEST_CASE("test names: no TEST_CASE name holds a semicolon (CTest would split it)") {
    const std::regex name(R"re(TEST_CASE\("((?:[^"\\]|\\.)*)"\))re");
    int names = 0;
    for (const auto& entry : fs::directory_iterator(retro::test::source_dir() / "tests")) {
        if (entry.path().extension() != ".cpp") continue;
        const std::string text = retro::test::read_text(entry.path());
        for (auto it = std::sregex_iterator(text.begin(), text.end(), name); it != std::sregex_iterator(); ++it) {
            ++names;
            const std::string n = (*it)[1].str();
            CAPTURE(entry.path().filename().string());
            CHECK_MESSAGE(n.find(';') == std::string::npos, n);
        }
    }
    CHECK(names > 300);   // the sources were found and read
}
