// CUDA error checking and streams, the parts that need no device (core/cuda_check.h): a failed CUDA or cuBLAS
// call's error names the call, the file and the line (CUDA's and cuBLAS's own names and strings, which a CUDA build
// has without a driver); a kernel fault says how to name its kernel; entry points refuse the legacy default stream;
// the RETRO_CUDA_SYNC_CHECK switch; and scripts/device-gpu-checks.sh's test filter picks the CUDA test cases,
// which skip visibly without a device.
#include <filesystem>
#include <regex>
#include <string>

#include "core/cuda_check.h"
#include "core/cuda_device.h"
#include "core/error.h"
#include "core/shell_quote.h"
#include "test_util.h"

using namespace retro;
namespace fs = std::filesystem;

namespace {

// The message of the InternalError that f throws ("" when it throws none).
template <typename F>
std::string internal_error_of(F f) {
    try {
        f();
    } catch (const InternalError& e) {
        return e.what();
    }
    return "";
}

// The default value of `var` in the script's `var=${var:-'...'}` line.
std::string script_default(const std::string& script, const std::string& var) {
    std::smatch m;
    const std::regex re(var + R"(=\$\{)" + var + R"(:-'([^']*)'\})");
    return std::regex_search(script, m, re) ? m[1].str() : "";
}

// Lines of `text` that begin with `start`.
std::size_t lines_starting(const std::string& text, const std::string& start) {
    std::size_t n = 0;
    for (auto p = text.find(start); p != std::string::npos; p = text.find(start, p + 1))
        if (p == 0 || text[p - 1] == '\n') ++n;
    return n;
}

}  // namespace

TEST_CASE("cuda check: a failed CUDA or cuBLAS call throws one InternalError naming the call, the file and the line") {
    if constexpr (!kCudaBuilt) {
        RETRO_SKIP("built without CUDA (the status checks are kernels/cuda_check.cu's)");
    } else {
        CHECK_NOTHROW(cuda_check(0, "cudaMemcpyAsync(p, host, bytes, cudaMemcpyHostToDevice, stream)", "kernels/x.cu", 7));
        CHECK(internal_error_of([] {
                  cuda_check(1, "cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem)",
                             "kernels/retention_common.cuh", 139);
              }) == "kernels/retention_common.cuh:139: cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, "
                    "smem): cudaErrorInvalidValue: invalid argument");
        // a fault a kernel left behind, reported at a later call: the message says how to name the kernel
        const std::string fault = internal_error_of([] { cuda_check(700, "cudaStreamSynchronize(stream)", "kernels/y.cu", 12); });
        CHECK(fault.rfind("kernels/y.cu:12: cudaStreamSynchronize(stream): cudaErrorIllegalAddress: an illegal memory access "
                          "was encountered", 0) == 0);
        if (!cuda_sync_check()) CHECK(fault.find("rerun with RETRO_CUDA_SYNC_CHECK=1 to name the kernel") != std::string::npos);
        CHECK(cuda_error_message(1, "c", "f", 1).find("RETRO_CUDA_SYNC_CHECK") == std::string::npos);   // not a fault
        // the launch check's names: "kernel <name>: launch"
        CHECK(cuda_error_message(9, "kernel topk_rows: launch", "kernels/exact_search_cuda.cu", 190) ==
              "kernels/exact_search_cuda.cu:190: kernel topk_rows: launch: cudaErrorInvalidConfiguration: invalid "
              "configuration argument");
        CHECK_NOTHROW(cublas_check(0, "cublasCreate(&h)", "kernels/z.cu", 3));
        CHECK(internal_error_of([] { cublas_check(13, "cublasSgemm(h, ...)", "kernels/z.cu", 4); })
                  .rfind("kernels/z.cu:4: cublasSgemm(h, ...): CUBLAS_STATUS_EXECUTION_FAILED: ", 0) == 0);
        // destructors' form: logged, not thrown
        CHECK_NOTHROW(cuda_check_nothrow(700, "cudaFree(p)", "kernels/z.cu", 5));
        CHECK_NOTHROW(cublas_check_nothrow(13, "cublasDestroy(h)", "kernels/z.cu", 6));
    }
}

TEST_CASE("cuda check: a tool that does no GPU work does not load cuBLAS (opened on first use, kernels/cublas_lazy.cu)") {
    // the loader's own record of what it opened (LD_DEBUG=files): cudart yes in a CUDA build, cuBLAS(Lt) no
    const auto r = test::run_command("LD_DEBUG=files " + shell_quote(test::tool_path("retro-chunk")) + " --version");
    REQUIRE(r.exit_code == 0);
    CHECK(r.err.find("libcublas") == std::string::npos);
    if constexpr (kCudaBuilt) {
        CHECK(r.err.find("libcudart") != std::string::npos);   // the probe sees libraries at all
        // the library resolves cuBLAS when asked: a status string comes from cuBLAS itself, not the fallback
        CHECK(internal_error_of([] { cublas_check(7, "cublasGemmEx(h, ...)", "kernels/z.cu", 9); })
                  .find("CUBLAS_STATUS_INVALID_VALUE") != std::string::npos);
    }
}

TEST_CASE("cuda check: every entry point refuses the legacy default stream, naming itself") {
    CHECK(internal_error_of([] { cuda_stream_require(nullptr, "CudaBert::forward_mean"); })
              .find("CudaBert::forward_mean: needs a stream of its own, not the legacy default stream") != std::string::npos);
    CHECK(internal_error_of([] { cuda_stream_require(reinterpret_cast<CudaStream>(0x1), "retention::cuda::chunkwise_forward"); })
              .find("retention::cuda::chunkwise_forward: needs a stream of its own") != std::string::npos);   // cudaStreamLegacy
}

TEST_CASE("cuda check: a CUDA stream of its own passes the check and synchronizes") {
    if (cuda_device_count() == 0) RETRO_SKIP("no CUDA device");
    if constexpr (kCudaBuilt) {
        const CudaStreamOwner stream;
        CHECK_NOTHROW(cuda_stream_require(stream.get(), "x"));
        CHECK_NOTHROW(cuda_stream_synchronize(stream.get()));
    }
}

TEST_CASE("cuda check: a failed CUDA call is reported once, not again by the next launch check under another name") {
    // (a review, session 61: cuda_check threw and left the status as CUDA's last error, so the next kernel's launch
    // check, after a caller had caught the first, said "kernel <other>: launch: cudaErrorMemoryAllocation")
    if (cuda_device_count() == 0) RETRO_SKIP("no CUDA device");
    if constexpr (kCudaBuilt) {   // (a CPU-only build has none of these entry points: its link failed, session 63)
        const CudaStreamOwner stream;
        CHECK(internal_error_of([] { cuda_alloc(std::size_t{1} << 60); }).find("cudaErrorMemoryAllocation") != std::string::npos);
        CHECK(internal_error_of([&] { cuda_launch_check("next_kernel", stream.get(), "kernels/x.cu", 1); }).empty());
    }
}

TEST_CASE("cuda check: RETRO_CUDA_SYNC_CHECK is on for any value but unset, empty and 0") {
    CHECK_FALSE(cuda_sync_check_parse(nullptr));
    CHECK_FALSE(cuda_sync_check_parse(""));
    CHECK_FALSE(cuda_sync_check_parse("0"));
    CHECK(cuda_sync_check_parse("1"));
    CHECK(cuda_sync_check_parse("yes"));
    const char* env = std::getenv(kCudaSyncCheckEnv);
    CHECK(cuda_sync_check() == cuda_sync_check_parse(env));
}

namespace {
constexpr const char* kSampleRowsCase =
    "generate: the CUDA backend's sample_rows draws the reference's ids (greedy exactly and draws away from boundaries) - -1 for a non-finite row";
}

TEST_CASE("cuda check: the GPU check script's test filters pick the CUDA cases (the BERT golden test among them), which skip visibly here") {
    const std::string script = test::read_text(test::source_dir() / "scripts/device-gpu-checks.sh");
    const std::string tests = script_default(script, "CUDA_TESTS"), sanitize = script_default(script, "SANITIZE_TESTS");
    REQUIRE(!tests.empty());
    REQUIRE(!sanitize.empty());
    const std::string self = fs::read_symlink("/proc/self/exe").string();
    auto listed = test::run_command(shell_quote(self) + " --list-test-cases " + shell_quote("-tc=" + tests));
    REQUIRE(listed.exit_code == 0);
    for (const char* name : {"bert: the CUDA encoder (--device cuda) matches transformers on the same golden files",
                             "ops: every backend and dtype against the CPU in double",
                             "knn: CUDA exact search equals the CPU exact search on random data",
                             "knn: retro-knn --exact --device cuda equals --device cpu - or fails in one line without a GPU",
                             "train device: on a CUDA device, the copy head's run tracks the CPU for 20 fp32 steps",
                             "generate: the backend decoder on a CUDA device equals a full recompute at every step (fp32 1e-5)",
                             kSampleRowsCase}) {
        CAPTURE(name);
        CHECK(listed.out.find(name) != std::string::npos);
    }
    auto sanitized = test::run_command(shell_quote(self) + " --list-test-cases " + shell_quote("-tc=" + sanitize));
    REQUIRE(sanitized.exit_code == 0);
    CHECK(sanitized.out.find("ops: every backend and dtype against the CPU in double") != std::string::npos);
    CHECK(sanitized.out.find("knn: CUDA exact search equals the CPU exact search on random data") != std::string::npos);
    CHECK(sanitized.out.find(kSampleRowsCase) != std::string::npos);   // the draw kernel's shared-memory atomics
    const std::string racecheck = script_default(script, "RACECHECK_TESTS");
    REQUIRE(!racecheck.empty());
    auto raced = test::run_command(shell_quote(self) + " --list-test-cases " + shell_quote("-tc=" + racecheck));
    REQUIRE(raced.exit_code == 0);
    CHECK(raced.out.find("ops: every backend and dtype against the CPU in double") != std::string::npos);
    CHECK(raced.out.find(kSampleRowsCase) != std::string::npos);
    const std::string unfused = script_default(script, "UNFUSED_TESTS");   // the tests step's rerun after a failure
    REQUIRE(!unfused.empty());
    auto rerun = test::run_command(shell_quote(self) + " --list-test-cases " + shell_quote("-tc=" + unfused));
    REQUIRE(rerun.exit_code == 0);
    for (const char* name : {"backend model: on a CUDA device the model tracks the CPU (fp32)",
                             "train device: on a CUDA device, fp32 tracks the CPU for 20 steps, resumes bit-exactly, NCCL on one rank, bf16 within 2%",
                             "generate: the backend decoder on a CUDA device equals a full recompute at every step (fp32 1e-5)",
                             "nn backend: CUDA with RETRO_UNFUSE=all, the fused ops' cases within fp32 bounds of the CPU in double"}) {
        CAPTURE(name);
        CHECK(rerun.out.find(name) != std::string::npos);
    }

    if (cuda_device_count() > 0) RETRO_SKIP("a CUDA device is present (the cases run instead of skipping)");
    auto run = test::run_command(shell_quote(self) + " " +
                                 shell_quote("-tc=bert: the CUDA encoder*,knn: CUDA exact search*,ops: every backend and dtype*"));
    INFO(run.out);
    CHECK((run.exit_code == 0 || run.exit_code == 77));   // 77: skipped under ctest (RETRO_SKIP_RC)
    CHECK(lines_starting(run.out, "skipped: no CUDA device") == 2);   // RETRO_SKIP's line: bert, knn
    CHECK(run.out.find("MESSAGE: CUDA cases skipped: no CUDA device") != std::string::npos);   // the op harness's
}

TEST_CASE("cuda check: the GPU check script packs its logs past 8 files, then the rest (a device call brings back 8)") {
    test::TempDir dir("gpu-checks-pack");
    const std::string script = (test::source_dir() / "scripts/device-gpu-checks.sh").string();
    const auto pack = [&](const fs::path& out) {
        return test::run_command("bash -c " + shell_quote("source " + shell_quote(script) + " && OUT=" +
                                                         shell_quote(out.string()) + " pack_logs"));
    };
    const fs::path few = dir / "few", many = dir / "many";
    fs::create_directories(few);
    fs::create_directories(many);
    for (const char* f : {"a.log", "b.json", "summary.txt"}) test::write_text(few / f, "x\n");
    REQUIRE(pack(few).exit_code == 0);
    CHECK_FALSE(fs::exists(few / "logs.tgz"));   // 3 files: left as they are
    CHECK(fs::exists(few / "a.log"));
    for (const char* f : {"a.log", "b.log", "c.log", "d.log", "curve.jsonl", "notes.txt", "r1.json", "r2.json", "summary.txt"})
        test::write_text(many / f, "x\n");
    REQUIRE(pack(many).exit_code == 0);
    CHECK(fs::exists(many / "logs.tgz"));
    for (const char* f : {"r1.json", "r2.json", "summary.txt"}) CHECK(fs::exists(many / f));
    for (const char* f : {"a.log", "d.log", "curve.jsonl", "notes.txt"}) CHECK_FALSE(fs::exists(many / f));
    auto listed = test::run_command("tar -tzf " + shell_quote((many / "logs.tgz").string()));
    REQUIRE(listed.exit_code == 0);
    CHECK(listed.out.find("curve.jsonl") != std::string::npos);
    CHECK(listed.out.find("d.log") != std::string::npos);
    // JSON alone past 8: they go into results.tgz beside summary.txt and any archive already there
    const fs::path json = dir / "json";
    fs::create_directories(json);
    for (int i = 0; i < 9; i++) test::write_text(json / ("r" + std::to_string(i) + ".json"), "{}\n");
    test::write_text(json / "summary.txt", "x\n");
    test::write_text(json / "studies.tgz", "x\n");
    REQUIRE(pack(json).exit_code == 0);
    CHECK(fs::exists(json / "results.tgz"));
    CHECK(fs::exists(json / "summary.txt"));
    CHECK(fs::exists(json / "studies.tgz"));
    CHECK_FALSE(fs::exists(json / "r0.json"));
}

TEST_CASE("cuda check: the GPU check script's ab step alternates the previous build and this one, or says what is missing") {
    // a dry run without a GPU: fake retro-bench binaries print one table row each (scripts/device-gpu-checks.sh's
    // step_ab runs `retro-bench generate --device cuda --cuda-graphs ...` from each devkit in turn)
    test::TempDir dir("gpu-checks-ab");
    const std::string script = (test::source_dir() / "scripts/device-gpu-checks.sh").string();
    for (const char* kit : {"new", "prev"}) {
        fs::create_directories(dir / kit / "bin");
        const fs::path bench = dir / kit / "bin" / "retro-bench";
        test::write_text(bench, std::string("#!/bin/sh\necho 'prompt  output  prefill ms  ms/token'\necho '   512     128  5.0  ") +
                                    (std::string(kit) == "new" ? "0.43" : "0.49") + "'\necho \"args: $*\" >&2\n");
        fs::permissions(bench, fs::perms::owner_all);
    }
    const auto run_ab = [&](const std::string& prev_kit) {
        const fs::path out = dir / ("out-" + prev_kit);
        fs::create_directories(out);
        const std::string cmd = "cd " + shell_quote(dir.path.string()) + " && source " + shell_quote(script) + " && OUT=" +
                                shell_quote(out.string()) + " KIT=" + shell_quote((dir / "new").string()) +
                                " AB_PREV_KIT=" + shell_quote((dir / prev_kit).string()) +
                                " STEP_TIMEOUT=20 GPU_CHECKS_BUDGET=0 cublas_dir=/nonexistent; step_rc=0; step_ab; echo \"rc=$step_rc\"";
        return std::make_pair(test::run_command("bash -c " + shell_quote(cmd)), out);
    };
    auto [ok, out] = run_ab("prev");
    INFO(ok.out << ok.err);
    CHECK(ok.out.find("rc=0") != std::string::npos);
    const std::string table = test::read_text(out / "ab.txt");
    // prev, new, prev, new: each run's header and row, labelled
    const auto p1 = table.find("prev 1:    512"), n1 = table.find("new 1:    512"), p2 = table.find("prev 2:    512"),
               n2 = table.find("new 2:    512");
    REQUIRE(p1 != std::string::npos);
    REQUIRE(n2 != std::string::npos);
    CHECK((p1 < n1 && n1 < p2 && p2 < n2));
    CHECK(table.find("0.49") < table.find("0.43"));
    CHECK(test::read_text(out / "ab_new_1.log").find("args: generate --device cuda --cuda-graphs --prompt 64,512") !=
          std::string::npos);
    // no previous build (none unpacked, none carried): one line naming the staging option, the step fails with 2
    auto [missing, out2] = run_ab("nowhere");
    CHECK(missing.out.find("rc=2") != std::string::npos);
    CHECK(missing.out.find("scripts/devkit-stage.sh --keep-prev") != std::string::npos);
    CHECK_FALSE(fs::exists(out2 / "ab.txt"));
}

TEST_CASE("cuda check: the GPU check script's pdl step runs the tests and the decode timing with RETRO_PDL=1 and 0") {
    // a dry run without a GPU: a fake retro_tests and retro-bench that print the RETRO_PDL they were given
    test::TempDir dir("gpu-checks-pdl");
    const std::string script = (test::source_dir() / "scripts/device-gpu-checks.sh").string();
    fs::create_directories(dir / "kit" / "bin");
    test::write_text(dir / "kit" / "bin" / "retro_tests",
                     "#!/bin/sh\necho \"tests with RETRO_PDL=$RETRO_PDL\"\necho '[doctest] Status: SUCCESS!'\n");
    test::write_text(dir / "kit" / "bin" / "retro-bench",
                     "#!/bin/sh\necho 'prompt  output  prefill ms  ms/token'\necho \"   512     128  5.0  0.4$RETRO_PDL\"\n"
                     "echo \"args: $*\" >&2\n");
    for (const char* tool : {"retro_tests", "retro-bench"}) fs::permissions(dir / "kit" / "bin" / tool, fs::perms::owner_all);
    const fs::path out = dir / "out";
    fs::create_directories(out);
    const std::string cmd = "cd " + shell_quote(dir.path.string()) + " && source " + shell_quote(script) + " && OUT=" +
                            shell_quote(out.string()) + " KIT=" + shell_quote((dir / "kit").string()) +
                            " STEP_TIMEOUT=20 GPU_CHECKS_BUDGET=0 cublas_dir=/nonexistent; step_rc=0; step_pdl; echo \"rc=$step_rc\"";
    const auto r = test::run_command("bash -c " + shell_quote(cmd));
    INFO(r.out << r.err);
    CHECK(r.out.find("rc=0") != std::string::npos);
    const std::string table = test::read_text(out / "pdl.txt");
    CHECK(table.find("pdl=1 tests: [doctest] Status: SUCCESS!") != std::string::npos);
    CHECK(table.find("pdl=0 tests: [doctest] Status: SUCCESS!") != std::string::npos);
    // on, off, on, off: each run's row, labelled, timed with the RETRO_PDL it names
    const auto a1 = table.find("pdl=1 1:    512     128  5.0  0.41"), b1 = table.find("pdl=0 1:    512     128  5.0  0.40"),
               a2 = table.find("pdl=1 2:    512"), b2 = table.find("pdl=0 2:    512");
    REQUIRE(a1 != std::string::npos);
    REQUIRE(b2 != std::string::npos);
    CHECK((a1 < b1 && b1 < a2 && a2 < b2));
    CHECK(test::read_text(out / "pdl_1_1.log").find("args: generate --device cuda --cuda-graphs --prompt 512") !=
          std::string::npos);
    CHECK(test::read_text(out / "pdl_tests_0.log").find("tests with RETRO_PDL=0") != std::string::npos);
}

TEST_CASE("cuda check: the GPU check script's fused step fails where the bench's fused column failed, fell back or is missing") {
    // (a review, session 61: the step grepped only for "fused_same_tokens": false, so a fused kernel that failed — the
    // bench warns and exits 0 — or never ran fused passed)
    test::TempDir dir("gpu-checks-fused");
    const std::string script = (test::source_dir() / "scripts/device-gpu-checks.sh").string();
    const auto shortfall = [&](const std::string& json, const std::string& log) {
        test::write_text(dir / "r.json", json);
        test::write_text(dir / "r.log", log);
        const std::string cmd = "source " + shell_quote(script) + " && fused_shortfall " + shell_quote((dir / "r.json").string()) +
                                " " + shell_quote((dir / "r.log").string());
        const auto r = test::run_command("bash -c " + shell_quote(cmd));
        REQUIRE(r.exit_code == 0);
        return r.out;
    };
    const std::string good = "{\"rows\": [{\"prompt\": 64, \"fused_same_tokens\": true, \"fused_decode_ms_per_token\": 0.3,\n"
                             "  \"fused_steps\": 127}]}";
    CHECK(shortfall(good, "prompt  output\n").empty());
    CHECK(shortfall(good, "warning: the fused decode step failed: kernel x: launch\n").find("the fused step failed") == 0);
    CHECK(shortfall("{\"fused_same_tokens\": false, \"fused_decode_ms_per_token\": 0.3}", "").find("other tokens") !=
          std::string::npos);
    CHECK(shortfall("{\"fused_error\": true}", "").find("the fused step failed") == 0);
    CHECK(shortfall("{\"fused_decode_ms_per_token\": 0.3, \"fused_steps\": 0,\n \"x\": 1}", "").find("no step ran fused") == 0);
    CHECK(shortfall("{\"fused_decode_ms_per_token\": 0.3, \"fused_steps\": 0}", "").find("no step ran fused") == 0);
    CHECK(shortfall("{\"fused_decode_ms_per_token\": 0.3, \"fused_steps\": 10}", "").empty());
    CHECK(shortfall("{\"decode_ms_per_token\": 0.3}", "").find("no fused column") == 0);
    CHECK(shortfall("", "").find("no JSON written") == 0);
}

TEST_CASE("cuda check: the GPU check script's synccheck step runs compute-sanitizer synccheck with the default walk, then the 16-warp one") {
    // a dry run without a GPU: a fake compute-sanitizer on PATH that names its tool, the retention walk it was given
    // and its filter, and fails (rc 99, as --error-exitcode) where FAKE_SYNC_FAIL names that walk
    test::TempDir dir("gpu-checks-sync");
    const std::string script = (test::source_dir() / "scripts/device-gpu-checks.sh").string();
    fs::create_directories(dir / "kit" / "bin");
    fs::create_directories(dir / "path");
    test::write_text(dir / "path" / "compute-sanitizer",
                     "#!/bin/sh\necho \"sanitizer $2 walk=${RETRO_RETENTION_KERNELS:-default} $*\"\n"
                     "echo '========= ERROR SUMMARY: 0 errors'\n"
                     "[ \"${FAKE_SYNC_FAIL:-}\" = \"${RETRO_RETENTION_KERNELS:-default}\" ] && exit 99\nexit 0\n");
    fs::permissions(dir / "path" / "compute-sanitizer", fs::perms::owner_all);
    const fs::path out = dir / "out";
    fs::create_directories(out);
    const auto run = [&](const std::string& env) {
        const std::string cmd = "cd " + shell_quote(dir.path.string()) + " && export PATH=" +
                                shell_quote((dir / "path").string()) + ":$PATH && source " + shell_quote(script) +
                                " && " + env + " OUT=" + shell_quote(out.string()) + " KIT=" +
                                shell_quote((dir / "kit").string()) +
                                " STEP_TIMEOUT=20 GPU_CHECKS_BUDGET=0 cublas_dir=/nonexistent; configure 0; step_rc=0; "
                                "step_synccheck; echo \"rc=$step_rc\"";
        return test::run_command("bash -c " + shell_quote(cmd));
    };
    const auto ok = run("");
    INFO(ok.out << ok.err);
    CHECK(ok.out.find("rc=0") != std::string::npos);
    const std::string first = test::read_text(out / "synccheck.log"), second = test::read_text(out / "synccheck_mma16.log");
    CHECK(first.find("sanitizer synccheck walk=default --tool synccheck --error-exitcode 99") != std::string::npos);
    CHECK(first.find("-tc=ops: every backend and dtype*") != std::string::npos);
    CHECK(second.find("sanitizer synccheck walk=mma16") != std::string::npos);
    CHECK(ok.out.find("mma16 synccheck: ========= ERROR SUMMARY: 0 errors") != std::string::npos);
    // a report in either run fails the step
    CHECK(run("export FAKE_SYNC_FAIL=default;").out.find("rc=99") != std::string::npos);
    CHECK(run("export FAKE_SYNC_FAIL=mma16;").out.find("rc=99") != std::string::npos);
}

TEST_CASE("cuda check: the GPU check script's flash step maps its kinds to RETRO_FLASH_KERNELS and RETRO_UNFUSE, and a failed tests step reruns the model tests with every fused op set aside") {
    // a dry run without a GPU: fake tools that print the environment they were given. (The name must not match
    // UNFUSED_TESTS's "*RETRO_UNFUSE=all*", or the script's rerun would run this test inside itself.)
    test::TempDir dir("gpu-checks-flash");
    const std::string script = (test::source_dir() / "scripts/device-gpu-checks.sh").string();
    fs::create_directories(dir / "kit" / "bin");
    test::write_text(dir / "kit" / "bin" / "retro_tests",
                     "#!/bin/sh\necho \"tests F=$RETRO_FLASH_KERNELS U=$RETRO_UNFUSE $*\"\n"
                     "echo '[doctest] test cases: 3 | 3 passed | 0 failed'\necho '[doctest] Status: SUCCESS!'\n"
                     "[ \"$RETRO_UNFUSE\" = all ] || [ -z \"$FAIL_FUSED\" ] || exit 1\n");
    test::write_text(dir / "kit" / "bin" / "retro-bench",
                     "#!/bin/sh\necho \"flash retrokit F=$RETRO_FLASH_KERNELS U=$RETRO_UNFUSE $1\"\n");
    for (const char* tool : {"retro_tests", "retro-bench"}) fs::permissions(dir / "kit" / "bin" / tool, fs::perms::owner_all);
    const fs::path out = dir / "out";
    fs::create_directories(out);
    const auto run = [&](const std::string& env, const std::string& steps) {
        const std::string cmd = "cd " + shell_quote(dir.path.string()) + " && source " + shell_quote(script) + " && " + env +
                                " OUT=" + shell_quote(out.string()) + " KIT=" + shell_quote((dir / "kit").string()) +
                                " STEP_TIMEOUT=20 GPU_CHECKS_BUDGET=0 cublas_dir=/nonexistent; configure 0; step_rc=0; " +
                                steps + "; echo \"rc=$step_rc\"";
        // the caller's environment must not steer the dry run (a GPU-checks run sets these for the real tests)
        return test::run_command("env -u RETRO_UNFUSE -u RETRO_FLASH_KERNELS -u FLASH_KINDS -u UNFUSED_TESTS -u FAIL_FUSED "
                                 "bash -c " + shell_quote(cmd));
    };
    const auto flash = run("FLASH_RUNS=1", "step_flash");
    INFO(flash.out << flash.err);
    CHECK(flash.out.find("rc=0") != std::string::npos);
    const std::string table = test::read_text(out / "flash.txt");
    CHECK(table.find("mma 1 ops: flash retrokit F=mma U= ops") != std::string::npos);
    CHECK(table.find("mma-2kernel 1 ops: flash retrokit F=mma U=flash_backward_one_block ops") != std::string::npos);
    CHECK(table.find("mma-1stage 1 ops: flash retrokit F=mma-1stage U= ops") != std::string::npos);
    CHECK(table.find("mma-classes 1 ops: flash retrokit F=mma U=flash_fast_steps ops") != std::string::npos);
    CHECK(table.find("mma-fp32 1 train: flash retrokit F=mma-fp32 U= train") != std::string::npos);
    CHECK(test::read_text(out / "flash_tests_mma-2kernel.log").find("U=flash_backward_one_block") != std::string::npos);
    // the tests step: passing, no rerun; failing (only while every fused op is in), the rerun says it passes unfused
    const auto pass = run("", "step_tests");
    CHECK(pass.out.find("rc=0") != std::string::npos);
    CHECK(pass.out.find("RETRO_UNFUSE=all") == std::string::npos);
    const auto fail = run("export FAIL_FUSED=1;", "step_tests");
    INFO(fail.out << fail.err);
    CHECK(fail.out.find("rc=1") != std::string::npos);
    CHECK(fail.out.find("with RETRO_UNFUSE=all the model tests exit 0") != std::string::npos);
    CHECK(test::read_text(out / "tests_unfused.log").find("U=all -tc=backend model: on a CUDA*") != std::string::npos);
}
