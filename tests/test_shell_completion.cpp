// `TOOL --completion bash` (cli/shell_completion.h) run in bash against an oracle: every (sub)command's options
// as its own --help lists them, its subcommands likewise; choices, numbers and file names as values; and
// `make install`'s tree (cmake --install): tools that find their library beside them, completions, manual pages,
// configs; the manual pages (`TOOL --man`, cli/man_page.h) against the same --help oracle and groff's warnings; and
// the shipped configs by name (`--config demo`, model/config_files.h).
#include <algorithm>
#include <set>
#include <sstream>

#include "model/config_files.h"
#include "test_help_oracle.h"
#include "test_util.h"

using namespace retro;
using test::Help;
using test::help_of;
namespace fs = std::filesystem;

namespace {

// What the completion offers for `tool words...` (the last word is the one being completed) in `cwd`.
std::vector<std::string> complete(const std::string& tool, const std::vector<std::string>& words,
                                  const fs::path& cwd = fs::temp_directory_path()) {
    test::TempDir tmp("completion");
    std::string array = "'" + tool + "'";
    for (const std::string& w : words) array += " '" + w + "'";
    std::string fn = "_" + tool;
    for (char& c : fn)
        if (c == '-') c = '_';
    test::write_text(tmp / "run.sh", "source <('" + test::tool_path(tool) + "' --completion bash) || exit 3\n" +
                                         "cd '" + cwd.string() + "' || exit 4\n" + "COMP_WORDS=(" + array + ")\n" +
                                         "COMP_CWORD=$((${#COMP_WORDS[@]} - 1))\n" + fn + " || exit 5\n" +
                                         "printf '%s\\n' \"${COMPREPLY[@]}\"\n");
    const test::RunResult r = test::run_command("bash " + (tmp / "run.sh").string());
    REQUIRE_MESSAGE(r.exit_code == 0, tool << ": " << r.err);
    std::vector<std::string> got;
    std::istringstream lines(r.out);
    for (std::string line; std::getline(lines, line);)
        if (!line.empty()) got.push_back(line);
    return got;
}

// The library finds a shipped file in the source tree it was built from (core/shipped_data.h). In a copy of the build
// tree (a mutation clone, the GPU devkit) that is not test::source_dir(), so a found file is the shipped `expected`
// when it has its folder's and its own name and the checkout's bytes.
bool is_shipped_file(const fs::path& found, const fs::path& expected) {
    std::error_code ec;
    return fs::is_regular_file(found, ec) && found.filename() == expected.filename() &&
           found.parent_path().filename() == expected.parent_path().filename() &&
           test::read_text(found) == test::read_text(expected);
}

std::set<std::string> long_options(const std::vector<std::string>& words) {
    std::set<std::string> s;
    for (const std::string& w : words)
        if (w.rfind("--", 0) == 0) s.insert(w);
    return s;
}

}  // namespace

TEST_CASE("shell completion: every command's options and subcommands are its --help's") {
    for (const char* tool : test::kToolNames) {
        CAPTURE(tool);
        const Help top = help_of(tool, "");
        CHECK(long_options(complete(tool, {"--"})) == top.options);
        const std::vector<std::string> first = complete(tool, {""});
        for (const std::string& sub : top.subcommands) {
            CAPTURE(sub);
            CHECK(std::find(first.begin(), first.end(), sub) != first.end());
            // a subcommand also takes the tool's --quiet, --verbose and --threads (tool_main's fallthrough)
            Help expected = help_of(tool, sub);
            for (const char* down : {"--quiet", "--verbose", "--threads"})
                if (top.options.count(down)) expected.options.insert(down);
            CHECK(long_options(complete(tool, {sub, "--"})) == expected.options);
            CHECK(long_options(complete(tool, {"--quiet", sub, "--"})) == expected.options);
        }
    }
}

TEST_CASE("shell completion: values are an option's choices - nothing for a number - file names for a text") {
    test::TempDir dir("completion-files");
    fs::create_directories(dir / "db folder");
    test::write_text(dir / "dbnotes.txt", "x");
    CHECK(complete("retro-knn", {"--device", ""}) == std::vector<std::string>{"cpu", "cuda"});
    CHECK(complete("retro-knn", {"--device", "=", "cu"}) == std::vector<std::string>{"cuda"});
    CHECK(complete("retro-train", {"--reduce", "d"}) == std::vector<std::string>{"deterministic"});
    CHECK(complete("retro-chunk", {"--chunk-size", ""}).empty());
    CHECK(complete("retro-knn", {"--shard", ""}).empty());   // its own form, I/N: no file names
    const std::vector<std::string> out = complete("retro-chunk", {"--out", "d"}, dir.path);
    CHECK(std::set<std::string>(out.begin(), out.end()) == std::set<std::string>{"db folder", "dbnotes.txt"});
    CHECK(complete("retro-chunk", {"--out=db"}, dir.path).size() == 2);   // COMP_WORDBREAKS without '='
    CHECK(complete("retro-chunk", {"--out=db"}, dir.path).front().rfind("--out=db", 0) == 0);
    // a positional takes file names, beside the subcommands whose names start so
    const std::vector<std::string> words = complete("retro-chunk", {""}, dir.path);
    CHECK(std::find(words.begin(), words.end(), "merge") != words.end());
    CHECK(std::find(words.begin(), words.end(), "db folder") != words.end());
    // an option's value is not a subcommand: `retro-train --config eval` is still retro-train's own options
    CHECK(long_options(complete("retro-train", {"--config", "eval", "--"})) == help_of("retro-train", "").options);
    CHECK(complete("retro-train", {"eval", "--sp"}) == std::vector<std::string>{"--split"});
    // a flag takes no value: the word after it is completed as a word, not as the flag's value
    CHECK(complete("retro-chunk", {"--force", "mer"}) == std::vector<std::string>{"merge"});
}

TEST_CASE("shell completion: a comma list's items after the last comma - shipped config names - nothing for free text") {
    CHECK(complete("retro-train", {"eval", "--split", ""}) == std::vector<std::string>{"val", "train", "all"});
    CHECK(complete("retro-bench", {"ops", "--device", "c"}) == std::vector<std::string>{"cpu", "cuda"});
    CHECK(complete("retro-bench", {"retention", "--modes", "p"}) == std::vector<std::string>{"parallel"});
    CHECK(complete("retro-bench", {"retention", "--modes", "parallel,re"}) == std::vector<std::string>{"parallel,recurrent"});
    CHECK(complete("retro-bench", {"retention", "--modes=naive,c"}) == std::vector<std::string>{"--modes=naive,chunkwise"});
    // the items already in the list are not offered again
    CHECK(complete("retro-train", {"--train-only", "cca,"}) == std::vector<std::string>{"cca,encoder", "cca,copy", "cca,decoder"});
    CHECK(complete("retro-bench", {"retention", "--modes", "naive,parallel,"}) ==
          std::vector<std::string>{"naive,parallel,recurrent", "naive,parallel,chunkwise"});
    CHECK(complete("retro-bench", {"knn", "--kernels", "s"}) == std::vector<std::string>{"sgemm"});
    // --config: the shipped configs by name (examples/configs/*.json), and file names
    test::TempDir dir("completion-config");
    test::write_text(dir / "tinier.json", "{}");
    for (const auto& [tool, words] : std::vector<std::pair<std::string, std::vector<std::string>>>{
             {"retro-train", {"--config", "ti"}}, {"retro-chunk", {"--config", "ti"}}, {"retro-bench", {"train", "--config", "ti"}}}) {
        CAPTURE(tool);
        const std::vector<std::string> got = complete(tool, words, dir.path);
        CHECK(std::set<std::string>(got.begin(), got.end()) == std::set<std::string>{"tiny", "tinier.json"});
    }
    // --peer: the command's shipped peers by name, and file names
    test::write_text(dir / "faster.py", "");
    const std::vector<std::string> peers = complete("retro-bench", {"knn", "--peer", "fa"}, dir.path);
    CHECK(std::set<std::string>(peers.begin(), peers.end()) == std::set<std::string>{"faiss_knn", "faster.py"});
    CHECK(complete("retro-bench", {"generate", "--peer", "rp_"}, dir.path) == std::vector<std::string>{"rp_generate"});
    // free text (a JSON key, a glob pattern, a prompt, a command line, op names) offers no file names
    for (const auto& [tool, words] : std::vector<std::pair<std::string, std::vector<std::string>>>{
             {"retro-chunk", {"--text-key", ""}}, {"retro-chunk", {"--glob", ""}}, {"retro-index", {"--prompt", ""}},
             {"retro-index", {"--index", ""}}, {"retro-index", {"query", "--prompt", ""}},
             {"retro-tokenizer", {"train", "--text-key", ""}}, {"retro-bench", {"train", "--launcher", ""}},
             {"retro-bench", {"ops", "--ops", ""}}}) {
        CAPTURE(tool);
        CAPTURE(words.front());
        CHECK(complete(tool, words, dir.path).empty());
    }
}

TEST_CASE("comma lists are refused at parse time naming the unknown item - before any work") {
    struct Case {
        const char* tool;
        const char* args;
        const char* message;
    };
    for (const Case& c : {Case{"retro-bench", "retention --modes parallel,foo", "--modes: unknown item 'foo' (expected naive, parallel, recurrent, chunkwise)"},
                          Case{"retro-bench", "knn --kernels sgemm,avx2", "--kernels: unknown item 'avx2' (expected avx512, sgemm)"},
                          Case{"retro-bench", "train --dtype bf16,fp8", "--dtype: unknown item 'fp8' (expected fp32, bf16, bf16-unfused)"},
                          Case{"retro-train", "--train-only cca,,encoder", "--train-only: 'cca,,encoder' has an empty item (fix: separate the values by single commas, e.g. a,b)"},
                          Case{"retro-train", "--train-only cca,heads", "--train-only: unknown item 'heads' (expected cca, encoder, copy, decoder)"},
                          Case{"retro-train", "--train-only cca --train-only cca", "--train-only: lists cca twice"},
                          Case{"retro-bench", "retention --modes 'naive, parallel'",
                               "--modes: unknown item ' parallel' (expected naive, parallel, recurrent, chunkwise; no spaces around the commas)"}}) {
        CAPTURE(c.args);
        const test::RunResult r = test::run_tool(c.tool, c.args);
        CHECK(r.exit_code == 2);
        CHECK(r.out.empty());
        CHECK_MESSAGE(r.err.rfind(std::string(c.tool) + ": error: " + c.message, 0) == 0, r.err);   // one line, nothing before it
        CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    }
}

TEST_CASE("shell completion: --completion takes bash and nothing else") {
    CHECK(test::run_tool("retro-index", "--completion bash").exit_code == 0);
    CHECK(test::run_tool("retro-index", "--completion=bash").exit_code == 0);
    for (const char* wrong : {"--completion zsh", "--completion", "--completion bash extra", "--completion=fish"}) {
        CAPTURE(wrong);
        const test::RunResult r = test::run_tool("retro-index", wrong);
        CHECK(r.exit_code == 2);
        CHECK(r.out.empty());
        CHECK(r.err.find("retro-index: error: --completion: takes one word, the shell: bash (the one shell it writes for) "
                         "(fix: source <(retro-index --completion bash) in bash)") == 0);
    }
}

TEST_CASE("manual pages: every command's options are in its tool's man page - roff groff reads without a warning") {
    const bool groff = test::run_command("groff --version").exit_code == 0;
    for (const char* tool : test::kToolNames) {
        CAPTURE(tool);
        const test::RunResult man = test::run_tool(tool, "--man");
        REQUIRE_MESSAGE(man.exit_code == 0, man.err);
        CHECK(man.out.find(".TH \"" + [&] {
            std::string up = tool;
            for (char& c : up) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
            return up;
        }() + "\" 1 ") != std::string::npos);
        // NAME is one line whatis(1) reads: the first sentence, no trailing period, no usage example after it
        const std::size_t name_at = man.out.find(".SH NAME\n" + std::string(tool) + " \\- ");
        REQUIRE(name_at != std::string::npos);
        const std::size_t name_end = man.out.find('\n', name_at + 9);
        CHECK(man.out.compare(name_end + 1, 3, ".SH") == 0);
        CHECK(man.out[name_end - 1] != '.');
        // each option as --help lists it, in bold with roff's minus signs (copied from a terminal, it still works)
        const auto in_text = [](const std::string& text, const std::string& option) {
            std::string roff;
            for (char c : option) roff += c == '-' ? std::string("\\-") : std::string(1, c);
            return text.find("\\fB" + roff + "\\fR") != std::string::npos;
        };
        const std::size_t commands = man.out.find(".SH COMMANDS");
        const std::string tool_part = man.out.substr(0, commands);
        const Help top = help_of(tool, "");
        for (const std::string& option : top.options)
            if (option != "--help" && option != "--version") CHECK_MESSAGE(in_text(tool_part, option), option);
        for (const std::string& sub : top.subcommands) {
            CAPTURE(sub);
            std::string heading = ".SS \"" + std::string(tool) + " " + sub + "\"";
            for (std::size_t dash = heading.find('-'); dash != std::string::npos; dash = heading.find('-', dash + 2))
                heading.replace(dash, 1, "\\-");
            const std::size_t at = man.out.find(heading);
            REQUIRE(at != std::string::npos);
            const std::string part = man.out.substr(at, std::min(man.out.find(".SS", at + 1), man.out.find(".SH", at)) - at);
            for (const std::string& option : help_of(tool, sub).options)
                if (option != "--help") CHECK_MESSAGE(in_text(part, option), option);
        }
        CHECK(man.out.find(".SH EXIT STATUS") != std::string::npos);
        if (!groff) continue;
        test::TempDir dir("man");
        test::write_text(dir / "page.1", man.out);
        const test::RunResult rendered = test::run_command("groff -man -Tutf8 -ww -z '" + (dir / "page.1").string() + "'");
        CHECK(rendered.exit_code == 0);
        CHECK_MESSAGE(rendered.err.empty(), rendered.err);
    }
    if (!groff) {
        MESSAGE("skipped: the groff check (no groff on PATH)");
        test::g_skipped = true;
    }
    // an option's exclusions, as --help's "Excludes:"
    CHECK(test::run_tool("retro-train", "--man").out.find("(not with \\-\\-no\\-fused\\-attention)") != std::string::npos);
    const test::RunResult extra = test::run_tool("retro-knn", "--man extra");
    CHECK(extra.exit_code == 2);
    CHECK(extra.err.rfind("retro-knn: error: --man: takes no value", 0) == 0);
    for (const char* elsewhere : {"--quiet --man", "--man=1", "--verbose --man"}) {   // not "not an option"
        CAPTURE(elsewhere);
        const test::RunResult r = test::run_tool("retro-knn", elsewhere);
        CHECK(r.exit_code == 2);
        CHECK(r.err == "retro-knn: error: --man: comes alone after the tool's name (fix: retro-knn --man (man -l <(retro-knn --man)))\n");
    }
}

TEST_CASE("install: cmake --install puts tools that find their own library - completions and configs under a prefix") {
    // the build folder of the tools under test (RETRO_TEST_BIN_DIR's parent where set: a clone reusing this build's
    // objects installed this build's tools, and rewrote its install_manifest.txt)
    const fs::path build = fs::path(test::tool_path("retro-train")).parent_path().parent_path();
    if (!fs::exists(build / "cmake_install.cmake")) {
        MESSAGE("skipped: " << build.string() << " is no CMake build folder (a staged devkit)");
        test::g_skipped = true;
        return;
    }
    if (test::run_command("cmake --version").exit_code != 0) {
        MESSAGE("skipped: no cmake on PATH");
        test::g_skipped = true;
        return;
    }
    test::TempDir prefix("install");
    const test::RunResult r = test::run_command("cmake --install '" + build.string() + "' --prefix '" + prefix.path.string() + "'");
    REQUIRE_MESSAGE(r.exit_code == 0, r.out << r.err);
    for (const char* tool : test::kToolNames) {
        CAPTURE(tool);
        const fs::path bin = prefix / "bin" / tool;
        REQUIRE(fs::exists(bin));
        // the library it loads is the installed one, not the build folder's (RUNPATH $ORIGIN/../lib)
        const test::RunResult ldd = test::run_command("ldd '" + bin.string() + "'");
        std::string lib;
        std::istringstream lines(ldd.out);
        for (std::string line; std::getline(lines, line);)
            if (line.find("libretrokit.so") != std::string::npos) lib = line;
        CHECK(lib.find((prefix.path / "bin/..").string()) != std::string::npos);
        CHECK(lib.find(build.string() + "/") == std::string::npos);
        const test::RunResult version = test::run_command("'" + bin.string() + "' --version");
        CHECK(version.exit_code == 0);
        CHECK(version.out.rfind(std::string(tool) + " (RetroKit) ", 0) == 0);
        const fs::path completion = prefix / "share/bash-completion/completions" / tool;
        REQUIRE(fs::exists(completion));
        CHECK(test::run_command("bash -n '" + completion.string() + "'").exit_code == 0);
        CHECK(test::read_text(completion) == test::run_tool(tool, "--completion bash").out);
        const fs::path man = prefix / "share/man/man1" / (std::string(tool) + ".1");
        REQUIRE(fs::exists(man));
        CHECK(test::read_text(man) == test::run_tool(tool, "--man").out);
    }
    // `man TOOL` finds it under the prefix (man-db reads MANPATH's folders)
    if (test::run_command("man --version").exit_code == 0) {
        const test::RunResult man = test::run_command("MANPATH='" + (prefix / "share/man").string() +
                                                      "' MANWIDTH=120 man retro-knn 2>&1");
        CHECK(man.exit_code == 0);
        CHECK_MESSAGE(man.out.find("retro-knn - ") != std::string::npos, man.out.substr(0, 300) << man.err);
    }
    // the peer scripts by name, and the tiny BERT `retro-bench ops` times, from the installed tree (core/shipped_data.h)
    CHECK(fs::exists(prefix / "share/retrokit/peers/rp_generate.py"));
    CHECK(fs::exists(prefix / "share/retrokit/bert_tiny/model.safetensors"));
    const std::string installed_bench = (prefix / "bin/retro-bench").string();
    test::TempDir elsewhere("install-cwd");   // (no tests/peers/ in the working directory)
    for (const char* peer_args : {" --peer-script rp_train", ""}) {
        CAPTURE(peer_args);
        const test::RunResult peer = test::run_command("cd '" + elsewhere.path.string() + "' && '" + installed_bench +
                                                       "' train --peer" + peer_args +
                                                       " --python /bin/false --steps 1 --warmup 0 --batch 1");
        CHECK_MESSAGE(peer.exit_code == 0, peer.err);
        CHECK(peer.err.find("peer: /bin/false " + (fs::canonical(prefix.path) / "share/retrokit/peers/rp_train.py").string()) !=
              std::string::npos);
    }
    const test::RunResult bert = test::run_command("'" + installed_bench + "' ops --ops embed.bert_encoder --repeats 1");
    CHECK_MESSAGE(bert.exit_code == 0, bert.err);
    CHECK(fs::exists(prefix / "share/retrokit/configs/demo.json"));
    CHECK(fs::exists(prefix / "share/retrokit/configs/retro-172m.json"));
    // under DESTDIR the generated files are written there and listed in install_manifest.txt as CMake lists what it
    // copies: by their installed path, DESTDIR left out
    test::TempDir dest("install-dest");
    const test::RunResult staged = test::run_command("DESTDIR='" + dest.path.string() + "' cmake --install '" +
                                                     build.string() + "' --prefix /opt/retrokit-test");
    REQUIRE_MESSAGE(staged.exit_code == 0, staged.out << staged.err);
    CHECK(fs::exists(dest / "opt/retrokit-test/share/man/man1/retro-knn.1"));
    const std::string listed = test::read_text(build / "install_manifest.txt");
    CHECK(listed.find("/opt/retrokit-test/share/man/man1/retro-knn.1\n") != std::string::npos);
    CHECK(listed.find("/opt/retrokit-test/share/bash-completion/completions/retro-knn\n") != std::string::npos);
    CHECK(listed.find(dest.path.string()) == std::string::npos);
    // the installed tools find the installed configs by name, and name that folder when a name is not there
    const std::string bench = (prefix / "bin/retro-bench").string();
    const test::RunResult tiny = test::run_command("'" + bench + "' generate --config tiny --prompt 8 --output 2 --peer-steps 0 --json -");
    CHECK_MESSAGE(tiny.exit_code == 0, tiny.err);
    CHECK(tiny.out.find("\"dec_dim\": 16") != std::string::npos);
    const test::RunResult missing = test::run_command("'" + bench + "' generate --config nosuch");
    CHECK(missing.exit_code == 2);
    CHECK(missing.err.find("a shipped config by name: demo, ") != std::string::npos);
    CHECK(missing.err.find("tiny (" + (fs::canonical(prefix.path) / "share/retrokit/configs").string() + "))") != std::string::npos);
}

TEST_CASE("shipped peers: --peer NAME is the command's shipped peer - a file is taken as given - anything else is refused naming them") {
    test::TempDir dir("peers");
    const std::string in = "cd '" + dir.path.string() + "' && '";
    // a name runs the source tree's peer (the log names it), a folder of that name hides nothing
    fs::create_directories(dir / "rp_train");
    const test::RunResult by_name = test::run_command(in + test::tool_path("retro-bench") +
                                                      "' train --peer --peer-script rp_train --python /bin/false --steps 1 --warmup 0 --batch 1");
    CHECK_MESSAGE(by_name.exit_code == 0, by_name.err);
    const std::size_t peer_at = by_name.err.find("peer: /bin/false ");
    REQUIRE(peer_at != std::string::npos);
    const std::size_t path_at = peer_at + std::string("peer: /bin/false ").size();
    const fs::path peer = by_name.err.substr(path_at, by_name.err.find(" --config ", path_at) - path_at);
    CHECK_MESSAGE(is_shipped_file(peer, test::source_dir() / "tests/peers/rp_train.py"), peer);
    // a file of the name is taken as given
    test::write_text(dir / "faiss_knn", "print('mine')\n");
    const test::RunResult file = test::run_command(in + test::tool_path("retro-bench") + "' knn --peer faiss_knn --help");
    CHECK(file.exit_code == 0);
    // another command's peer, a helper of the peers, a typo: refused naming this command's peers
    for (const auto& [args, names] : std::vector<std::pair<std::string, std::string>>{
             {"knn --peer rp_generate", "(faiss_knn)"},
             {"generate --peer fla_configs.json", "(rp_generate)"},
             {"generate --peer rp_generat", "(rp_generate)"},
             {"embed --peer peer_timing", "(hf_embed, st_embed, clip_embed)"}}) {
        CAPTURE(args);
        const test::RunResult r = test::run_command(in + test::tool_path("retro-bench") + "' " + args);
        CHECK(r.exit_code == 2);
        CHECK(r.out.empty());
        CHECK(r.err.find("is not a file, nor a shipped peer of this command " + names) != std::string::npos);
    }
}

TEST_CASE("shipped configs: a name finds examples/configs/NAME.json - a path that exists is taken as given") {
    const fs::path configs = test::source_dir() / "examples/configs";
    CHECK(is_shipped_file(resolve_model_config("demo"), configs / "demo.json"));
    CHECK(is_shipped_file(resolve_model_config("retro-172m.json"), configs / "retro-172m.json"));
    CHECK_FALSE(is_shipped_file(resolve_model_config("demo"), configs / "tiny.json"));
    CHECK(resolve_model_config("nosuch") == "nosuch");
    CHECK(resolve_model_config("sub/demo") == "sub/demo");   // a path is never looked up
    CHECK(resolve_model_config("..") == "..");
    CHECK(resolve_model_config("") == "");
    test::TempDir dir("configs");
    test::write_text(dir / "demo", "{}");
    CHECK(resolve_model_config((dir / "demo").string()) == (dir / "demo").string());
    const test::RunResult folder_named_demo = test::run_command("cd '" + dir.path.string() + "' && mkdir tiny && '" +
                                                                test::tool_path("retro-bench") +
                                                                "' generate --config tiny --prompt 8 --output 2 --peer-steps 0 --quiet");
    CHECK_MESSAGE(folder_named_demo.exit_code == 0, folder_named_demo.err);   // a folder `tiny` there hides nothing
    const std::vector<std::string> names = shipped_model_configs();
    CHECK(std::find(names.begin(), names.end(), "demo") != names.end());
    CHECK(std::is_sorted(names.begin(), names.end()));
    CHECK(shipped_configs_hint().find("demo, demo-retrieval") != std::string::npos);
    // the tools' --config takes a name (retro-train, retro-bench train and generate)
    const test::RunResult r = test::run_tool("retro-bench", "generate --config tiny --prompt 8 --output 2 --peer-steps 0 --json -");
    CHECK_MESSAGE(r.exit_code == 0, r.err);
    CHECK(r.out.find("\"dec_dim\": 16") != std::string::npos);
}
