// OpenBLAS's kernels (core/blas_core.h): which detected cores are upgraded, and that a tool started on OpenBLAS's
// generic fallback where the CPU has better kernels runs with them, says so under --verbose, and leaves a choice the
// user made (OPENBLAS_CORETYPE, RETRO_BLAS_CORE=keep) alone.
#include <doctest/doctest.h>

#include <cstdlib>
#include <string>

#include "core/blas_core.h"
#include "test_util.h"

using namespace retro;

TEST_CASE("blas core: only OpenBLAS's cores without AVX2 are upgraded, and only to kernels the CPU can run") {
    CHECK(blas_core_upgrade("Prescott", true, true) == "SkylakeX");   // the generic fallback on an AVX-512 CPU
    CHECK(blas_core_upgrade("Prescott", false, true) == "Haswell");
    CHECK(blas_core_upgrade("Prescott", false, false).empty());   // an old CPU: the fallback is right
    CHECK(blas_core_upgrade("Nehalem", true, true) == "SkylakeX");
    CHECK(blas_core_upgrade("Sandybridge", false, true) == "Haswell");
    for (const char* fine : {"Haswell", "Zen", "SkylakeX", "Cooperlake", "SapphireRapids", "Excavator", ""})
        CHECK_MESSAGE(blas_core_upgrade(fine, true, true).empty(), fine);
}

TEST_CASE("blas core: a tool on OpenBLAS's generic kernels where the CPU has better ones runs with them, and says so") {
    // --verbose prints the kernels in use (tool_main, after the flags are read); the tool then fails on its input
    const std::string args = "encode --verbose --model /nonexistent/retrokit-tokenizer";
    const std::string tool = test::tool_path("retro-tokenizer");
    const char* from = std::getenv("RETRO_BLAS_CORE_FROM");   // set where this test binary restarted itself
    // without any choice made: where this binary restarted, the tool does the same and names what was detected
    const auto fresh = test::run_command("env -u OPENBLAS_CORETYPE -u RETRO_BLAS_CORE_FROM -u RETRO_BLAS_CORE " + tool +
                                         " " + args);
    CHECK(fresh.exit_code == 2);
    CHECK(fresh.err.find("OpenBLAS kernels: ") != std::string::npos);
    if (from) {
        MESSAGE("OpenBLAS detected " << std::string(from) << "; the tests run with " << blas_core_name());
        CHECK(fresh.err.find(std::string("OpenBLAS had detected ") + from) != std::string::npos);
        CHECK(fresh.err.find("OpenBLAS kernels: " + blas_core_name()) != std::string::npos);
        CHECK(blas_core_name() != from);
    } else {
        MESSAGE("OpenBLAS's own choice kept: " << blas_core_name());
        CHECK(fresh.err.find("set by RetroKit") == std::string::npos);
    }
    // RETRO_BLAS_CORE=keep: OpenBLAS's own choice, whatever it is
    const auto keep = test::run_command("env -u OPENBLAS_CORETYPE -u RETRO_BLAS_CORE_FROM RETRO_BLAS_CORE=keep " + tool +
                                        " " + args);
    CHECK(keep.exit_code == 2);
    CHECK(keep.err.find("set by RetroKit") == std::string::npos);
    if (from) CHECK(keep.err.find(std::string("OpenBLAS kernels: ") + from) != std::string::npos);
    // the user's OPENBLAS_CORETYPE is left as it is
    const auto chosen = test::run_command("env -u RETRO_BLAS_CORE_FROM -u RETRO_BLAS_CORE OPENBLAS_CORETYPE=Prescott " +
                                          tool + " " + args);
    CHECK(chosen.exit_code == 2);
    CHECK(chosen.err.find("OpenBLAS kernels: Prescott") != std::string::npos);
    CHECK(chosen.err.find("set by RetroKit") == std::string::npos);
}
