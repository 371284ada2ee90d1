// doctest main with a visible skip: a test that calls RETRO_SKIP prints "skipped: <why>" and,
// when ctest runs it (env RETRO_SKIP_RC=77), the process exits 77 so ctest reports it Skipped
// (doctest 2.4.9 has no runtime skip; TOOLCHAIN.md).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdlib>

#include "test_util.h"

namespace retro::test {
bool g_skipped = false;
}

int main(int argc, char** argv) {
    doctest::Context context;
    context.applyCommandLine(argc, argv);
    int rc = context.run();
    if (context.shouldExit()) return rc;
    const char* skip_rc = std::getenv("RETRO_SKIP_RC");
    if (rc == 0 && retro::test::g_skipped && skip_rc) return std::atoi(skip_rc);
    return rc;
}
