// A misspelt or guessed subcommand is named in the refusal (cli/subcommand_word.h): before, the word went to the
// tool's own form and the line named another word or option (`retro-knn shwo knn/`: "'knn/': left over";
// `retro-train evl --run r`: "did you mean --knn or --out?"; `retro-chunk inspcet db/`: "--tokenizer: is required").
#include <filesystem>
#include <string>
#include <vector>

#include "core/shell_quote.h"
#include "subcommand_word.h"
#include "test_cli_pipeline.h"
#include "test_util.h"

using namespace retro;
namespace fs = std::filesystem;

namespace {

// The tool run in `folder` (so that a bare word names no file there unless the test made one).
test::RunResult run_in(const fs::path& folder, const std::string& tool, const std::string& args) {
    return test::run_command("cd " + shell_quote(folder.string()) + " && " + shell_quote(test::tool_path(tool)) + " " + args);
}

int bare_word_at(const CLI::App& app, std::vector<const char*> argv) {
    argv.insert(argv.begin(), "tool");
    return first_bare_word(app, static_cast<int>(argv.size()), argv.data());
}

}  // namespace

TEST_CASE("cli: the first bare word skips options and their values, and stops at -- or an option the tool does not know") {
    CLI::App app{"t", "tool"};
    bool quiet = false;
    std::string out;
    app.add_flag("--quiet", quiet, "");
    app.add_option("--out", out, "");
    app.add_subcommand("show", "");
    CHECK(bare_word_at(app, {"--quiet", "--out", "x", "word"}) == 4);   // x is --out's value
    CHECK(bare_word_at(app, {"--out=x", "word"}) == 2);
    CHECK(bare_word_at(app, {"word", "--out", "x"}) == 1);
    CHECK(bare_word_at(app, {"-", "word"}) == 1);   // standard input's "-" is a word
    CHECK(bare_word_at(app, {"--unknown", "word"}) == 0);   // does --unknown take "word"? not known: none
    CHECK(bare_word_at(app, {"--", "word"}) == 0);
    CHECK(bare_word_at(app, {"--quiet", "--out", "x"}) == 0);
}

TEST_CASE("cli: a misspelt subcommand is named with the one meant, a guessed one with the subcommands there are") {
    const test::CliPipeline& p = test::bad_input_pipeline();
    test::TempDir t("subword");
    const std::string knn = shell_quote(p.knn.string()), db = shell_quote(p.db.string());
    // misspelt, or the start of a name: "did you mean"
    expect_refused(run_in(t.path, "retro-knn", "shwo " + knn),
                   {"retro-knn: error: 'shwo' is not a subcommand of retro-knn (merge, show) (fix: did you mean retro-knn show?"});
    expect_refused(run_in(t.path, "retro-knn", "--threads 1 shwo " + knn), {"did you mean retro-knn show?"});
    expect_refused(run_in(t.path, "retro-chunk", "insp " + db), {"'insp' is not a subcommand of retro-chunk", "did you mean retro-chunk inspect?"});
    expect_refused(run_in(t.path, "retro-train", "evl --run " + shell_quote(p.run.string())),
                   {"'evl' is not a subcommand of retro-train (eval, plot)", "did you mean retro-train eval?"});
    expect_refused(run_in(t.path, "retro-tokenizer", "encdoe --model x"), {"did you mean retro-tokenizer encode?"});
    expect_refused(run_in(t.path, "retro-index", "qeury " + shell_quote(p.index.string()) + " hello"), {"did you mean retro-index query?"});
    // a word that is no subcommand and no file, where a subcommand goes: the subcommands listed, nothing written
    expect_refused(run_in(t.path, "retro-chunk", "build corpus --tokenizer " + shell_quote(p.tok.string()) + " --out db2"),
                   {"'build' is neither a subcommand of retro-chunk (merge, inspect) nor a file or folder (fix: see retro-chunk --help)"});
    CHECK_FALSE(fs::exists(t.path / "db2"));
    expect_refused(run_in(t.path, "retro-index", "build " + db + " --out ix"),   // (said "'DB': left over")
                   {"'build' is neither a subcommand of retro-index (merge, query) nor a file or folder"});
    CHECK_FALSE(fs::exists(t.path / "ix"));
    expect_refused(run_in(t.path, "retro-knn", "build"), {"'build' is neither a subcommand of retro-knn"});   // ("--out: is required")
    expect_refused(run_in(t.path, "retro-train", "build --db " + db), {"'build' is not a subcommand of retro-train (eval, plot)"});
    // after options the word is the tool's input, and its own check names it
    const test::RunResult later = run_in(t.path, "retro-chunk", "--tokenizer " + shell_quote(p.tok.string()) + " --out db3 nocorpus");
    expect_refused(later, {"nocorpus: no such file or folder"});
    CHECK(later.err.find("subcommand") == std::string::npos);
    // an option's value is not the word: --out evl is retro-train's --out
    const test::RunResult value = run_in(t.path, "retro-train", "--out evl --db missing/ --config tiny");
    CHECK(value.exit_code == 2);
    CHECK(value.err.find("subcommand") == std::string::npos);
    // a folder of that name is the tool's input, not a misspelling
    fs::create_directories(t.path / "shwo");
    const test::RunResult folder = run_in(t.path, "retro-knn", "shwo --out k");
    CHECK(folder.exit_code == 2);
    CHECK(folder.err.find("subcommand") == std::string::npos);
    // --help is answered
    const test::RunResult help = run_in(t.path, "retro-knn", "shwo --help");
    CHECK(help.exit_code == 0);
    CHECK(help.out.find("Usage: retro-knn") != std::string::npos);
}

TEST_CASE("cli: an option the peers name otherwise is met with RetroKit's name for it") {
    const test::CliPipeline& p = test::bad_input_pipeline();
    const std::string run = shell_quote(p.run.string());
    expect_refused(test::run_tool("retro-generate", run + " --max-new-tokens 5 hi"), {"--max-new-tokens: not an option", "did you mean --max-tokens?"});
    expect_refused(test::run_tool("retro-generate", run + " --prompt hi"),
                   {"--prompt: not an option of retro-generate", "(fix: the option is the word after RUN: retro-generate RUN \"The prompt\""});
    expect_refused(test::run_tool("retro-train", "--db db --learning-rate 1e-3"), {"did you mean --lr?"});
    expect_refused(test::run_tool("retro-train", "--db db --max_steps 5"), {"did you mean --steps?"});   // (underscores too)
    expect_refused(test::run_tool("retro-train", "--db db --output-dir r"), {"did you mean --out?"});
    expect_refused(test::run_tool("retro-knn", "idx --retro-num-neighbors 2"), {"did you mean --neighbours"});
    expect_refused(test::run_tool("retro-knn", "idx --num_neighbors 2"), {"did you mean --neighbours"});
    // the last part of a name; --help only for a word that starts as it does
    expect_refused(test::run_tool("retro-generate", run + " --tokens 5 hi"), {"did you mean --max-tokens?"});
    const test::RunResult temp = test::run_tool("retro-generate", run + " --temp 0.7 hi");
    expect_refused(temp, {"(fix: did you mean --temperature? see retro-generate --help)"});
    expect_refused(test::run_tool("retro-generate", run + " --hlep"), {"did you mean --help?"});
    // a name no peer's and no misspelling: none offered
    const test::RunResult none = test::run_tool("retro-knn", "idx --zzz 2");
    CHECK(none.err.find("did you mean") == std::string::npos);
}

TEST_CASE("cli: retro-generate without its run says its whole form, as the other tools without their inputs do") {
    for (const char* args : {"", "--prompts p.jsonl --output o.jsonl", "--greedy"}) {
        CAPTURE(args);
        expect_refused(test::run_tool("retro-generate", args),
                       {"retro-generate: error: usage: retro-generate RUN \"PROMPT\" (PROMPT, or - for standard input; or "
                        "retro-generate RUN --prompts FILE.jsonl --output OUT.jsonl for many)"});   // (said "run is required")
    }
}

TEST_CASE("cli: a subcommand without its positional argument is told its form from the declarations") {
    expect_refused(test::run_tool("retro-knn", "show"), {"retro-knn: error: knn is required: usage: retro-knn show KNN [OPTIONS] (fix: see retro-knn show --help)"});
    expect_refused(test::run_tool("retro-chunk", "merge"), {"shards is required: usage: retro-chunk merge SHARDS... --out OUT [OPTIONS]"});
    expect_refused(test::run_tool("retro-train", "plot"), {"run is required: usage: retro-train plot RUN [OPTIONS]"});
    // a required option is not a positional: its line as before
    expect_refused(test::run_tool("retro-tokenizer", "decode"), {"--model is required (fix: see retro-tokenizer decode --help)"});
}
