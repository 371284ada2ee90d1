// Data-parallel training (issue 20, core/distributed.h, train/trainer.h): `mpirun -np 2 retro-train` in
// deterministic mode equals one process with the same --grad-accum byte for byte; a rank killed at a random
// step, then --resume, ends with the straight run's weights; the launcher environment rules (--shard auto,
// the refusal of a multi-rank launch in a build without MPI). The mpirun tests skip visibly without MPI.
#include <doctest/doctest.h>

#include <cstdlib>
#include <map>
#include <random>

#include <nlohmann/json.hpp>

#include "core/distributed.h"
#include "core/error.h"
#include "core/launcher_env.h"
#include "core/shard.h"
#include "bench/train_scaling_bench.h"
#include "test_train_fixtures.h"
#include "test_util.h"

namespace fs = std::filesystem;
using namespace retro;

namespace {

// mpirun as root in a container: Open MPI refuses root without these, and its shared-memory single-copy
// transport (CMA) is often not permitted there.
const char* kMpirun =
    "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none "
    "mpirun --oversubscribe -np ";

// "" when mpirun can run the tools here; else why not.
std::string mpi_unavailable() {
    if (!kMpiBuilt) return "built without MPI (libopenmpi-dev absent at configure time)";
    if (std::system("command -v mpirun >/dev/null 2>&1") != 0) return "no mpirun on PATH (openmpi-bin)";
    return "";
}

std::string train_args(const fs::path& dir, const std::string& out, int accum) {
    return " --db " + (dir / "db").string() + " --knn " + (dir / "knn").string() + " --config " +
           test::config_path() + " --out " + (dir / out).string() + " --grad-accum " + std::to_string(accum) +
           " --steps 12 --batch-size 2 --lr 3e-3 --warmup 3 --val-every 4 --val-batches 3 --val-fraction 0.2"
           " --checkpoint-every 4 --seed 3 --threads 1 --quiet";
}

test::RunResult mpirun_train(int ranks, const std::string& args) {
    return test::run_command(kMpirun + std::to_string(ranks) + " " + test::tool_path("retro-train") + args);
}

LauncherEnv env_of(const std::map<std::string, std::string>& vars) {
    return launcher_env_from([&](const char* name) -> const char* {
        auto it = vars.find(name);
        return it == vars.end() ? nullptr : it->second.c_str();
    });
}

}  // namespace

TEST_CASE("train mpi: 2 ranks, deterministic, equal 1 process with the same --grad-accum byte for byte") {
    const std::string why = mpi_unavailable();
    if (!why.empty()) RETRO_SKIP(("mpirun tests: " + why).c_str());
    test::TempDir dir("train-mpi");
    test::write_tiny_db(dir / "db", dir / "knn", 4, 16, 40, 2);
    for (int accum : {2, 4}) {   // one micro-batch per rank; two (kept apart, summed in order across ranks)
        CAPTURE(accum);
        const std::string one = "one" + std::to_string(accum), two = "two" + std::to_string(accum);
        auto a = test::run_tool("retro-train", train_args(dir.path, one, accum));
        INFO(a.err);
        REQUIRE(a.exit_code == 0);
        auto b = mpirun_train(2, train_args(dir.path, two, accum) + " --reduce deterministic");
        INFO(b.err);
        REQUIRE(b.exit_code == 0);
        REQUIRE(test::losses(dir / one).size() == 12);
        CHECK(test::losses(dir / two) == test::losses(dir / one));   // losses and validation, every step
        CHECK(test::bytes(dir / two / "model.safetensors") == test::bytes(dir / one / "model.safetensors"));
        CHECK(test::bytes(dir / two / "checkpoints" / "step_00000012" / "optimizer.safetensors") ==
              test::bytes(dir / one / "checkpoints" / "step_00000012" / "optimizer.safetensors"));
        const std::string manifest = test::read_text(dir / two / "manifest.json");
        CHECK(manifest.find("\"ranks\": 2") != std::string::npos);
    }
    // the default all-reduce trains too (two ranks' sums are the same either way round: a + b == b + a)
    auto f = mpirun_train(2, train_args(dir.path, "fast", 2));
    INFO(f.err);
    REQUIRE(f.exit_code == 0);
    CHECK(test::bytes(dir / "fast" / "model.safetensors") == test::bytes(dir / "one2" / "model.safetensors"));
    // a global batch that does not split over the ranks is refused in one line, once
    auto odd = mpirun_train(2, train_args(dir.path, "odd", 3));
    CHECK(odd.exit_code != 0);
    const std::string refusal = "retro-train: error: --grad-accum: 3 micro-batches do not split over 2 ranks";
    const std::size_t at = odd.err.find(refusal);
    CHECK(at != std::string::npos);
    // printed once (rank 0's): rank 1, meeting the same refusal, waits kRootFirstSeconds (3 s) for rank 0 to end the
    // job; both take the same short path to it, so only a machine stalling rank 0 for 3 s would print it twice
    CHECK(odd.err.find(refusal, at + refusal.size()) == std::string::npos);
    CHECK_FALSE(fs::exists(dir / "odd" / "config.json"));
    // a rank given other options (mpirun's multi-program form; a job script's typo) is refused at the start, naming
    // the option: --val-every hung in a collective, --batch-size trained a model its manifest does not describe
    // (exit 0), --lr stopped with an internal error about the all-reduce (a helper's pass, session 54)
    for (const auto& [extra, says] : std::vector<std::pair<std::string, std::string>>{
             {" --val-every 2", "rank 1: --val-every is 2, rank 0's 4"},
             {" --batch-size 1", "rank 1: --batch-size is 1, rank 0's 2"},
             {" --lr 0.001", "rank 1: --lr is 0.001, rank 0's 0.003"},
             {" --no-retrieval", "rank 1: --no-retrieval is true, rank 0's false"}}) {
        CAPTURE(extra);
        const std::string args = train_args(dir.path, "mixed", 2);
        const test::RunResult mixed = test::run_command(std::string("timeout 120 env ") + kMpirun + "1 " + test::tool_path("retro-train") +
                                                        args + " : -np 1 " + test::tool_path("retro-train") + args + extra);
        CHECK(mixed.exit_code != 0);
        CHECK(mixed.exit_code != 124);   // (not a hang ended by the timeout)
        CHECK_MESSAGE(mixed.err.find("retro-train: error: " + says) != std::string::npos, mixed.err);
        CHECK_FALSE(fs::exists(dir / "mixed" / "config.json"));
    }
    {   // node-local copies of one checkpoint at other paths are the same input (a checkpoint folder has no manifest:
        // it was compared by its path; a review of session 54's diff)
        fs::copy(dir / "one2" / "checkpoints" / "step_00000012", dir / "ckA", fs::copy_options::recursive);
        fs::copy(dir / "ckA", dir / "ckB", fs::copy_options::recursive);
        const std::string args = train_args(dir.path, "from-copies", 2) + " --steps 2";
        const test::RunResult copies = test::run_command(std::string("timeout 120 env ") + kMpirun + "1 " + test::tool_path("retro-train") +
                                                         args + " --init-from " + (dir / "ckA").string() + " : -np 1 " +
                                                         test::tool_path("retro-train") + args + " --init-from " + (dir / "ckB").string());
        CHECK_MESSAGE(copies.exit_code == 0, copies.err);
    }
}

TEST_CASE("train mpi: a retro-fit (frozen decoder: only the trainable elements travel) equals 1 process byte for byte") {
    const std::string why = mpi_unavailable();
    if (!why.empty()) RETRO_SKIP(("mpirun tests: " + why).c_str());
    test::TempDir dir("train-mpi-fit");
    test::write_tiny_db(dir / "db", dir / "knn", 4, 16, 40, 5);
    auto base = test::run_tool("retro-train", train_args(dir.path, "base", 1) + " --no-retrieval");
    INFO(base.err);
    REQUIRE(base.exit_code == 0);
    const std::string fit = " --init-from " + (dir / "base").string() + " --train-only cca,encoder";
    auto a = test::run_tool("retro-train", train_args(dir.path, "one", 4) + fit);
    INFO(a.err);
    REQUIRE(a.exit_code == 0);
    for (const char* reduce : {"deterministic", "fast"}) {
        CAPTURE(reduce);
        const std::string out = std::string("two-") + reduce;
        auto b = mpirun_train(2, train_args(dir.path, out, 4) + fit + " --reduce " + reduce);
        INFO(b.err);
        REQUIRE(b.exit_code == 0);
        if (std::string(reduce) == "deterministic") {
            CHECK(test::losses(dir / out) == test::losses(dir / "one"));
            CHECK(test::bytes(dir / out / "model.safetensors") == test::bytes(dir / "one" / "model.safetensors"));
        } else {   // two micro-batches per rank: the local sum then MPI's sum is another order; close, not equal
            CHECK(test::losses(dir / out).size() == test::losses(dir / "one").size());
        }
    }
}

TEST_CASE("train mpi: a rank killed at a random step, then --resume, ends with the straight run's weights") {
    const std::string why = mpi_unavailable();
    if (!why.empty()) RETRO_SKIP(("mpirun tests: " + why).c_str());
    test::TempDir dir("train-mpi-kill");
    test::write_tiny_db(dir / "db", dir / "knn", 4, 16, 40, 4);
    auto straight = mpirun_train(2, train_args(dir.path, "straight", 2) + " --reduce deterministic");
    INFO(straight.err);
    REQUIRE(straight.exit_code == 0);
    std::random_device rd;
    const int kill_step = 1 + static_cast<int>(rd() % 11), kill_rank = static_cast<int>(rd() % 2);
    CAPTURE(kill_step);
    CAPTURE(kill_rank);
    auto killed = mpirun_train(2, train_args(dir.path, "killed", 2) + " --reduce deterministic --kill-rank " +
                                      std::to_string(kill_rank) + " --kill-step " + std::to_string(kill_step));
    INFO(killed.err);
    CHECK(killed.exit_code != 0);
    if (kill_rank == 1) CHECK(killed.err.find("retro-train: stopped by the launcher") != std::string::npos);   // rank 0's words
    CHECK_FALSE(fs::exists(dir / "killed" / "model.safetensors"));
    CHECK_FALSE(fs::exists(dir / "killed" / "manifest.json"));
    auto resumed = mpirun_train(2, train_args(dir.path, "killed", 2) + " --reduce deterministic --resume");
    INFO(resumed.err);
    REQUIRE(resumed.exit_code == 0);
    CHECK(test::losses(dir / "killed") == test::losses(dir / "straight"));
    CHECK(test::bytes(dir / "killed" / "model.safetensors") == test::bytes(dir / "straight" / "model.safetensors"));
}

TEST_CASE("launcher env: Open MPI, srun, PMI and the batch script that is not a job step") {
    CHECK_FALSE(env_of({}).launched());
    auto o = env_of({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}});
    CHECK(o.rank == 1);
    CHECK(o.size == 4);
    CHECK(o.local_size == 2);
    auto s = env_of({{"SLURM_PROCID", "2"}, {"SLURM_NTASKS", "3"}});   // simulated: no job id
    CHECK(s.rank == 2);
    CHECK(s.size == 3);
    auto step = env_of({{"SLURM_JOB_ID", "7"}, {"SLURM_STEP_ID", "0"}, {"SLURM_PROCID", "5"}, {"SLURM_STEP_NUM_TASKS", "8"},
                        {"SLURM_NTASKS", "16"}, {"SLURM_STEP_TASKS_PER_NODE", "4(x2)"}});
    CHECK(step.rank == 5);
    CHECK(step.size == 8);
    CHECK(step.local_size == 4);
    // a batch script of a 4-task job runs one process: SLURM_NTASKS there does not make it a rank
    CHECK_FALSE(env_of({{"SLURM_JOB_ID", "7"}, {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}}).launched());
    auto p = env_of({{"PMI_RANK", "0"}, {"PMI_SIZE", "2"}});
    CHECK(p.size == 2);
    CHECK_THROWS_AS(env_of({{"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "3"}}), UserError);   // rank out of range
    CHECK_THROWS_AS(env_of({{"OMPI_COMM_WORLD_RANK", "x"}, {"OMPI_COMM_WORLD_SIZE", "2"}}), UserError);
}

TEST_CASE("launcher env: Slurm's batch and extern steps are not job steps - their SLURM_NTASKS is the job's") {
    // (a mutant that took the "extern" step for a job step survived: a process there read the job's SLURM_NTASKS as
    // its own step's task count)
    for (const char* step : {"batch", "extern"}) {
        CAPTURE(step);
        CHECK_FALSE(env_of({{"SLURM_JOB_ID", "7"}, {"SLURM_STEP_ID", step}, {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}}).launched());
    }
    // a real step without SLURM_STEP_NUM_TASKS: its SLURM_NTASKS is the step's
    const auto step0 = env_of({{"SLURM_JOB_ID", "7"}, {"SLURM_STEP_ID", "0"}, {"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "4"}});
    CHECK(step0.launched());
    CHECK(step0.rank == 1);
    CHECK(step0.size == 4);
}

TEST_CASE("launcher env: a build without MPI refuses a multi-rank launch in one line") {
    const auto two = env_of({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"}});
    try {
        distributed_check_launch(two, false, "retro-train");
        FAIL("no refusal");
    } catch (const UserError& e) {
        const std::string m = e.what();
        CHECK(m.find("retro-train was launched as 2 ranks (OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE) but built without MPI") == 0);
        CHECK(m.find('\n') == std::string::npos);
    }
    CHECK_NOTHROW(distributed_check_launch(two, true, "retro-train"));
    CHECK_NOTHROW(distributed_check_launch(env_of({}), false, "retro-train"));
}

TEST_CASE("train mpi: the ring all-reduce model's fit, and a lower bound where the largest message was no slower") {
    using nlohmann::json;
    auto sweep = [](double t_small, double t_large) {
        return json::array({{{"bytes", 1024}, {"seconds", t_small}}, {{"bytes", 4096}, {"seconds", 1e-4}},
                            {{"bytes", 1 << 20}, {"seconds", t_large}}});
    };
    // t = alpha + 2 (N-1)/N * bytes / bw: at 4 ranks 1.5 MiB sent in 1 ms past alpha = 1.5 MiB/ms
    const json fit = bench::fit_ring_model(sweep(5e-5, 1.05e-3), 4);
    CHECK(fit["alpha_seconds"].get<double>() == 5e-5);
    CHECK(fit["bandwidth_bytes_per_s"].get<double>() == doctest::Approx(1.5 * (1 << 20) / 1e-3));
    CHECK_FALSE(fit["bandwidth_is_lower_bound"].get<bool>());
    // the largest no slower than the smallest (noise): not 0 or negative, the bound x / t, said to be one
    const json bound = bench::fit_ring_model(sweep(2e-3, 1e-3), 2);
    CHECK(bound["bandwidth_bytes_per_s"].get<double>() == doctest::Approx(double(1 << 20) / 1e-3));
    CHECK(bound["bandwidth_is_lower_bound"].get<bool>());
    CHECK(bench::fit_ring_model(sweep(2e-3, 2e-3), 2)["bandwidth_is_lower_bound"].get<bool>());
    // nothing to fit at one rank or one size
    CHECK(bench::fit_ring_model(sweep(5e-5, 1e-3), 1).is_null());
    CHECK(bench::fit_ring_model(json::array({{{"bytes", 1024}, {"seconds", 1e-5}}}), 2).is_null());
}

TEST_CASE("train mpi: retro-bench train --ranks 1,2 reports tokens/s, the all-reduce and the scaling efficiency") {
    const std::string why = mpi_unavailable();
    if (!why.empty()) RETRO_SKIP(("mpirun tests: " + why).c_str());
    test::TempDir dir("bench-ranks");
    auto r = test::run_command("OMPI_MCA_btl_vader_single_copy_mechanism=none " + test::tool_path("retro-bench") +
                               " train --ranks 1,2 --config " + test::config_path() +
                               " --batch 2 --steps 2 --warmup 1 --json " + (dir / "r.json").string());
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(r.out.find("efficiency") != std::string::npos);
    const auto j = nlohmann::json::parse(test::read_text(dir / "r.json"));
    REQUIRE(j["rows"].size() == 2);
    for (int i = 0; i < 2; i++) {
        const auto& row = j["rows"][i];
        CHECK(row["ranks"] == i + 1);
        CHECK(row["gradient_bytes"].get<std::int64_t>() == 4 * row["parameters"].get<std::int64_t>());
        CHECK(row["tokens_per_s"].get<double>() > 0);
    }
    CHECK(j["rows"][0]["efficiency"].get<double>() == 1.0);
    CHECK(j["rows"][1]["allreduce_sweep"].size() >= 2);
    CHECK(j["rows"][1]["allreduce_model"]["bandwidth_bytes_per_s"].get<double>() > 0);
}
