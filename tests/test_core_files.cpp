// core: atomic writes survive SIGKILL (fork + kill), manifests and fingerprints, UTF-8 repair,
// globbing, compressed jsonl reading (a cut or foreign .gz/.zst is refused, whatever --on-error says).
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include <cerrno>
#include <chrono>
#include <random>
#include <regex>
#include <thread>
#include <utility>

#include "core/atomic_file.h"
#include "core/fingerprint.h"
#include "core/interrupt_note.h"
#include "core/log.h"
#include "core/manifest.h"
#include "core/memory_budget.h"
#include "core/npy.h"
#include "core/output_folder.h"
#include "core/progress.h"
#include "core/scratch_dir.h"
#include "core/shell_quote.h"
#include "core/stderr_capture.h"
#include "core/terminal_text.h"
#include "test_util.h"
#include "text/corpus.h"
#include "text/line_reader.h"
#include "text/utf8.h"

using namespace retro;
namespace fs = std::filesystem;

TEST_CASE("core: a writer killed with SIGKILL leaves the old complete file or none") {
    test::TempDir tmp("kill");
    std::string path = (tmp / "data.bin").string();
    const std::size_t kBlock = 1 << 16, kBlocks = 64;   // 4 MiB per version
    std::mt19937 rng(7);
    for (int round = 0; round < 12; ++round) {
        CAPTURE(round);
        pid_t pid = fork();
        REQUIRE(pid >= 0);
        if (pid == 0) {   // child: write versions in a loop, each byte = version number
            for (int version = 1;; ++version) {
                AtomicFile f(path);
                std::string block(kBlock, static_cast<char>(version & 0x7f));
                for (std::size_t b = 0; b < kBlocks; ++b) f.write(block);
                f.commit();
            }
        }
        std::this_thread::sleep_for(std::chrono::microseconds(rng() % 60000));
        kill(pid, SIGKILL);
        int status = 0;
        waitpid(pid, &status, 0);
        if (!fs::exists(path)) continue;   // killed before the first commit: none
        std::string bytes = test::read_text(path);
        REQUIRE(bytes.size() == kBlock * kBlocks);   // complete, never truncated
        CHECK(bytes.find_first_not_of(bytes[0]) == std::string::npos);   // one version only
        fs::remove(path);
    }
}

namespace {
std::string g_renamed_path;   // what commit's after_rename saw (a plain function pointer: no captures)
bool g_renamed_seen = false;
void note_renamed() {
    g_renamed_seen = fs::exists(g_renamed_path) && !fs::exists(g_renamed_path + ".tmp") &&
                     test::read_text(g_renamed_path) == "committed";
}
}  // namespace

TEST_CASE("core: AtomicFile's commit runs after_rename once the file has its name") {
    // Manifest::write takes back its interrupt note there, before the folder's sync (a signal during the sync printed
    // an unfinished run's line over a finished folder: a helper's soak, session 70)
    test::TempDir tmp("atomicrename");
    g_renamed_path = (tmp / "m.json").string();
    g_renamed_seen = false;
    AtomicFile f(g_renamed_path);
    f.write("committed");
    f.commit(&note_renamed);
    CHECK(g_renamed_seen);
}

TEST_CASE("core: an uncommitted AtomicFile leaves nothing behind") {
    test::TempDir tmp("atomic");
    std::string path = (tmp / "x.txt").string();
    write_file_atomic(path, "old");
    {
        AtomicFile f(path);
        f.write("new but unfinished");
    }
    CHECK(test::read_text(path) == "old");
    CHECK(!fs::exists(path + ".tmp"));
}

namespace {

// Whether `dir` is gone within `seconds` (the watchdog removes it once the process has ended).
bool gone_within(const fs::path& dir, double seconds) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (fs::exists(dir)) {
        if (std::chrono::steady_clock::now() > until) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return true;
}

// A child process that makes a ScratchDir (with a 1 MiB file in it), sends its path through `ready` and waits to be
// signalled; returns the child's pid and the path.
std::pair<pid_t, std::string> child_with_scratch(const std::string& prefix) {
    int ready[2];
    REQUIRE(::pipe(ready) == 0);
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        ::signal(SIGINT, SIG_DFL);   // as in a tool (doctest's crash handler is inherited)
        ::signal(SIGTERM, SIG_DFL);
        ScratchDir s(prefix);
        test::write_text(fs::path(s.path()) / "big.bin", std::string(1 << 20, 'x'));
        const std::string line = s.path() + "\n";
        if (::write(ready[1], line.data(), line.size()) != static_cast<ssize_t>(line.size())) ::_exit(3);
        ::pause();
        ::_exit(4);
    }
    ::close(ready[1]);
    std::string path;
    char c = 0;
    while (::read(ready[0], &c, 1) == 1 && c != '\n') path += c;
    ::close(ready[0]);
    return {child, path};
}

}  // namespace

TEST_CASE("core: a ScratchDir is removed at its end, and by its watchdog when the process is stopped or killed") {
    const std::string prefix = "retro-test-scratch";
    std::string kept;
    {
        ScratchDir a(prefix), b(prefix);   // two of one prefix in one process: two folders
        kept = a.path();
        CHECK(a.path() != b.path());
        CHECK(fs::path(a.path()).filename().string().rfind(prefix + "-" + std::to_string(::getpid()) + "-", 0) == 0);
        fs::create_directories(fs::path(kept) / "a");
        test::write_text(fs::path(kept) / "a" / "b.txt", "x");
        CHECK(fs::exists(fs::path(kept) / "a" / "b.txt"));
    }
    CHECK_FALSE(fs::exists(kept));

    for (const int sig : {SIGINT, SIGTERM, SIGKILL}) {
        CAPTURE(sig);
        const auto [child, dir] = child_with_scratch(prefix);
        REQUIRE(fs::exists(fs::path(dir) / "big.bin"));
        ::kill(child, sig);
        int status = 0;
        REQUIRE(::waitpid(child, &status, 0) == child);
        CHECK(WIFSIGNALED(status));
        CHECK(gone_within(dir, 10.0));
    }
}

TEST_CASE("core: fingerprints are xxh3-64 of the bytes") {
    // XXH3_64bits("") = 2d06800538d394c2 (xxhash reference test vector)
    CHECK(fingerprint_bytes("", 0) == "2d06800538d394c2");
    Fingerprinter fp;
    fp.update("ab", 2);
    fp.update("c", 1);
    CHECK(fp.hex() == fingerprint_bytes("abc", 3));
}

TEST_CASE("core: json_first_difference names the first differing key path and both values") {
    const nlohmann::json a = {{"rows", 10}, {"parameters", {{"k", 2}, {"extra", 8}, {"list", {1, 2, 3}}}}};
    CHECK(json_first_difference(a, a).empty());
    nlohmann::json b = a;
    b["parameters"]["k"] = 3;
    CHECK(json_first_difference(a, b) == "parameters.k is 3, the folder's 2");
    CHECK(json_first_difference(a["parameters"], b["parameters"], "parameters") == "parameters.k is 3, the folder's 2");
    b = a;
    b["parameters"]["list"][1] = 7;
    CHECK(json_first_difference(a, b) == "parameters.list[1] is 7, the folder's 2");
    b = a;
    b["parameters"].erase("extra");
    CHECK(json_first_difference(a, b) == "parameters.extra is absent, the folder's 8");
    b = a;
    b["new"] = "x";
    CHECK(json_first_difference(a, b) == "new is \"x\", the folder's absent");
    CHECK(json_first_difference(nlohmann::json(1), nlohmann::json(std::string(100, 'z'))).size() < 100);
}

TEST_CASE("core: manifest_read of an interrupted run's folder names the tool and --resume") {
    test::TempDir tmp("manifest-unfinished");
    fs::create_directories(tmp / "knn" / "parts");
    test::write_text(tmp / "knn" / "state.json", R"({"tool": "retro-knn", "rows": 10})");
    CHECK_THROWS_WITH_AS(manifest_read((tmp / "knn").string()),
                         doctest::Contains("an unfinished retro-knn run (stopped before its end) (fix: finish it: run the "
                                           "same retro-knn command again with --resume)"),
                         UserError);
    fs::create_directories(tmp / "db");
    test::write_text(tmp / "db" / "progress.json", "{}");
    CHECK_THROWS_WITH_AS(manifest_read((tmp / "db").string()), doctest::Contains("an unfinished retro-chunk run"), UserError);
    fs::create_directories(tmp / "other");
    CHECK_THROWS_WITH_AS(manifest_read((tmp / "other").string()),
                         doctest::Contains("missing: the folder is incomplete or was not made by a RetroKit tool"), UserError);
    // a tool's outputs without manifest or mark (a merge stopped before its manifest; the kill soak, session 68)
    fs::create_directories(tmp / "merged");
    for (const char* name : {"chunks.npy", "seq_starts.npy", "doc_ids.npy"}) test::write_text(tmp / "merged" / name, "x");
    CHECK_THROWS_WITH_AS(manifest_read((tmp / "merged").string()),
                         doctest::Contains("manifest.json: missing: the folder holds chunks.npy, doc_ids.npy and "
                                           "seq_starts.npy, as retro-chunk's output does, but no manifest.json, which "
                                           "retro-chunk writes last (a run stopped before its end, or files copied or made "
                                           "without it) (fix: make it again: run the retro-chunk command that made it again "
                                           "(with --resume, or --force)"),
                         UserError);
    fs::create_directories(tmp / "knn2");
    test::write_text(tmp / "knn2" / "neighbours.npy", "x");
    CHECK_THROWS_WITH_AS(manifest_read((tmp / "knn2").string()),
                         doctest::Contains("holds neighbours.npy, as retro-knn's output does, but no manifest.json"), UserError);
    // a folder that is not there, or a file, is named as such (it said "NAME/manifest.json: missing: the folder is
    // incomplete")
    CHECK_THROWS_WITH_AS(manifest_read((tmp / "nonexistent").string()), doctest::Contains("nonexistent: no such folder"), UserError);
    test::write_text(tmp / "file", "x");
    CHECK_THROWS_WITH_AS(manifest_read((tmp / "file").string()), doctest::Contains("file: is a file, not a folder"), UserError);
}

TEST_CASE("core: manifest_read of a folder or manifest this user may not read names it and the permission") {
    // (it said "DB/progress.json: status: Permission denied", of a file the folder does not hold)
    test::TempDir tmp("manifest-perms");
    fs::permissions(tmp.path, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
    fs::create_directories(tmp / "closed");
    fs::create_directories(tmp / "open");
    test::write_text(tmp / "open" / "manifest.json", R"({"outputs": []})");
    fs::permissions(tmp / "closed", fs::perms::none);
    fs::permissions(tmp / "open", fs::perms::owner_all | fs::perms::others_read | fs::perms::others_exec);
    fs::permissions(tmp / "open" / "manifest.json", fs::perms::none);   // (unreadable to a non-root owner too)
    const auto refusal_holds = [](const fs::path& dir, const std::string& expected) {
        try {
            manifest_read(dir.string());
        } catch (const UserError& e) {
            return std::string(e.what()).find(expected) != std::string::npos ? 0 : 4;
        }
        return 5;   // read without a word
    };
    const int closed = test::exit_code_as_nobody(tmp.path, [&] {
        return refusal_holds(tmp / "closed", (tmp / "closed").string() + ": cannot be read: Permission denied");
    });
    const int unreadable = test::exit_code_as_nobody(tmp.path, [&] {
        return refusal_holds(tmp / "open", (tmp / "open" / "manifest.json").string() + ": cannot be read: Permission denied");
    });
    fs::permissions(tmp / "closed", fs::perms::owner_all);
    if (closed < 0 || unreadable < 0) RETRO_SKIP("cannot become nobody, or nobody cannot reach the temporary folder");
    CHECK(closed == 0);       // 4: another message; 5: no refusal
    CHECK(unreadable == 0);
}

TEST_CASE("core: manifest records inputs and outputs - and verification catches a change") {
    test::TempDir tmp("manifest");
    std::string dir = tmp.path.string();
    std::int64_t v[4] = {1, 2, 3, 4};
    npy_save((tmp / "a.npy").string(), {2, 2}, v);
    test::write_text(tmp / "in.txt", "hello");
    ToolContext ctx;
    ctx.tool = "retro-test";
    ctx.command_line = "retro-test --x 1";
    Manifest m(ctx);
    m.parameters()["x"] = 1;
    m.add_input("text", (tmp / "in.txt").string());
    m.add_output(dir, "a.npy");
    m.write(dir);
    auto j = manifest_read(dir);
    CHECK(j["tool"] == "retro-test");
    CHECK(j["command_line"] == "retro-test --x 1");
    CHECK(j["inputs"][0]["size"] == 5);
    CHECK(j["inputs"][0]["fingerprint"] == fingerprint_bytes("hello", 5));
    CHECK(j["outputs"][0]["shape"] == nlohmann::json::array({2, 2}));
    CHECK(j["outputs"][0]["dtype"] == "i64");
    CHECK_NOTHROW(manifest_verify_outputs(dir, {"a.npy"}));
    v[3] = 5;
    npy_save((tmp / "a.npy").string(), {2, 2}, v);
    CHECK_THROWS_AS(manifest_verify_outputs(dir, {"a.npy"}), UserError);
    test::TempDir empty("manifest-none");
    CHECK_THROWS_AS(manifest_read(empty.path.string()), UserError);
}

TEST_CASE("core: invalid UTF-8 is replaced and counted") {
    std::string s = "ok \xff\xfe caf\xc3\xa9 \xe2\x82 end \xed\xa0\x80";   // stray bytes, truncated seq, surrogate
    CHECK(utf8_sanitize(s) == 4);
    CHECK(s == "ok \xEF\xBF\xBD\xEF\xBF\xBD caf\xc3\xa9 \xEF\xBF\xBD end \xEF\xBF\xBD");
    std::string clean = "plain ascii and \xe4\xb8\xad\xe6\x96\x87";
    CHECK(utf8_sanitize(clean) == 0);
}

TEST_CASE("core: terminal_text shows C0 - DEL - C1 controls and bytes that are not UTF-8 as bytes and leaves printable UTF-8 alone") {
    CHECK(terminal_text("red\x1b[31m") == "red\\x1b[31m");
    CHECK(terminal_text("a\tb\nc\x7f") == "a\tb\nc\\x7f");
    CHECK(terminal_text("a\tb\nc", true) == "a\\x09b\\x0ac");
    CHECK(terminal_text("csi\xc2\x9b" "31m") == "csi\\xc2\\x9b31m");   // U+009B, the one-byte CSI
    CHECK(terminal_text("\xc2\x80\xc2\x9f") == "\\xc2\\x80\\xc2\\x9f");
    CHECK(terminal_text("\xc2\xa0\xc2\xa9 caf\xc3\xa9 \xe4\xb8\xad") == "\xc2\xa0\xc2\xa9 caf\xc3\xa9 \xe4\xb8\xad");
    CHECK(terminal_text("C:\\x0a") == "C:\\x0a");   // a literal backslash stays (decoded text holds them)
    // bytes that are not UTF-8 (Latin-1, a chunk cut inside a character, a stray continuation byte, an overlong
    // form, a surrogate) are shown as bytes: a lone 0x9b is CSI to a terminal not in UTF-8 mode
    CHECK(terminal_text("cut\xc2") == "cut\\xc2");
    CHECK(terminal_text("caf\xe9 \x9b" "31m") == "caf\\xe9 \\x9b31m");
    CHECK(terminal_text("\xe4\xb8") == "\\xe4\\xb8");
    CHECK(terminal_text("\xc0\xaf \xed\xa0\x80") == "\\xc0\\xaf \\xed\\xa0\\x80");
    CHECK(terminal_text("\xf0\x9f\x98\x80 \xf4\x90\x80\x80") == "\xf0\x9f\x98\x80 \\xf4\\x90\\x80\\x80");   // U+1F600; past U+10FFFF
    // cut at a character: never inside a UTF-8 sequence or a \xNN escape
    CHECK(terminal_text_cut("abcdef", 6) == "abcdef");
    CHECK(terminal_text_cut("abcdefg", 6) == "abcdef...");
    CHECK(terminal_text_cut("ab\xe4\xb8\xad", 4) == "ab...");          // U+4E2D is bytes 2..4
    CHECK(terminal_text_cut("ab\xe4\xb8\xad" "c", 5) == "ab\xe4\xb8\xad...");
    CHECK(terminal_text_cut("ab\x1b", 4) == "ab...");                      // "\x1b" is bytes 2..5
    CHECK(terminal_text_cut("ab\x1b", 5) == "ab...");
    CHECK(terminal_text_cut("ab\x1b" "c", 6) == "ab\\x1b...");
    CHECK(terminal_text_cut("a\nb", 10) == "a\\x0ab");
}

TEST_CASE("core: glob matching") {
    CHECK(glob_match("**/*.txt", "a.txt"));
    CHECK(glob_match("**/*.txt", "x/y/a.txt"));
    CHECK(!glob_match("**/*.txt", "x/a.txt.gz"));
    CHECK(glob_match("_sources/**/*.rst.txt", "_sources/library/os.rst.txt"));
    CHECK(glob_match("_sources/**/*.rst.txt", "_sources/os.rst.txt"));
    CHECK(!glob_match("*.txt", "x/a.txt"));
    CHECK(glob_match("doc?.md", "doc1.md"));
    // many stars on a long name: each (pattern, path) position tried once (the recursion tried every split of the
    // 40 a's among the 10 stars: C(40, 10), minutes)
    const std::string stars = "*a*a*a*a*a*a*a*a*a*a", as(40, 'a');
    CHECK(!glob_match(stars + "*b", as));
    CHECK(glob_match(stars + "*", as + "b"));
}

TEST_CASE("core: glob matching equals a regular-expression oracle on random patterns and paths") {
    // the oracle: '**/' = any whole components (none too), a trailing '**' = anything, '*' = [^/]*, '?' = [^/]
    const auto oracle = [](const std::string& glob) {
        std::string re;
        for (std::size_t i = 0; i < glob.size(); ++i) {
            if (glob.compare(i, 3, "**/") == 0 && (i == 0 || glob[i - 1] == '/')) re += "(.*/)?", i += 2;
            else if (glob.compare(i, 2, "**") == 0 && i + 2 == glob.size() && (i == 0 || glob[i - 1] == '/')) re += ".*", i += 1;
            else if (glob[i] == '*') re += "[^/]*";
            else if (glob[i] == '?') re += "[^/]";
            else if (glob[i] == '.') re += "\\.";
            else re += glob[i];
        }
        return std::regex(re);
    };
    std::mt19937 rng(11);
    const std::vector<std::string> glob_pieces = {"a", "b", "/", "*", "?", "**/", "."}, path_pieces = {"a", "b", "/", "."};
    const auto any_of = [&](const std::string& chars) { return std::string(1, chars[rng() % chars.size()]); };
    int matched = 0;
    for (int t = 0; t < 3000; ++t) {
        std::string glob, path;
        std::vector<std::string> pieces;
        for (int n = static_cast<int>(rng() % 6); n >= 0; --n) pieces.push_back(glob_pieces[rng() % glob_pieces.size()]);
        if (rng() % 4 == 0) pieces.push_back("**");
        for (const auto& p : pieces) glob += p;
        if (t % 2 == 0) {   // a random path
            for (int n = static_cast<int>(rng() % 8); n >= 0; --n) path += path_pieces[rng() % path_pieces.size()];
        } else {   // a path made from the pattern, piece by piece (mostly a match; some not, where '**' is not alone)
            for (const auto& p : pieces) {
                if (p == "*") for (int n = static_cast<int>(rng() % 3); n > 0; --n) path += any_of("ab.");
                else if (p == "?") path += any_of("ab.");
                else if (p == "**/" || p == "**") for (int n = static_cast<int>(rng() % 3); n > 0; --n) path += any_of("ab") + "/";
                else path += p;
            }
        }
        const bool want = std::regex_match(path, oracle(glob));
        CAPTURE(glob);
        CAPTURE(path);
        CHECK(glob_match(glob, path) == want);
        matched += want;
    }
    CHECK(matched > 1000);   // the draw reaches both answers
    CHECK(matched < 2500);
}

namespace {
std::string gzip_bytes(const std::string& text) {   // one gzip member, as gzip(1) writes it
    z_stream zs{};
    REQUIRE(deflateInit2(&zs, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) == Z_OK);
    std::string out(deflateBound(&zs, static_cast<uLong>(text.size())), '\0');
    zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
    zs.avail_in = static_cast<uInt>(text.size());
    zs.next_out = reinterpret_cast<Bytef*>(out.data());
    zs.avail_out = static_cast<uInt>(out.size());
    REQUIRE(deflate(&zs, Z_FINISH) == Z_STREAM_END);
    out.resize(zs.total_out);
    deflateEnd(&zs);
    return out;
}

// Every line of `path` through LineReader; the UserError message (or "") in `error`.
std::vector<std::string> read_lines(const fs::path& path, std::string& error) {
    std::vector<std::string> lines;
    error.clear();
    try {
        LineReader r(path.string());
        std::string line;
        while (r.next(line)) lines.push_back(line);
    } catch (const UserError& e) {
        error = e.what();
    }
    return lines;
}
}  // namespace

TEST_CASE("core: a .gz cut before its trailer - or not gzip at all - is refused, not read as a shorter corpus") {
    test::TempDir tmp("gz");
    std::string jsonl;
    for (int i = 0; i < 2000; ++i) jsonl += "{\"text\": \"line " + std::to_string(i * 7919 % 10007) + " of the corpus\"}\n";
    const std::string gz = gzip_bytes(jsonl);
    REQUIRE(gz.size() > 200);
    std::string err;
    test::write_text(tmp / "whole.jsonl.gz", gz);
    CHECK(read_lines(tmp / "whole.jsonl.gz", err).size() == 2000);
    CHECK(err.empty());
    // two members (gzip a >> b): one stream of both texts
    test::write_text(tmp / "two.jsonl.gz", gz + gzip_bytes("{\"text\": \"last\"}\n"));
    auto two = read_lines(tmp / "two.jsonl.gz", err);
    CHECK(err.empty());
    REQUIRE(two.size() == 2001);
    CHECK(two.back() == "{\"text\": \"last\"}");
    // cut anywhere: in the trailer (the text is all there, its CRC and length are not), mid-stream, in the header
    for (std::size_t keep : {gz.size() - 1, gz.size() - 8, gz.size() / 2, std::size_t{5}}) {
        CAPTURE(keep);
        test::write_text(tmp / "cut.jsonl.gz", gz.substr(0, keep));
        read_lines(tmp / "cut.jsonl.gz", err);
        CHECK(err == (tmp / "cut.jsonl.gz").string() + ": truncated gzip stream (fix: the file was cut short: copy or download it again)");
    }
    // not gzip: random bytes, plain text, an empty file
    std::mt19937 rng(7);
    std::string noise(4096, '\0');
    for (auto& ch : noise) ch = static_cast<char>(rng());
    noise[0] = 'x';
    for (const std::string& bytes : {noise, jsonl, std::string()}) {
        test::write_text(tmp / "r.jsonl.gz", bytes);
        read_lines(tmp / "r.jsonl.gz", err);
        CHECK(err == (tmp / "r.jsonl.gz").string() + ": not a gzip stream (fix: decompress it, or name it without .gz)");
    }
    test::write_text(tmp / "tail.jsonl.gz", gz + "trailing bytes");
    read_lines(tmp / "tail.jsonl.gz", err);
    CHECK(err == (tmp / "tail.jsonl.gz").string() + ": holds data after the end of its gzip stream");
    // through the corpus reader, --on-error skip does not turn a cut stream into a shorter corpus; read_whole_file neither
    test::write_text(tmp / "cut.jsonl.gz", gz.substr(0, gz.size() / 2));
    CorpusOptions skip;
    skip.on_error = OnError::SKIP;
    CorpusCounts counts;
    auto files = corpus_list_files({(tmp / "cut.jsonl.gz").string()}, skip);
    REQUIRE(files.size() == 1);
    CHECK_THROWS_WITH_AS(corpus_read_file(files[0], skip, counts, [](Document&) {}),
                         doctest::Contains("cut.jsonl.gz: truncated gzip stream"), UserError);
    test::write_text(tmp / "cut.txt.gz", gz.substr(0, gz.size() / 2));
    CHECK_THROWS_WITH_AS(read_whole_file((tmp / "cut.txt.gz").string()), doctest::Contains("truncated gzip stream"), UserError);
}

TEST_CASE("core: read_whole_file returns a file's bytes in a string of about their size (plain and gzip)") {
    // a folder corpus holds a block of these in memory, counted by size: spare capacity would be uncounted memory
    // (a 12 KB file once came back in a 2 MiB string)
    test::TempDir tmp("rwf");
    std::mt19937 g(3);
    for (const std::size_t size : {std::size_t(0), std::size_t(1), std::size_t(12000), std::size_t(65536),
                                   std::size_t(3u << 20)}) {
        std::string text(size, 'a');
        for (auto& c : text) c = static_cast<char>('a' + g() % 26);
        CAPTURE(size);
        test::write_text(tmp / "f.txt", text);
        const std::string plain = read_whole_file((tmp / "f.txt").string());
        CHECK(plain == text);
        CHECK(plain.capacity() <= size + size / 8 + 64);
        test::write_text(tmp / "f.txt.gz", gzip_bytes(text));
        const std::string unzipped = read_whole_file((tmp / "f.txt.gz").string());
        CHECK(unzipped == text);
        CHECK(unzipped.capacity() <= size + size / 8 + 64);
    }
}

TEST_CASE("core: corpus reading of folders and plain - gzip and zstd jsonl") {
    test::TempDir tmp("corpus");
    fs::create_directories(tmp / "f/sub");
    test::write_text(tmp / "f/b.txt", "second");
    test::write_text(tmp / "f/sub/a.txt", "third");
    test::write_text(tmp / "f/a.txt", "first \xff");
    test::write_text(tmp / "f/empty.txt", "  \n");
    test::write_text(tmp / "f/skip.md", "not matched");
    std::string jsonl = "{\"text\": \"one\"}\n\n{\"text\": \"two\", \"id\": 3}\n{\"body\": \"x\"}\n";
    test::write_text(tmp / "d.jsonl", jsonl);
    {
        gzFile g = gzopen((tmp / "d.jsonl.gz").c_str(), "wb");
        gzwrite(g, jsonl.data(), static_cast<unsigned>(jsonl.size()));
        gzclose(g);
        std::string z(ZSTD_compressBound(jsonl.size()), '\0');
        z.resize(ZSTD_compress(z.data(), z.size(), jsonl.data(), jsonl.size(), 3));
        test::write_text(tmp / "d.jsonl.zst", z);
    }
    CorpusOptions opts;
    CorpusCounts counts;
    std::vector<std::string> texts;
    auto files = corpus_list_files({(tmp / "f").string()}, opts);
    REQUIRE(files.size() == 4);
    for (auto& f : files) corpus_read_file(f, opts, counts, [&](Document& d) { texts.push_back(d.text); });
    CHECK(texts == std::vector<std::string>{"first \xEF\xBF\xBD", "second", "third"});
    CHECK(counts.empty_skipped == 1);
    CHECK(counts.invalid_utf8_replaced == 1);
    for (const char* name : {"d.jsonl", "d.jsonl.gz", "d.jsonl.zst"}) {
        CAPTURE(name);
        auto jf = corpus_list_files({(tmp / name).string()}, opts);
        REQUIRE(jf.size() == 1);
        CHECK(jf[0].jsonl);
        std::string msg;
        try {
            CorpusCounts c;
            corpus_read_file(jf[0], opts, c, [](Document&) {});
        } catch (const UserError& e) {
            msg = e.what();
        }
        CHECK(msg.find(std::string(name) + ":4: has no key 'text'") != std::string::npos);
        CorpusOptions skip = opts;
        skip.on_error = OnError::SKIP;
        CorpusCounts c;
        std::vector<std::int64_t> lines;
        corpus_read_file(jf[0], skip, c, [&](Document& d) { lines.push_back(d.line); });
        CHECK(lines == std::vector<std::int64_t>{1, 3});
        CHECK(c.malformed_skipped == 1);
        CHECK(c.empty_skipped == 1);
    }
    CHECK_THROWS_AS(corpus_list_files({(tmp / "missing").string()}, opts), UserError);
    // a "\u0000" escape: its NUL byte replaced and counted, as a stray NUL in a text file (it reached the tokenizer)
    test::write_text(tmp / "nul.jsonl", "{\"text\": \"a\\u0000b\\u0000\"}\n{\"text\": \"\\u0000\"}\n");
    CorpusCounts c;
    std::vector<std::string> nul_texts;
    corpus_read_file(corpus_list_files({(tmp / "nul.jsonl").string()}, opts)[0], opts, c,
                     [&](Document& d) { nul_texts.push_back(d.text); });
    CHECK(nul_texts == std::vector<std::string>{"a\xEF\xBF\xBD" "b\xEF\xBF\xBD", "\xEF\xBF\xBD"});
    CHECK(c.invalid_utf8_replaced == 3);
}

TEST_CASE("corpus: a RetroKit output inside a corpus folder is skipped, whatever the glob") {
    test::TempDir tmp("corpus-tool-folders");
    const auto put = [](const fs::path& file, const std::string& text) {
        fs::create_directories(file.parent_path());
        test::write_text(file, text);
    };
    put(tmp / "c/a.txt", "text");
    put(tmp / "c/notes/b.txt", "more text");
    // a tokenizer's finished folder and an index's unfinished one (state.json) are skipped
    put(tmp / "c/tok/manifest.json", R"({"tool": "retro-tokenizer"})");
    put(tmp / "c/tok/tok.vocab.txt", "piece");
    put(tmp / "c/idx/state.json", R"({"tool": "retro-index"})");
    put(tmp / "c/idx/part.txt", "x");
    // the user's own folders are read, whatever they hold: another program's manifest, a progress.json, a config.json
    put(tmp / "c/other/manifest.json", R"({"tool": "my-tool"})");
    put(tmp / "c/other/o.txt", "x");
    put(tmp / "c/notes2/progress.json", "{}");
    put(tmp / "c/notes2/n.txt", "x");
    put(tmp / "c/exp/config.json", "{}");
    put(tmp / "c/exp/metrics.jsonl", "{}");
    CorpusOptions opts;
    opts.glob = "**/*";
    std::vector<std::string> names;
    for (const auto& f : corpus_list_files({(tmp / "c").string()}, opts))
        names.push_back(fs::relative(f.path, tmp / "c").generic_string());
    CHECK(names == std::vector<std::string>{"a.txt",           "exp/config.json",      "exp/metrics.jsonl",
                                            "notes/b.txt",     "notes2/n.txt",         "notes2/progress.json",
                                            "other/manifest.json", "other/o.txt"});
    // the folder given itself is read, whoever made it
    CHECK(corpus_list_files({(tmp / "c" / "tok").string()}, opts).size() == 2);
}

extern "C" void custom_handler(int) {}

TEST_CASE("core: a manifest written ends the interrupt note (a Ctrl-C after it has nothing to resume)") {
    test::TempDir tmp("interrupt-clear");
    // in a child: the handlers are the process's, and doctest has its own
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        ToolContext ctx;
        ctx.tool = "retro-test";
        // a process that never installed RetroKit's handlers keeps its own
        ::signal(SIGINT, custom_handler);
        Manifest(ctx).write(tmp.path.string());
        struct sigaction own {};
        ::sigaction(SIGINT, nullptr, &own);
        if (own.sa_handler != custom_handler) ::_exit(3);
        ::signal(SIGTERM, SIG_IGN);   // inherited as ignored (a background job): stays so
        interrupt_note_install("retro-test", tmp.path.string(), "continue with the same command and --resume");
        struct sigaction before {};
        ::sigaction(SIGINT, nullptr, &before);
        Manifest(ctx).write(tmp.path.string());
        struct sigaction after_int {}, after_term {};
        ::sigaction(SIGINT, nullptr, &after_int);
        ::sigaction(SIGTERM, nullptr, &after_term);
        const bool ok = before.sa_handler != custom_handler && after_int.sa_handler == SIG_DFL && after_term.sa_handler == SIG_IGN;
        ::_exit(ok ? 0 : 1);
    }
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("core: a folder another process is writing (its lock held) is named as such by manifest_read") {
    // retro-index on a database retro-chunk was still starting to write said "not made by a RetroKit tool" (a
    // helper's pass, session 52)
    test::TempDir tmp("writing");
    const fs::path out = tmp / "db";
    fs::create_directories(out);
    int go[2], ready[2];
    REQUIRE(::pipe(go) == 0);
    REQUIRE(::pipe(ready) == 0);
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        output_folder_lock(out.string(), "retro-chunk");
        char c = 1;
        (void)!::write(ready[1], &c, 1);
        (void)!::read(go[0], &c, 1);   // holds the lock until told
        ::_exit(0);
    }
    char c = 0;
    REQUIRE(::read(ready[0], &c, 1) == 1);
    CHECK(output_folder_writer(out.string()).rfind("retro-chunk, pid " + std::to_string(pid), 0) == 0);
    CHECK_THROWS_WITH_AS(manifest_read(out.string()), doctest::Contains("missing: a run is writing the folder now (retro-chunk, pid"),
                         UserError);
    (void)!::write(go[1], &c, 1);
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    // the lock freed with the process: an ordinary missing manifest again
    CHECK(output_folder_writer(out.string()).empty());
    CHECK_THROWS_WITH_AS(manifest_read(out.string()), doctest::Contains("incomplete or was not made by a RetroKit tool"), UserError);
    for (int fd : {go[0], go[1], ready[0], ready[1]}) ::close(fd);
}

// The filesystem is the reference: a name whose copy (name + suffix) the folder can hold must pass the check, and
// one a byte longer, whose copy the folder refuses (ENAMETOOLONG), must be refused before any work is done.
TEST_CASE("core: an output name whose copy just fits the folder's name limit is taken - one byte more is refused") {
    test::TempDir t("name-room");
    const std::string suffix = ".partial.tmp";
    std::size_t fits = 0;   // the longest name + suffix this folder holds, found by creating files
    for (std::size_t len = 200; len < 1100; ++len) {
        const std::string name(len, 'n');
        const fs::path f = t.path / name;
        const int fd = ::open(f.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
        if (fd < 0) {
            REQUIRE(errno == ENAMETOOLONG);
            break;
        }
        ::close(fd);
        fs::remove(f);
        fits = len;
    }
    REQUIRE(fits > suffix.size());
    const std::string at_limit(fits - suffix.size(), 'a');
    CHECK_NOTHROW(output_name_room_check((t.path / at_limit).string(), suffix));
    CHECK_THROWS_AS(output_name_room_check((t.path / (at_limit + "a")).string(), suffix), UserError);
}

TEST_CASE("core: an AtomicFile over a longer .tmp a killed writer left holds only its own bytes") {
    // a SIGKILLed writer leaves NAME.tmp (docs/formats.md); the next writer of NAME must not keep its tail (a mutant
    // opening the temporary without O_TRUNC committed the new bytes followed by the old ones)
    test::TempDir tmp("atomic-stale-tmp");
    const std::string path = (tmp / "state.json").string();
    test::write_text(path + ".tmp", std::string(1000, 'x'));
    write_file_atomic(path, "{}\n");
    CHECK(test::read_text(path) == "{}\n");
    CHECK(!fs::exists(path + ".tmp"));
    const std::string npy = (tmp / "a.npy").string();
    test::write_text(npy + ".tmp", std::string(4096, '\x7f'));
    const std::int32_t v[3] = {1, 2, 3};
    npy_save(npy, {3}, v);
    NpyArray a(npy);
    CHECK(a.shape() == std::vector<std::int64_t>{3});
    CHECK(fs::file_size(npy) == 128 + 12);   // numpy's 128-byte header and the data, nothing after
}

TEST_CASE("core: a folder fingerprint is xxh3-64 of its outputs' path=fingerprint entries in order (docs/formats.md)") {
    // the definition the manifests of earlier versions were written with: a later stage compares a recorded one
    const nlohmann::json m = {{"outputs",
                               {{{"path", "chunks.npy"}, {"fingerprint", "0123456789abcdef"}},
                                {{"path", "doc_ids.npy"}, {"fingerprint", "fedcba9876543210"}}}}};
    const std::string text = "chunks.npy=0123456789abcdef;doc_ids.npy=fedcba9876543210;";
    CHECK(folder_fingerprint(m) == fingerprint_bytes(text.data(), text.size()));
    nlohmann::json renamed = m;
    renamed["outputs"][1]["path"] = "seq_starts.npy";   // the same bytes under another name: another folder
    CHECK(folder_fingerprint(renamed) != folder_fingerprint(m));
}

TEST_CASE("core: progress counts and durations change unit at 10k, 1M, 1G and at a minute and an hour") {
    CHECK(format_count(0) == "0");
    CHECK(format_count(9999) == "9999");
    CHECK(format_count(10000) == "10.0k");
    CHECK(format_count(1e6) == "1.00M");
    CHECK(format_count(2.5e9) == "2.50G");
    CHECK(format_seconds(0) == "0s");
    CHECK(format_seconds(59.4) == "59s");
    CHECK(format_seconds(60) == "1m00s");
    CHECK(format_seconds(185) == "3m05s");
    CHECK(format_seconds(3599) == "59m59s");
    CHECK(format_seconds(3600) == "1h00m");
    CHECK(format_seconds(3725) == "1h02m");
    CHECK(format_seconds(90061) == "25h01m");   // past a day: hours go on, minutes stay below 60
}

TEST_CASE("core: a manifest input whose fingerprint is not a string is named when the manifest is read") {
    test::TempDir tmp("manifest-input-type");
    test::write_text(tmp / "manifest.json",
                     R"({"tool": "retro-index", "inputs": [{"role": "db", "path": "/x", "fingerprint": 7}], "outputs": []})");
    CHECK_THROWS_WITH_AS(manifest_read(tmp.path.string()),
                         doctest::Contains("malformed manifest: inputs[0].fingerprint is not a string"), UserError);
}

TEST_CASE("core: shell_quote's words are read back by /bin/sh as themselves, the empty word too") {
    // (a mutant that left "" unquoted survived: a manifest's command line lost an empty argument, e.g. --text-key '')
    const std::vector<std::string> words = {"", "plain-word_1.2", "a b", "it's", "$HOME", "*", "-", "x\"y", "a\nb"};
    std::string command = "printf '[%s]'", want;
    for (const auto& w : words) {
        command += " " + shell_quote(w);
        want += "[" + w + "]";
    }
    const test::RunResult r = test::run_command(command);
    REQUIRE(r.exit_code == 0);
    CHECK(r.out == want);
    CHECK(shell_quote("plain-word_1.2") == "plain-word_1.2");   // a word without special characters stays as it is
}

TEST_CASE("core: a progress with nothing done prints no final line, one with work done does") {
    // (a mutant drawing the final line at 0 done survived: "0 rows, 0 rows/s" where a resumed run had nothing left)
    const LogLevel before = log_level();
    log_set_level(LogLevel::LOG_INFO);
    const std::string idle = capture_stderr([] {
        Progress p("scan", 10, "rows");
        p.finish();
    });
    const std::string busy = capture_stderr([] {
        Progress p("scan", 10, "rows");
        p.add(3);
        p.finish();
    });
    log_set_level(before);
    CHECK(idle.empty());
    CHECK(busy.find("scan  30% 3/10 rows") != std::string::npos);   // (not a terminal: one line, no bar)
}

TEST_CASE("core: --force's refusal names up to three of the files a tool did not write, sorted, then ...") {
    // (a mutant adding ", ..." after exactly three names survived: the message said there were more)
    test::TempDir tmp("foreign-files");
    const fs::path out = tmp / "out";
    fs::create_directories(out);
    for (const char* name : {"c.txt", "a.txt", "b.txt", "embeddings.npy"}) test::write_text(out / name, "x");
    CHECK_THROWS_WITH_AS(output_folder_clear(out.string(), "retro-index", true),
                         doctest::Contains("holds files retro-index did not write (a.txt, b.txt, c.txt)"), UserError);
    test::write_text(out / "d.txt", "x");
    CHECK_THROWS_WITH_AS(output_folder_clear(out.string(), "retro-index", true),
                         doctest::Contains("holds files retro-index did not write (a.txt, b.txt, c.txt, ...)"), UserError);
}

TEST_CASE("corpus: a NUL byte in a text file's first 8000 bytes makes it binary, one at offset 8000 is replaced") {
    // docs/chunk.md: "a whole file with a NUL byte in its first 8000" (a mutant testing offset <= 8000 survived)
    test::TempDir tmp("corpus-nul-probe");
    CorpusOptions opts;
    test::write_text(tmp / "early.txt", std::string(7999, 'a') + std::string(1, '\0') + "b");
    test::write_text(tmp / "late.txt", std::string(8000, 'a') + std::string(1, '\0') + "b");
    CorpusCounts c;
    std::vector<std::string> texts;
    const auto read = [&](const char* name) {
        corpus_read_file(corpus_list_files({(tmp / name).string()}, opts)[0], opts, c, [&](Document& d) { texts.push_back(d.text); });
    };
    CHECK_THROWS_WITH_AS(read("early.txt"), doctest::Contains("holds a NUL byte at offset 7999"), UserError);
    read("late.txt");
    REQUIRE(texts.size() == 1);
    CHECK(texts[0] == std::string(8000, 'a') + "\xEF\xBF\xBD" + "b");
    CHECK(c.invalid_utf8_replaced == 1);
}

TEST_CASE("core: a byte size takes K, M, G and T as powers of 1024, bare or with B or iB, in either case") {
    // RETRO_MEMORY_LIMIT and RETRO_DISK_FREE (docs/tools.md: 8G, 512M, bytes); byte_size_parse takes K, KB and KiB (a
    // mutant refusing the iB spellings survived)
    const auto bytes = [](const char* v) { return byte_size_parse("RETRO_DISK_FREE", v, "disk size"); };
    CHECK(bytes("512") == 512);
    CHECK(bytes("512B") == 512);
    for (const char* one_k : {"1K", "1KB", "1KiB", "1k", "1kib"}) {
        CAPTURE(one_k);
        CHECK(bytes(one_k) == 1024);
    }
    CHECK(bytes("2MiB") == 2 * 1048576);
    CHECK(bytes("1.5G") == 1610612736);
    CHECK(bytes("3GiB") == std::int64_t{3} << 30);
    CHECK(bytes("1TiB") == std::int64_t{1} << 40);
    for (const char* bad : {"1KiBB", "1Ki", "1KIBs"}) {
        CAPTURE(bad);
        CHECK_THROWS_WITH_AS(bytes(bad), doctest::Contains("is not a disk size"), UserError);
    }
}
