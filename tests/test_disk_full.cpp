// A full disk while an output is written (a helper's disk-full campaign, session 56): the write is an error naming the
// file and the reason, exit 2, and nothing is left at the output's name. The disk fills on demand with RLIMIT_FSIZE (a
// write past the limit fails with EFBIG, "File too large", SIGXFSZ ignored), at any byte offset, also within the last
// buffered block of a library's own stdio writes: no root, no mount. The tools ignore SIGXFSZ themselves (its default
// killed them without a word, exit 153: a helper's docs check, session 60), so the shells below leave it as it is.
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "core/atomic_file.h"
#include "core/error.h"
#include "index/faiss_index.h"
#include "test_cli_pipeline.h"
#include "test_util.h"

using namespace retro;
namespace fs = std::filesystem;

namespace {

// Runs `body` in a child whose files may not grow past `limit` bytes; its exit code (99: body returned without
// throwing; 98: it threw something else than a UserError holding `says`).
int with_file_size_limit(std::uint64_t limit, const std::string& says, const std::function<void()>& body) {
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl {limit, limit};
        ::setrlimit(RLIMIT_FSIZE, &rl);
        try {
            body();
        } catch (const UserError& e) {
            ::_exit(std::string(e.what()).find(says) != std::string::npos ? 0 : 97);
        } catch (...) {
            ::_exit(98);
        }
        ::_exit(99);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

TEST_CASE("disk full: an index that cannot be written whole is an error, not a cut-short index.faiss") {
    // faiss::write_index to a path ignored the error of its last flush (at fclose): a disk filled within the last
    // buffered 4 KB left a truncated index under a manifest, exit 0, and --resume took it for complete
    test::TempDir t("fullindex");
    const int d = 16;
    FaissIndex index("Flat", d);
    std::mt19937 rng(7);
    std::normal_distribution<float> g;
    std::vector<float> x(3000 * d);
    for (auto& v : x) v = g(rng);
    index.add(3000, x.data());
    const std::string whole = (t / "whole.faiss").string();
    index.save(whole);
    const std::uint64_t size = fs::file_size(whole);
    REQUIRE(size > 8192);
    for (const std::uint64_t short_by : {std::uint64_t(1), std::uint64_t(50), std::uint64_t(3000), size - 100}) {
        CAPTURE(short_by);
        const std::string path = (t / ("cut" + std::to_string(short_by) + ".faiss")).string();
        CHECK(with_file_size_limit(size - short_by, path + ".tmp: write failed: File too large", [&] { index.save(path); }) == 0);
        CHECK_FALSE(fs::exists(path));
        CHECK_FALSE(fs::exists(path + ".tmp"));
    }
    // with room it is written, and reads back
    CHECK(with_file_size_limit(size, "", [&] { index.save((t / "fits.faiss").string()); }) == 99);
    CHECK(test::read_text(t / "fits.faiss") == test::read_text(whole));
    CHECK(FaissIndex::load((t / "fits.faiss").string()).size() == 3000);
}

TEST_CASE("disk full: a copy that cannot be written names the copy, not the file copied") {
    // retro-index merge's copy of idf.npy said "SHARD/idf.npy: cannot copy file: Input/output error"
    test::TempDir t("fullcopy");
    const std::string from = (t / "from.bin").string(), to = (t / "to.bin").string();
    test::write_text(from, std::string(3 << 20, 'x'));
    CHECK(with_file_size_limit(1 << 20, to + ".tmp: write failed: File too large", [&] { copy_file_atomic(from, to); }) == 0);
    CHECK_FALSE(fs::exists(to));
    CHECK_FALSE(fs::exists(to + ".tmp"));
    copy_file_atomic(from, to);
    CHECK(test::read_text(to) == test::read_text(from));
    CHECK_THROWS_WITH_AS(copy_file_atomic((t / "missing").string(), to), doctest::Contains("missing: cannot be read"), UserError);
}

TEST_CASE("disk full: retro-train plot says the disk is full, exit 2, and leaves no file") {
    if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) {
        MESSAGE("skipped: no gnuplot");
        return;
    }
    // it was "internal error: gnuplot failed to write c.png", exit 1 (gnuplot wrote the file itself)
    const test::CliPipeline& p = test::bad_input_pipeline();
    test::TempDir t("fullplot");
    const fs::path png = t / "c.png";
    const std::string plot = test::tool_path("retro-train") + " plot " + p.run.string() + " --out " + png.string();
    const test::RunResult full = test::run_command("ulimit -f 1; " + plot);
    CHECK(full.exit_code == 2);
    CHECK_MESSAGE(full.err.find(png.string() + ".tmp: write failed: File too large") != std::string::npos, full.err);
    CHECK(fs::is_empty(t.path));   // no image, no .tmp, no scratch script or data beside it
    const test::RunResult fits = test::run_command(plot);
    CHECK_MESSAGE(fits.exit_code == 0, fits.err);
    CHECK(test::read_text(png).compare(0, 4, "\x89PNG") == 0);
}

TEST_CASE("disk full: retro-generate's --show-neighbours lines that cannot be written are an error") {
    // docs/generate.md captures them with `2> n.jsonl`: a full disk cut them short under exit 0
    if (!fs::exists("/dev/full")) {
        MESSAGE("skipped: no /dev/full");
        return;
    }
    const test::CliPipeline& p = test::bad_input_pipeline();
    const std::string gen = test::tool_path("retro-generate") + " " + p.run.string() + " --index " + p.index.string() +
                            " --db " + p.db.string() + " 'the cat' --max-tokens 12 --seed 3 --quiet --threads 1";
    for (const char* form : {" --show-neighbours --json", " --show-neighbours"}) {
        CAPTURE(form);
        const test::RunResult full = test::run_command("( " + gen + form + " 2>/dev/full )");
        CHECK(full.exit_code == 2);
        const test::RunResult fits = test::run_command(gen + form);
        CHECK_MESSAGE(fits.exit_code == 0, fits.err);
        const bool shown = fits.err.find("retrieved for chunk") != std::string::npos || fits.err.find("\"ids\"") != std::string::npos;
        CHECK(shown);
    }
}

TEST_CASE("disk full: the error line of a resumable run says what it keeps and how to go on") {
    // none said so, where Ctrl-C's note does: "... keeps its finished parts: continue with the same command and --resume"
    const test::CliPipeline& p = test::bad_input_pipeline();
    test::TempDir t("fullchunk");
    std::string text;   // one file of many documents: a small checkpoint record, a chunks.npy of some 100 KB
    for (int line = 0; line < 300; ++line) {
        text += "{\"text\": \"";
        for (int w = 0; w < 60; ++w) text += std::string(w ? " " : "") + (w % 3 ? "the" : "cat") + std::to_string((line * 7 + w) % 50);
        text += "\"}\n";
    }
    test::write_text(t / "corpus.jsonl", text);
    const std::string chunk = test::tool_path("retro-chunk") + " " + (t / "corpus.jsonl").string() + " --tokenizer " + p.tok.string() +
                              " --chunk-size 4 --seq-len 16 --quiet --block-docs 10 --checkpoint-every 0 --out ";
    const fs::path ref = t / "ref", db = t / "db";
    REQUIRE(test::run_command(chunk + ref.string()).exit_code == 0);
    // a checkpoint after every block of ten documents: the folder holds finished parts when chunks.npy outgrows the limit
    const std::uint64_t limit_kb = fs::file_size(ref / "chunks.npy") / 2 / 1024;
    REQUIRE(limit_kb >= 16);
    const test::RunResult full = test::run_command("ulimit -f " + std::to_string(limit_kb) + "; " + chunk + db.string());
    CHECK(full.exit_code == 2);
    CHECK_MESSAGE(full.err.find("chunks.npy.tmp: write failed: File too large (fix: once the file may grow (a larger `ulimit -f`, "
                                "or a filesystem that takes larger files), " + db.string() +
                                " keeps its finished parts: continue with the same command and --resume)\n") != std::string::npos,
                  full.err);
    CHECK_FALSE(fs::exists(db / "manifest.json"));
    const test::RunResult resumed = test::run_command(chunk + db.string() + " --resume");
    CHECK_MESSAGE(resumed.exit_code == 0, resumed.err);
    for (const char* f : {"chunks.npy", "doc_ids.npy", "doc_offsets.npy", "seq_starts.npy"})
        CHECK(test::read_text(db / f) == test::read_text(ref / f));
    // a run that fails before it keeps anything removes its folder, and its line says nothing of the folder (it said
    // "DB keeps its finished parts" of the folder just removed: a review, session 56)
    const fs::path db2 = t / "db2";
    const test::RunResult early = test::run_command("ulimit -f 1; " + chunk + db2.string());
    CHECK(early.exit_code == 2);
    CHECK_MESSAGE(early.err.find("write failed: File too large\n") != std::string::npos, early.err);
    CHECK_FALSE(fs::exists(db2));
}

TEST_CASE("disk full: retro-index and retro-knn say so at the start when their peak will not fit the disk") {
    // retro-index writes the embeddings twice (parts, then embeddings.npy) and the index before it removes the parts:
    // a full disk was found out only at the end
    const test::CliPipeline& p = test::bad_input_pipeline();
    test::TempDir t("fullwarn");
    const std::string index = p.db.string() + " --out " + (t / "idx").string() + " --dim 16 --threads 1";
    const test::RunResult small = test::run_command("RETRO_DISK_FREE=1K " + test::tool_path("retro-index") + " " + index);
    CHECK_MESSAGE(small.exit_code == 0, small.err);   // a warning: room can be made while it embeds
    CHECK(small.err.find("idx: this run writes about ") != std::string::npos);
    CHECK(small.err.find("and its disk has 1.0 KiB free: a full disk stops it (--resume then continues it") != std::string::npos);
    const std::string knn = (t / "idx").string() + " --db " + p.db.string() + " --threads 1 --out ";
    const test::RunResult roomy = test::run_tool("retro-knn", knn + (t / "knn").string());
    CHECK_MESSAGE(roomy.exit_code == 0, roomy.err);
    CHECK(roomy.err.find("at its peak") == std::string::npos);
    const test::RunResult tight = test::run_command("RETRO_DISK_FREE=100 " + test::tool_path("retro-knn") + " " + knn + (t / "knn2").string());
    CHECK(tight.exit_code == 0);
    CHECK(tight.err.find("knn2: this run writes about ") != std::string::npos);
    test::expect_refused(test::run_command("RETRO_DISK_FREE=lots " + test::tool_path("retro-knn") + " " + knn + (t / "knn3").string() + " --quiet"),
                         {"RETRO_DISK_FREE: 'lots' is not a disk size"});
}

TEST_CASE("disk full: standard output that cannot be written is an error with its reason") {
    // it said "standard output: write failed" alone: the reason was cleared before it was read, or lost with a batch
    // flushed earlier (retro-tokenizer encode flushes each batch)
    if (!fs::exists("/dev/full")) {
        MESSAGE("skipped: no /dev/full");
        return;
    }
    const test::CliPipeline& p = test::bad_input_pipeline();
    for (const std::string& command :
         {"echo 'the cat sat' | " + test::tool_path("retro-tokenizer") + " encode --model " + p.tok.string(),
          "echo '5 6 7' | " + test::tool_path("retro-tokenizer") + " decode --model " + p.tok.string(),
          test::tool_path("retro-chunk") + " inspect " + p.db.string()}) {
        CAPTURE(command);
        const test::RunResult r = test::run_command("( " + command + " > /dev/full )");
        CHECK(r.exit_code == 2);
        CHECK(r.err.find("standard output: write failed: No space left on device") != std::string::npos);
    }
    // a batch larger than the stream's buffer fails while its lines are put, not at its flush: the reason was lost
    // there (a helper's docs walk, session 67: 6 MB of text said "write failed" alone)
    test::TempDir t("devfull");
    const std::string in = (t / "in.txt").string(), ids = (t / "ids.txt").string();
    REQUIRE(test::run_command("( yes 'the cat sat on the mat' | head -n 20000 > " + in + " && " +
                              test::tool_path("retro-tokenizer") + " encode --model " + p.tok.string() + " < " + in +
                              " > " + ids + " )").exit_code == 0);
    for (const std::string& command : {test::tool_path("retro-tokenizer") + " encode --model " + p.tok.string() + " " + in,
                                       test::tool_path("retro-tokenizer") + " decode --model " + p.tok.string() + " " + ids}) {
        CAPTURE(command);
        const test::RunResult r = test::run_command("( " + command + " > /dev/full )");
        CHECK(r.exit_code == 2);
        CHECK_MESSAGE(r.err.find("standard output: write failed: No space left on device\n") != std::string::npos, r.err);
    }
}

TEST_CASE("disk full: standard output whose reader has gone, SIGPIPE ignored, says Broken pipe") {
    // under `trap '' PIPE` the writes fail with EPIPE: a stream whose earlier write failed refuses the next one without
    // a system call (errno 0), and encode, decode and chunk inspect said "write failed" alone (a helper's walk,
    // session 60); the output is well past a pipe's 64 KiB, so writes fail after the reader has gone
    const test::CliPipeline& p = test::bad_input_pipeline();
    test::TempDir t("epipe");
    const std::string in = (t / "in.txt").string(), ids = (t / "ids.txt").string(), err = (t / "err.txt").string();
    REQUIRE(test::run_command("( yes 'the cat sat on the mat' | head -n 100000 > " + in + " && " +
                              test::tool_path("retro-tokenizer") + " encode --model " + p.tok.string() + " < " + in +
                              " > " + ids + " )").exit_code == 0);   // (run_command adds its own redirects after)
    for (const std::string& command : {test::tool_path("retro-tokenizer") + " encode --model " + p.tok.string() + " < " + in,
                                       test::tool_path("retro-tokenizer") + " decode --model " + p.tok.string() + " < " + ids}) {
        CAPTURE(command);
        const test::RunResult r = test::run_command("trap '' PIPE; " + command + " 2> " + err + " | head -c 1 > /dev/null; cat " + err);
        INFO("out: ", r.out, " err: ", r.err);
        CHECK(r.out.find("standard output: write failed: Broken pipe\n") != std::string::npos);
    }
}

TEST_CASE("disk full: retro-train's error line says where its run resumes, as its own Ctrl-C note does") {
    const test::CliPipeline& p = test::bad_input_pipeline();
    test::TempDir t("fulltrain");
    const test::RunResult full = test::run_command("ulimit -f 1; " + test::tool_path("retro-train") + " " +
                                                   test::cli_train_args(p, t / "run") + " --steps 4 --checkpoint-every 2");
    CHECK(full.exit_code == 2);
    CHECK_MESSAGE(full.err.find("write failed: File too large (fix: once the file may grow (a larger `ulimit -f`, or a "
                                "filesystem that takes larger files), before the first checkpoint: run the same command "
                                "with --resume (it starts at step 0))") != std::string::npos,
                  full.err);
}
