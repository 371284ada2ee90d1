// Inputs changed while a run reads them (core/input_stamps.h; a helper's audit, session 69): a file made again or
// rewritten or removed after the run first read it is refused before the run marks its output complete, and the run's own files are never stamped; retro-train stops at its next checkpoint, keeping the ones before; a
// mapped file truncated under its reader is named in one line (core/mapped_file.h).
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"
#include "core/input_stamps.h"
#include "core/manifest.h"
#include "core/mapped_file.h"
#include "core/output_folder.h"
#include "core/shell_quote.h"
#include "index/knn_build.h"
#include "text/line_reader.h"
#include "train/init_from.h"
#include "test_cli_pipeline.h"
#include "test_util.h"

using namespace retro;
namespace fs = std::filesystem;

namespace {
// Stamping on for one test case (the tools' processes have it on; the test binary off)
struct StampingOn {
    StampingOn() { input_stamps_enable(true); }
    ~StampingOn() { input_stamps_enable(false); }
};
}  // namespace

TEST_CASE("input stamps: a file made again, rewritten or removed since the run read it is refused") {
    test::TempDir t("stamps");
    const StampingOn on;
    const fs::path a = t / "a.npy", b = t / "b.txt", c = t / "c.txt";
    test::write_text(a, "first");
    test::write_text(b, "bytes");
    test::write_text(c, "gone soon");
    for (const fs::path& f : {a, b, c}) input_stamp(f.string());
    CHECK_NOTHROW(input_stamps_check({t.path.string()}));
    // made again by rename (another run's --force): another file at the path, even with the same bytes
    test::write_text(t / "a.tmp", "first");
    fs::rename(t / "a.tmp", a);
    CHECK_THROWS_WITH_AS(input_stamps_check({t.path.string()}),
                         doctest::Contains((a.string() + ": was replaced while this run read it (made again, or copied over)").c_str()),
                         UserError);
    // the first read is the one kept: stamping the path again does not take the new file for the old
    input_stamp(a.string());
    CHECK_THROWS_AS(input_stamps_check({t.path.string()}), UserError);
    input_stamps_enable(false);
    input_stamps_enable(true);
    input_stamp(a.string());
    input_stamp(b.string());
    input_stamp(c.string());
    const auto stamped_time = fs::last_write_time(b);
    // rewritten in place (the same file, another size)
    test::write_text(b, "other bytes");
    CHECK_THROWS_WITH_AS(input_stamps_check({t.path.string()}), doctest::Contains((b.string() + ": was rewritten while this run read it").c_str()), UserError);
    test::write_text(b, "bytes");
    fs::last_write_time(b, stamped_time + std::chrono::seconds(1));   // (same size; only its time moved: still refused)
    CHECK_THROWS_AS(input_stamps_check({t.path.string()}), UserError);
    input_stamps_enable(false);
    input_stamps_enable(true);
    input_stamp(c.string());
    fs::remove(c);   // removed: the run reads on what it opened, but would record a file that is not there
    CHECK_THROWS_WITH_AS(input_stamps_check({t.path.string()}), doctest::Contains((c.string() + ": was removed while this run read it").c_str()),
                         UserError);
    input_stamps_enable(false);
    input_stamps_enable(true);
    // only what the caller records is checked: a file outside `inputs` (an --init-from checkpoint its run prunes), or
    // a file among them named by another spelling, as it lies
    input_stamps_enable(false);
    input_stamps_enable(true);
    input_stamp(a.string());
    test::write_text(a, "changed again, longer");
    CHECK_NOTHROW(input_stamps_check({(t / "elsewhere").string()}));
    CHECK_THROWS_AS(input_stamps_check({a.string()}), UserError);
    CHECK_THROWS_AS(input_stamps_check({(t / "." / a.filename()).string()}), UserError);
    // nothing is stamped with stamping off (a library caller: the tests, retro-bench's stages)
    input_stamps_enable(false);
    input_stamp(a.string());
    test::write_text(a, "changed");
    CHECK_NOTHROW(input_stamps_check({t.path.string()}));
}

TEST_CASE("input stamps: a file opened is stamped as the file read, not as what its path names by then") {
    // json_read_file, the tokenizer and FAISS stamped by path just before or after their own open (session 69's note): a
    // file made again in that instant was read unstamped, or stamped as the new one. They stamp the stream they read.
    test::TempDir t("stampfd");
    const StampingOn on;
    const fs::path a = t / "a.json";
    test::write_text(a, "{\"v\": 1}");
    std::FILE* f = std::fopen(a.string().c_str(), "rb");
    REQUIRE(f != nullptr);
    test::write_text(t / "a.tmp", "{\"v\": 2}");
    fs::rename(t / "a.tmp", a);   // made again between the open and the stamp
    input_stamp_file(a.string(), f);
    std::fclose(f);
    CHECK_THROWS_WITH_AS(input_stamps_check({a.string()}), doctest::Contains("was replaced while this run read it"), UserError);
    // input_read_whole: the bytes, the file stamped, false for a missing file, a folder named
    const fs::path b = t / "b.txt";
    test::write_text(b, std::string(200000, 'x') + "end");
    std::string bytes;
    REQUIRE(input_read_whole(b.string(), bytes));
    CHECK(bytes.size() == 200003);
    CHECK(bytes.substr(bytes.size() - 3) == "end");
    CHECK_NOTHROW(input_stamps_check({b.string()}));
    test::write_text(b, "short");
    CHECK_THROWS_WITH_AS(input_stamps_check({b.string()}), doctest::Contains("was rewritten while this run read it"), UserError);
    CHECK_FALSE(input_read_whole((t / "missing").string(), bytes));
    CHECK_THROWS_WITH_AS(input_read_whole(t.path.string(), bytes), doctest::Contains("cannot be read: Is a directory"), UserError);
}

TEST_CASE("input stamps: files of a folder this process writes are its own, never refused") {
    test::TempDir t("stampsown");
    const StampingOn on;
    const fs::path out = t / "out";
    fs::create_directories(out);
    test::write_text(out / "state.json", "{}");
    input_stamp((out / "state.json").string());   // read before the lock was taken (a --resume's first look)
    output_folder_lock(out.string(), "retro-knn");
    test::write_text(out / "parts.npy", "x");
    input_stamp((out / "parts.npy").string());
    test::write_text(out / "state.json.tmp", "{\"tool\": \"retro-knn\"}");
    fs::rename(out / "state.json.tmp", out / "state.json");
    test::write_text(out / "parts.npy", "longer");
    CHECK_NOTHROW(input_stamps_check({t.path.string()}));
}

TEST_CASE("input stamps: retro-train stops at its next checkpoint once its --db file is made again, keeping the ones before") {
    const test::CliPipeline& p = test::bad_input_pipeline();
    test::TempDir t("stampstrain");
    const fs::path db = t / "db", run = t / "run";
    test::copy_folder(p.db, db);
    // the database's chunks.npy made again (a copy renamed over it: a --force's atomic write) once the first step is in
    const std::string chunks = shell_quote((db / "chunks.npy").string());
    const std::string metrics = shell_quote((run / "metrics.jsonl").string());
    const test::RunResult r = test::run_command(
        // (timeout: a run that misses the change trains on toward its 100000 steps; the mutation campaign of session 71
        // hung there)
        "{ timeout -s KILL 300 " + shell_quote(test::tool_path("retro-train")) + " --db " + shell_quote(db.string()) + " --knn " +
        shell_quote(p.knn.string()) + " --config " + shell_quote(p.config.string()) + " --out " + shell_quote(run.string()) +
        " --batch-size 2 --quiet --threads 1 --steps 100000 --checkpoint-every 1 2>" + shell_quote((t / "err").string()) +
        " & pid=$!; i=0; while [ ! -s " + metrics + " ] && kill -0 $pid 2>/dev/null && [ $i -lt 1200 ]; do sleep 0.05; " +
        "i=$((i+1)); done; cp " + chunks + " " + chunks + ".new && mv " + chunks + ".new " + chunks +
        "; wait $pid; echo rc=$?; }");
    const std::string err = test::read_text(t / "err");
    INFO("stderr: ", err);
    CHECK(r.out == "rc=2\n");
    CHECK(err.find("retro-train: error: " + (db / "chunks.npy").string() + ": was replaced while this run read it") == 0);
    CHECK(err.find("(fix: run this command again with --force once the new file is complete)") != std::string::npos);
    CHECK_FALSE(fs::exists(run / "manifest.json"));
    CHECK_FALSE(fs::exists(run / "model.safetensors"));
    CHECK(fs::exists(run / "checkpoints"));
    // (a --resume goes on from them: the copy has the bytes the database's manifest records, which checkpoints hold)
}

// The same audit: a mapped input truncated while a tool read it (or `cp` over it, which truncates first) ended the
// tool by SIGBUS, exit 135 and no word. Now one line naming the file, exit 2.
TEST_CASE("input stamps: a mapped file truncated under its reader ends the process with one line naming it, exit 2") {
    if (test::kAddressSanitizer) {   // (ASan's own SIGBUS handler comes first there)
        MESSAGE("skipped: under AddressSanitizer");
        return;
    }
    test::TempDir t("sigbus");
    const fs::path f = t / "chunks.npy", err = t / "err";
    test::write_text(f, std::string(3 * 4096, 'x'));
    std::fflush(nullptr);
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {   // the reader: maps the file, which is then cut to one page, and reads past it
        const int fd = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        ::dup2(fd, 2);
        const MappedFile m(f.string());
        if (::truncate(f.c_str(), 4096) != 0) ::_exit(5);
        volatile std::uint8_t sum = 0;
        for (std::size_t i = 0; i < m.size(); i += 4096) sum = static_cast<std::uint8_t>(sum + m.data()[i]);
        ::_exit(7);   // (not reached: the page past the cut cannot be read)
    }
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 2);
    const std::string line = test::read_text(err);
    CHECK(line.find(": error: " + f.string() + ": could not be read (truncated or rewritten while this run read it, or an I/O "
                                                "error) (fix: ") != std::string::npos);
    CHECK(std::count(line.begin(), line.end(), '\n') == 1);
}

// The review of session 69: an --init-from checkpoint its own run prunes while the new run trains was hashed again at
// the end ("cannot read input"); it is recorded as read (size and fingerprint at load), and the check leaves it alone.
TEST_CASE("input stamps: an input recorded as read is kept as read and not checked, whatever became of its file") {
    test::TempDir t("stampsread");
    const StampingOn on;
    const fs::path base = t / "step_00000002" / "model.safetensors";
    fs::create_directories(base.parent_path());
    test::write_text(base, "weights");
    input_stamp(base.string());
    ToolContext ctx;
    ctx.tool = "retro-train";
    Manifest m(ctx);
    m.add_input_as_read("init_from", base.string(), 7, "0123456789abcdef");
    fs::remove_all(base.parent_path());   // pruned by its run
    CHECK_NOTHROW(m.inputs_check());
    REQUIRE(m.json()["inputs"].size() == 1);
    CHECK(m.json()["inputs"][0]["role"] == "init_from");
    CHECK(m.json()["inputs"][0]["size"] == 7);
    CHECK(m.json()["inputs"][0]["fingerprint"] == "0123456789abcdef");
    // recorded the usual way, the same file's removal is refused
    test::write_text(t / "config.json", "{}");
    input_stamp((t / "config.json").string());
    m.add_input("config", (t / "config.json").string());
    fs::remove(t / "config.json");
    CHECK_THROWS_WITH_AS(m.inputs_check(), doctest::Contains("config.json: was removed while this run read it"), UserError);
}

TEST_CASE("input stamps: a manifest is not written over an input rewritten since it was read, whatever the tool") {
    // (the mutation campaign of session 71: retro-chunk, chunk merge and the image index rely on Manifest::write's own
    // check alone; with it gone a corpus rewritten under retro-chunk was recorded as read)
    test::TempDir t("stampswrite");
    const StampingOn on;
    const fs::path cfg = t / "cfg.json", out = t / "out";
    test::write_text(cfg, "{\"a\": 1}");
    input_stamp(cfg.string());
    ToolContext ctx;
    ctx.tool = "retro-chunk";
    Manifest m(ctx);
    m.add_input("config", cfg.string());
    fs::create_directories(out);
    test::write_text(cfg, "{\"a\": 12}");
    CHECK_THROWS_WITH_AS(m.write(out.string()), doctest::Contains("cfg.json: was rewritten while this run read it"), UserError);
    CHECK_FALSE(fs::exists(out / "manifest.json"));
}

TEST_CASE("input stamps: a corpus file read line by line is stamped as the file read, plain or compressed") {
    // (the mutation campaign of session 71: LineReader's plain source stamped nothing, and no test saw it)
    test::TempDir t("stampslines");
    const StampingOn on;
    const fs::path plain = t / "corpus.txt", packed = t / "corpus.jsonl.gz";
    test::write_text(plain, "one\ntwo\n");
    {
        gzFile z = gzopen(packed.string().c_str(), "wb");
        REQUIRE(z);
        gzputs(z, "{\"text\": \"one\"}\n");
        gzclose(z);
    }
    for (const fs::path& f : {plain, packed}) {
        CAPTURE(f.string());
        LineReader reader(f.string());
        std::string line;
        REQUIRE(reader.next(line));
        std::ofstream(f, std::ios::app) << "appended while it was read\n";
        CHECK_THROWS_WITH_AS(input_stamps_check({f.string()}), doctest::Contains("was rewritten while this run read it"), UserError);
    }
}

TEST_CASE("input stamps: --init-from's weights are recorded with their size as read") {
    // (the mutation campaign of session 71: a run's manifest recorded the base weights with size 0 and no test saw it)
    test::TempDir t("stampsinit");
    const fs::path weights = t / "base.safetensors";
    test::write_text(weights, std::string(123, 'w'));
    const InitFromInfo info = init_from_resolve(weights.string());
    CHECK(info.weights == weights.string());
    CHECK(info.bytes == 123);
    CHECK(info.fingerprint.size() == 16);
}

TEST_CASE("input stamps: retro-knn keeps its state.json when an input was made again, so that it stays an unfinished run") {
    // (the mutation campaign of session 71: with the check after state.json's removal, the run was refused all the same,
    // but its folder then read as "holds neighbours.npy ... but no manifest.json", not as a retro-knn run to --resume)
    const test::CliPipeline& p = test::bad_input_pipeline();
    test::TempDir t("stampsknn");
    const fs::path db = t / "db", out = t / "knn";
    test::copy_folder(p.db, db);
    test::copy_folder(p.knn, out);
    fs::remove(out / "manifest.json");
    const nlohmann::json state = {{"parameters", nlohmann::json::object()}, {"index", p.index.string()},
                                  {"db", db.string()}, {"queries", ""}};
    test::write_text(out / "state.json", state.dump());
    const StampingOn on;
    input_stamp((db / "chunks.npy").string());
    fs::last_write_time(db / "chunks.npy", fs::last_write_time(db / "chunks.npy") + std::chrono::seconds(2));
    ToolContext ctx;
    ctx.tool = "retro-knn";
    CHECK_THROWS_WITH_AS(knn_write_manifest(ctx, state, out.string(), 0, 0), doctest::Contains("was rewritten while this run read it"),
                         UserError);
    CHECK(fs::exists(out / "state.json"));
    CHECK_FALSE(fs::exists(out / "manifest.json"));
}
