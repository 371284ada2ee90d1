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
    // --verbose prints the kernels in use (tool_main, after the flags are read); the tool then fails on its input.
    // What OpenBLAS detects on this machine comes from a run that keeps its choice (RETRO_BLAS_CORE=keep), not from
    // how this test binary was started (with OPENBLAS_CORETYPE or keep of its own, under valgrind: no restart)
    const std::string args = "encode --verbose --model /nonexistent/retrokit-tokenizer";
    const std::string tool = test::tool_path("retro-tokenizer");
    auto kernels_of = [](const std::string& err) {   // the name after "OpenBLAS kernels: ", up to a space or line end
        const std::string key = "OpenBLAS kernels: ";
        const auto at = err.find(key);
        if (at == std::string::npos) return std::string();
        const auto from = at + key.size();
        return err.substr(from, err.find_first_of(" \n", from) - from);
    };
    const auto keep = test::run_command("env -u OPENBLAS_CORETYPE -u RETRO_BLAS_CORE_FROM RETRO_BLAS_CORE=keep " + tool +
                                        " " + args);
    CHECK(keep.exit_code == 2);
    const std::string detected = kernels_of(keep.err);
    REQUIRE(!detected.empty());
    CHECK(keep.err.find("set by RetroKit") == std::string::npos);
    // with no choice made: the upgrade this CPU can take, if any, and the note naming what OpenBLAS had detected
    const auto fresh = test::run_command("env -u OPENBLAS_CORETYPE -u RETRO_BLAS_CORE_FROM -u RETRO_BLAS_CORE " + tool +
                                         " " + args);
    CHECK(fresh.exit_code == 2);
    const std::string upgrade = blas_core_upgrade_here(detected);
    MESSAGE("OpenBLAS detects " << detected << "; RetroKit runs "
                                << (upgrade.empty() ? detected + " (kept)" : upgrade + " (restarted)"));
    if (upgrade.empty()) {
        CHECK(kernels_of(fresh.err) == detected);
        CHECK(fresh.err.find("set by RetroKit") == std::string::npos);
    } else {
        CHECK(kernels_of(fresh.err) == upgrade);
        CHECK(fresh.err.find("OpenBLAS had detected " + detected) != std::string::npos);
    }
    // the user's own OPENBLAS_CORETYPE (here the detected kernels, which every OpenBLAS build has) is left as it is
    const auto chosen = test::run_command("env -u RETRO_BLAS_CORE_FROM -u RETRO_BLAS_CORE OPENBLAS_CORETYPE=" + detected +
                                          " " + tool + " " + args);
    CHECK(chosen.exit_code == 2);
    CHECK(kernels_of(chosen.err) == detected);
    CHECK(chosen.err.find("set by RetroKit") == std::string::npos);
}

TEST_CASE("blas core: an OMP_NUM_THREADS libgomp refuses is warned of once, not again by the restarted tool") {
    // libgomp warns when the library loads, before main: a restart for better kernels warned a second time. The
    // restart drops a value libgomp refused (it runs without it either way) and keeps one it takes.
    const std::string tool = test::tool_path("retro-tokenizer");
    auto count = [](const std::string& text, const std::string& what) {
        std::size_t n = 0;
        for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
        return n;
    };
    // (the restart happens only where OpenBLAS falls back to its generic kernels: elsewhere one warning is all there is)
    const auto probe = test::run_command("env -u OPENBLAS_CORETYPE -u RETRO_BLAS_CORE_FROM -u RETRO_BLAS_CORE " + tool +
                                         " encode --verbose --model /nonexistent/retrokit-tokenizer");
    if (probe.err.find("set by RetroKit") == std::string::npos)
        MESSAGE("no OpenBLAS restart on this CPU: the single warning below holds without the fix too");
    for (const char* bad : {"abc", "0", "2,", "-1"}) {
        CAPTURE(bad);
        const auto r = test::run_command(std::string("env -u OPENBLAS_CORETYPE -u RETRO_BLAS_CORE_FROM -u RETRO_BLAS_CORE "
                                                     "OMP_NUM_THREADS='") + bad + "' " + tool + " --version");
        CHECK(r.exit_code == 0);
        CHECK(count(r.err, "OMP_NUM_THREADS") <= 1);
    }
    for (const char* good : {"1", " 2 ", "2,1", "+1", "4\r"}) {   // (\r: a CRLF env file; libgomp skips white space)
        CAPTURE(good);
        const auto r = test::run_command(std::string("env -u OPENBLAS_CORETYPE -u RETRO_BLAS_CORE_FROM -u RETRO_BLAS_CORE "
                                                     "OMP_NUM_THREADS='") + good + "' " + tool + " --version");
        CHECK(r.exit_code == 0);
        CHECK(count(r.err, "OMP_NUM_THREADS") == 0);
    }
}

TEST_CASE("blas core: an address-space limit affords OpenBLAS threads whose buffers take a quarter of it") {
    const std::int64_t buffer = kBlasThreadBufferBytes;   // 130 MiB
    CHECK(blas_threads_for_address_limit(0, 16) == 16);                // (no limit)
    CHECK(blas_threads_for_address_limit(400'000'000, 16) == 1);      // at least the calling thread
    CHECK(blas_threads_for_address_limit(4 * buffer * 3, 16) == 3);
    CHECK(blas_threads_for_address_limit(4 * buffer * 3 + 5, 2) == 2);   // never more than it started
    CHECK(blas_threads_for_address_limit(std::int64_t(64) << 30, 64) == 64);   // 64 GiB: all 64 (a quarter is 126)
}
