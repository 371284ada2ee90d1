// retro-train --device (issue 21): the GPU path's trainer code (model/backend_model.h, gradients summed, clipped
// and stepped by AdamW in backend memory, state downloaded for checkpoints) run over the CPU ops with the hidden
// `--device host-backend` equals `--device cpu` byte for byte (losses, weights, optimizer state), and resumes
// bit-exactly after a kill; `--device cuda` without a GPU, and a configuration too large for the GPU, are refused in
// one line (exit 2, nothing written); on a GPU the fp32 run tracks the CPU's losses (skipped visibly without one).
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>

#include "core/cuda_device.h"
#include "core/error.h"
#include "model/config.h"
#include "test_train_fixtures.h"
#include "test_util.h"
#include "train/train_memory.h"

using namespace retro;
namespace fs = std::filesystem;

namespace {

bool one_line(const test::RunResult& r) { return r.err.size() > 1 && r.err.find('\n') == r.err.size() - 1; }

std::string tiny_data(const test::TempDir& dir, int steps = 8, const std::string& config = test::config_path()) {
    test::write_tiny_db(dir / "db", dir / "knn", 4, 16, 40, 10);
    return "--db " + (dir / "db").string() + " --knn " + (dir / "knn").string() + " --config " + config +
           " --batch-size 4 --val-fraction 0.2 --val-batches 2 --quiet --threads 1 --lr 3e-3 --warmup 2 --clip 0.5"
           " --steps " + std::to_string(steps) + " --val-every " + std::to_string(steps / 2) + " --checkpoint-every " +
           std::to_string(steps / 2);
}

// Every logged loss of run b within `rel` (relative) of run a's, step for step.
void check_losses_close(const fs::path& a, const fs::path& b, double rel) {
    const auto la = test::losses(a), lb = test::losses(b);
    REQUIRE(la.size() == lb.size());
    for (std::size_t i = 0; i < la.size(); i++) {
        const double x = std::stod(la[i]), y = std::stod(lb[i]);
        CHECK(std::abs(x - y) <= rel * std::abs(x));
    }
}

// The test config with "copy_head": true, written into dir.
std::string copy_head_config(const test::TempDir& dir) {
    auto j = RetroConfig::load(test::config_path()).to_json();
    j["copy_head"] = true;
    const std::string path = (dir / "copy.json").string();
    RetroConfig::from_json(j, "test").save(path);
    return path;
}

}  // namespace

TEST_CASE("train device: the GPU path's code over the CPU ops equals --device cpu byte for byte, and resumes") {
    test::TempDir dir("train-device");
    const std::string data = tiny_data(dir);
    for (const char* accum : {" --grad-accum 1", " --grad-accum 3"}) {
        CAPTURE(accum);
        const std::string cpu = (dir / (std::string("cpu") + accum[14])).string();
        const std::string dev = (dir / (std::string("dev") + accum[14])).string();
        auto a = test::run_tool("retro-train", data + accum + " --out " + cpu);
        INFO(a.err);
        REQUIRE(a.exit_code == 0);
        auto b = test::run_tool("retro-train", data + accum + " --device host-backend --out " + dev);
        INFO(b.err);
        REQUIRE(b.exit_code == 0);
        CHECK(test::losses(dev) == test::losses(cpu));
        CHECK(test::bytes(fs::path(dev) / "model.safetensors") == test::bytes(fs::path(cpu) / "model.safetensors"));
        CHECK(test::bytes(fs::path(dev) / "checkpoints" / "step_00000008" / "optimizer.safetensors") ==
              test::bytes(fs::path(cpu) / "checkpoints" / "step_00000008" / "optimizer.safetensors"));
    }
    // killed after 5 steps (last checkpoint at 4), resumed on the same device: the straight run's bytes; and a
    // CPU checkpoint resumed on the backend (checkpoints are interchangeable)
    const std::string dev = data + " --grad-accum 3 --device host-backend";
    auto k1 = test::run_tool("retro-train", dev + " --stop-after 5 --out " + (dir / "killed").string());
    REQUIRE(k1.exit_code == 0);
    auto k2 = test::run_tool("retro-train", dev + " --resume --out " + (dir / "killed").string());
    INFO(k2.err);
    REQUIRE(k2.exit_code == 0);
    CHECK(test::bytes(dir / "killed" / "model.safetensors") == test::bytes(dir / "dev3" / "model.safetensors"));
    CHECK(test::losses(dir / "killed") == test::losses(dir / "dev3"));
    auto c1 = test::run_tool("retro-train", data + " --grad-accum 3 --stop-after 5 --out " + (dir / "moved").string());
    REQUIRE(c1.exit_code == 0);
    auto c2 = test::run_tool("retro-train", dev + " --resume --out " + (dir / "moved").string());
    REQUIRE(c2.exit_code == 0);
    CHECK(test::bytes(dir / "moved" / "model.safetensors") == test::bytes(dir / "cpu3" / "model.safetensors"));
}

TEST_CASE("train device: with the copy head the GPU path's code over the CPU ops equals --device cpu byte for byte") {
    test::TempDir dir("train-device-copy");
    const std::string data = tiny_data(dir, 8, copy_head_config(dir));
    auto a = test::run_tool("retro-train", data + " --out " + (dir / "cpu").string());
    INFO(a.err);
    REQUIRE(a.exit_code == 0);
    auto b = test::run_tool("retro-train", data + " --device host-backend --out " + (dir / "dev").string());
    INFO(b.err);
    REQUIRE(b.exit_code == 0);
    CHECK(test::losses(dir / "dev") == test::losses(dir / "cpu"));
    CHECK(test::bytes(dir / "dev" / "model.safetensors") == test::bytes(dir / "cpu" / "model.safetensors"));
}

TEST_CASE("train device: on a CUDA device, the copy head's run tracks the CPU for 20 fp32 steps") {
    if (cuda_device_count() == 0) RETRO_SKIP("no CUDA device");
    test::TempDir dir("train-device-copy-gpu");
    const std::string data = tiny_data(dir, 20, copy_head_config(dir));
    auto a = test::run_tool("retro-train", data + " --out " + (dir / "cpu").string());
    REQUIRE(a.exit_code == 0);
    auto b = test::run_tool("retro-train", data + " --device cuda --out " + (dir / "gpu").string());
    INFO(b.err);
    REQUIRE(b.exit_code == 0);
    check_losses_close(dir / "cpu", dir / "gpu", 1e-5);
}

TEST_CASE("train device: retro-fitting on the backend path trains only the listed groups") {
    test::TempDir dir("train-device-fit");
    const std::string data = tiny_data(dir);
    auto base = test::run_tool("retro-train", tiny_data(dir, 4) + " --no-retrieval --out " + (dir / "base").string());
    INFO(base.err);
    REQUIRE(base.exit_code == 0);
    const std::string fit = data + " --init-from " + (dir / "base").string() + " --train-only cca,encoder";
    auto a = test::run_tool("retro-train", fit + " --out " + (dir / "cpu").string());
    REQUIRE(a.exit_code == 0);
    auto b = test::run_tool("retro-train", fit + " --device host-backend --out " + (dir / "dev").string());
    INFO(b.err);
    REQUIRE(b.exit_code == 0);
    // the clipping norm sums each trainable range apart on the backend (in one running sum on the CPU), so the
    // figures agree to rounding, not to the bit
    check_losses_close(dir / "cpu", dir / "dev", 1e-5);
}

TEST_CASE("train device: --dtype bf16 (bf16 GEMM inputs) tracks the fp32 run - bf16 and --reduce nccl are refused on the CPU path") {
    test::TempDir dir("train-device-bf16");
    const std::string data = tiny_data(dir) + " --device host-backend";
    auto a = test::run_tool("retro-train", data + " --out " + (dir / "fp32").string());
    REQUIRE(a.exit_code == 0);
    auto b = test::run_tool("retro-train", data + " --dtype bf16 --out " + (dir / "bf16").string());
    INFO(b.err);
    REQUIRE(b.exit_code == 0);
    const auto la = test::losses(dir / "fp32"), lb = test::losses(dir / "bf16");
    REQUIRE(la.size() == lb.size());
    bool differs = false;
    for (std::size_t i = 0; i < la.size(); i++) {
        const double x = std::stod(la[i]), y = std::stod(lb[i]);
        CHECK(std::abs(x - y) <= 2e-2 * std::abs(x));   // bf16 rounding of the GEMM inputs: close, not equal
        differs = differs || x != y;
    }
    CHECK(differs);
    // the fused attention is on by default in the bf16 mode (the manifest says which ran), --no-fused-attention
    // turns it off; the host backend has no fused kernels, so the opt-out's losses are the same
    CHECK(test::read_text(dir / "bf16" / "manifest.json").find("\"fused_attention\": true") != std::string::npos);
    CHECK(test::read_text(dir / "fp32" / "manifest.json").find("\"fused_attention\": false") != std::string::npos);
    auto off = test::run_tool("retro-train", data + " --dtype bf16 --no-fused-attention --out " + (dir / "off").string());
    INFO(off.err);
    REQUIRE(off.exit_code == 0);
    CHECK(test::read_text(dir / "off" / "manifest.json").find("\"fused_attention\": false") != std::string::npos);
    CHECK(test::losses(dir / "off") == lb);
    auto refused = test::run_tool("retro-train", tiny_data(dir) + " --dtype bf16 --out " + (dir / "cpu").string());
    CHECK(refused.exit_code == 2);
    CHECK(one_line(refused));
    CHECK(refused.err.find("--dtype") != std::string::npos);
    CHECK_FALSE(fs::exists(dir / "cpu"));
    auto nccl_cpu = test::run_tool("retro-train", tiny_data(dir) + " --reduce nccl --out " + (dir / "cpu").string());
    CHECK(nccl_cpu.exit_code == 2);
    CHECK(one_line(nccl_cpu));
    CHECK(nccl_cpu.err.find("--reduce") != std::string::npos);
    CHECK_FALSE(fs::exists(dir / "cpu"));
    // nor on the host backend, which makes no communicator (it ran as one rank's sum: a review, session 63)
    auto nccl_host = test::run_tool("retro-train", tiny_data(dir) + " --device host-backend --reduce nccl --out " +
                                                       (dir / "host").string());
    CHECK(nccl_host.exit_code == 2);
    CHECK(one_line(nccl_host));
    CHECK(nccl_host.err.find("--reduce: nccl reduces GPU gradients") != std::string::npos);
    CHECK_FALSE(fs::exists(dir / "host"));
}

TEST_CASE("train device: --device cuda without a GPU, or too large for it, is refused in one line") {
    test::TempDir dir("train-device-refuse");
    const std::string data = tiny_data(dir);
    if (cuda_device_count() == 0) {
        std::string loud = data;   // (without --quiet: no info line comes before the refusal either)
        loud.erase(loud.find(" --quiet"), 8);
        auto r = test::run_tool("retro-train", loud + " --device cuda --out " + (dir / "run").string());
        CHECK(r.exit_code == 2);
        CHECK(one_line(r));
        CHECK(r.err.find("--device") != std::string::npos);
        CHECK(r.err.find(kCudaBuilt ? "no CUDA device found" : "built without CUDA") != std::string::npos);
        CHECK(r.err.find("(fix: run where a GPU is, or train on the CPU (--device cpu, fp32))") != std::string::npos);
        CHECK_MESSAGE(r.err.find("memory:") == std::string::npos, r.err);   // refused before the data and model are sized
        CHECK_FALSE(fs::exists(dir / "run"));
    } else {
        MESSAGE("skipped the no-GPU refusal: a CUDA device is present");
    }
    // the fused attention kernels are bf16: asked for without --dtype bf16, one line and no run folder
    auto f = test::run_tool("retro-train", data + " --fused-attention --out " + (dir / "fused").string());
    CHECK(f.exit_code == 2);
    CHECK(one_line(f));
    CHECK(f.err.find("--fused-attention") != std::string::npos);
    CHECK_FALSE(fs::exists(dir / "fused"));
    // the planned bytes are exact and known before a step; a GPU without them refuses with the figures
    const RetroConfig c = RetroConfig::load(test::config_path());
    const auto need = train_device_bytes(c, 4, 16, 3, c.retrieved_len(), true, 2, 1000);
    CHECK(need.optimizer == 9000);
    CHECK(need.arena > 0);
    CHECK(need.scratch > 0);
    CHECK(need.total() == need.weights + need.optimizer + need.arena + need.scratch);
    CHECK_NOTHROW(device_memory_require("--batch-size", need, need.total(), "training", "smaller"));
    try {
        device_memory_require("--batch-size", need, need.total() - 1, "training tiny.json", "a smaller --batch-size");
        FAIL("no refusal");
    } catch (const UserError& e) {
        const std::string m = e.what();
        CHECK(m.find("--batch-size") != std::string::npos);
        CHECK(m.find("on the GPU") != std::string::npos);
        CHECK(m.find("free") != std::string::npos);
        CHECK(m.find('\n') == std::string::npos);
    }
}

TEST_CASE("train device: on a CUDA device, fp32 tracks the CPU for 20 steps, resumes bit-exactly, NCCL on one rank, bf16 within 2%") {
    if (cuda_device_count() == 0) RETRO_SKIP("no CUDA device");
    test::TempDir dir("train-device-gpu");
    const std::string data = tiny_data(dir, 20);
    auto a = test::run_tool("retro-train", data + " --out " + (dir / "cpu").string());
    REQUIRE(a.exit_code == 0);
    auto b = test::run_tool("retro-train", data + " --device cuda --out " + (dir / "gpu").string());
    INFO(b.err);
    REQUIRE(b.exit_code == 0);
    check_losses_close(dir / "cpu", dir / "gpu", 1e-5);   // the bound for 20 fp32 steps on the golden config
    // the kernels are deterministic: killed after 13 steps and resumed, the GPU run ends with the straight run's bytes
    auto k1 = test::run_tool("retro-train", data + " --device cuda --stop-after 13 --out " + (dir / "killed").string());
    REQUIRE(k1.exit_code == 0);
    auto k2 = test::run_tool("retro-train", data + " --device cuda --resume --out " + (dir / "killed").string());
    INFO(k2.err);
    REQUIRE(k2.exit_code == 0);
    CHECK(test::bytes(dir / "killed" / "model.safetensors") == test::bytes(dir / "gpu" / "model.safetensors"));
    // the NCCL path (issue 20) on one rank: the all-reduce of one GPU is the identity, so the same bytes
    auto n = test::run_tool("retro-train", data + " --device cuda --reduce nccl --out " + (dir / "nccl").string());
    if (n.exit_code == 2 && n.err.find("libnccl") != std::string::npos) {
        MESSAGE("NCCL path not run: " << n.err);
    } else {
        INFO(n.err);
        REQUIRE(n.exit_code == 0);
        CHECK(test::bytes(dir / "nccl" / "model.safetensors") == test::bytes(dir / "gpu" / "model.safetensors"));
    }
    // bf16 GEMM inputs: the host backend's emulation is the reference, within bf16 noise of the fp32 curve
    auto c = test::run_tool("retro-train", data + " --device cuda --dtype bf16 --out " + (dir / "gpu-bf16").string());
    INFO(c.err);
    REQUIRE(c.exit_code == 0);
    check_losses_close(dir / "cpu", dir / "gpu-bf16", 2e-2);
    // that run had the fused attention (the bf16 default); without it, the same bound
    auto u = test::run_tool("retro-train", data + " --device cuda --dtype bf16 --no-fused-attention --out " +
                                               (dir / "gpu-bf16-unfused").string());
    INFO(u.err);
    REQUIRE(u.exit_code == 0);
    check_losses_close(dir / "cpu", dir / "gpu-bf16-unfused", 2e-2);
}
