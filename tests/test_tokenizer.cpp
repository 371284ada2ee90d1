// text: the tokenizer trains on a small generated corpus, round-trips text exactly, refuses
// models with other special ids; retro-tokenizer's CLI contract (help, version, exit codes).
#include <sentencepiece_trainer.h>

#include <algorithm>
#include <random>

#include "core/error.h"
#include "core/manifest.h"
#include "test_util.h"
#include "text/tokenizer.h"

using namespace retro;
namespace fs = std::filesystem;

namespace {
// Pseudo-words from syllables: enough distinct pieces for a small vocabulary (TOOLCHAIN.md 8).
void make_corpus(const fs::path& dir, int docs, unsigned seed) {
    fs::create_directories(dir);
    const char* syl[] = {"ka", "to", "ri", "men", "sa", "lo", "vi", "dra", "pe", "qu", "nox", "ter",
                         "al", "ba", "zu", "fi", "gor", "en", "mi", "thu", "é", "ß", "中"};
    std::mt19937 rng(seed);
    for (int d = 0; d < docs; ++d) {
        std::string text;
        for (int line = 0; line < 30; ++line) {
            int words = 3 + rng() % 12;
            for (int w = 0; w < words; ++w) {
                int n = 1 + rng() % 4;
                for (int s = 0; s < n; ++s) text += syl[rng() % 23];
                text += w + 1 < words ? " " : ".\n";
            }
        }
        test::write_text(dir / ("doc" + std::to_string(d) + ".txt"), text);
    }
}

struct TrainedTokenizer {
    test::TempDir tmp{"tok"};
    std::string model;
    TrainedTokenizer() {
        make_corpus(tmp / "corpus", 12, 3);
        auto r = test::run_tool("retro-tokenizer", "train " + (tmp / "corpus").string() + " --out " +
                                                       (tmp / "tok").string() + " --vocab-size 400 --quiet");
        REQUIRE_MESSAGE(r.exit_code == 0, r.err);
        model = (tmp / "tok/tok.model").string();
    }
};
}  // namespace

TEST_CASE("tokenizer: trains on a generated corpus and round-trips text exactly") {
    TrainedTokenizer t;
    Tokenizer tok(t.model);
    CHECK(tok.vocab_size() <= 400);
    CHECK(tok.vocab_size() > 300);
    CHECK(tok.piece(TOKEN_BOS) == "<s>");
    for (std::string text : {"kato rimen sa.", "  two  spaces\tand a tab ", "unseen: QWERTY 12345 ~!@#", "中文 é ß ☃"}) {
        CAPTURE(text);
        auto ids = tok.encode(text);
        for (int id : ids) CHECK(id >= 0);
        CHECK(tok.decode(ids) == text);
    }
    auto m = manifest_read((t.tmp / "tok").string());
    CHECK(m["parameters"]["special_ids"]["eos"] == 3);
    CHECK(m["corpus"]["documents"] == 12);
    CHECK_NOTHROW(manifest_verify_outputs((t.tmp / "tok").string(), {"tok.model"}));
}

TEST_CASE("tokenizer: a corpus of long lines without blanks keeps the whitespace mark - blanks decode as blanks") {
    // a helper's pass (session 54): one mark U+2581 a line of 5,000 letters fell below --character-coverage 0.9995,
    // so the mark was no piece: every blank and document start was encoded as its three bytes and decoded as "▁"
    test::TempDir tmp("toknoblank");
    std::mt19937 rng(3);
    std::string text;
    for (int line = 0; line < 40; ++line) {
        for (int i = 0; i < 5000; ++i) text += static_cast<char>('a' + rng() % 10);
        text += '\n';
    }
    test::write_text(tmp / "c.txt", text);
    const auto r = test::run_tool("retro-tokenizer", "train " + (tmp / "c.txt").string() + " --out " + (tmp / "tok").string() +
                                                         " --vocab-size 300 --quiet");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    Tokenizer tok((tmp / "tok" / "tok.model").string());
    for (const std::string s : {"ab cd", " leading", "a  b\tc"}) {
        CAPTURE(s);
        CHECK(tok.decode(tok.encode(s)) == s);
    }
}

TEST_CASE("tokenizer: encode and decode stream through the CLI") {
    TrainedTokenizer t;
    std::string text = "kato rimen sa.\nsecond line  with spaces\n\nlast é\n";
    auto enc = test::run_tool("retro-tokenizer", "encode --model " + (t.tmp / "tok").string(), text);
    REQUIRE(enc.exit_code == 0);
    CHECK(std::count(enc.out.begin(), enc.out.end(), '\n') == 4);
    auto dec = test::run_tool("retro-tokenizer", "decode --model " + t.model, enc.out);
    REQUIRE(dec.exit_code == 0);
    CHECK(dec.out == text);
    auto both = test::run_tool("retro-tokenizer", "encode --bos-eos --model " + t.model, "ka\n");
    CHECK(both.out.rfind("2 ", 0) == 0);
    CHECK(both.out.substr(both.out.size() - 3) == " 3\n");
    auto bad = test::run_tool("retro-tokenizer", "decode --model " + t.model, "5 6 999999\n");
    CHECK(bad.exit_code == 2);
    CHECK(bad.err.find("<stdin>:1") != std::string::npos);
    // files as arguments, in order, `-` among them for standard input (a new user's pass, session 54: "argument was
    // not expected"): the same lines as the text piped in
    test::write_text(t.tmp / "a.txt", "kato rimen sa.\nsecond line  with spaces\n");
    test::write_text(t.tmp / "ids.txt", enc.out);
    auto files = test::run_tool("retro-tokenizer", "encode --model " + t.model + " " + (t.tmp / "a.txt").string() + " -",
                                "\nlast é\n");
    REQUIRE_MESSAGE(files.exit_code == 0, files.err);
    CHECK(files.out == enc.out);
    auto back = test::run_tool("retro-tokenizer", "decode --model " + t.model + " " + (t.tmp / "ids.txt").string());
    CHECK(back.out == text);
    auto named = test::run_tool("retro-tokenizer", "decode --model " + t.model + " " + (t.tmp / "a.txt").string());
    CHECK(named.exit_code == 2);
    CHECK(named.err.find((t.tmp / "a.txt").string() + ":1: 'kato' is not a token id") != std::string::npos);
    auto folder = test::run_tool("retro-tokenizer", "encode --model " + t.model + " " + t.tmp.path.string());
    CHECK(folder.exit_code == 2);
    CHECK(folder.err.find("is a folder, not a text file") != std::string::npos);
    CHECK(folder.out.empty());
    // invalid UTF-8 replaced as retro-chunk replaces it (each maximal invalid sequence by one U+FFFD: the ids a database
    // holds), and counted: sentencepiece alone gave a cut-short character two U+FFFD (session 55)
    test::write_text(t.tmp / "bad.txt", "abc \xe2\x82 def \xff\xfe ok \xc3\n");
    auto invalid = test::run_tool("retro-tokenizer", "encode --model " + t.model + " " + (t.tmp / "bad.txt").string());
    REQUIRE_MESSAGE(invalid.exit_code == 0, invalid.err);
    auto replaced = test::run_tool("retro-tokenizer", "encode --model " + t.model,
                                   "abc \xEF\xBF\xBD def \xEF\xBF\xBD\xEF\xBF\xBD ok \xEF\xBF\xBD\n");
    CHECK(invalid.out == replaced.out);
    CHECK_MESSAGE(invalid.err.find((t.tmp / "bad.txt").string() + ": 4 invalid UTF-8 sequences replaced by U+FFFD") !=
                      std::string::npos,
                  invalid.err);
    CHECK(replaced.err.find("invalid UTF-8") == std::string::npos);
    // --tokenizer, as the other tools name the model (it said "--model is required")
    auto named_as_chunk = test::run_tool("retro-tokenizer", "encode --tokenizer " + t.model, "kato rimen sa.\n");
    CHECK_MESSAGE(named_as_chunk.exit_code == 0, named_as_chunk.err);
    CHECK(named_as_chunk.out == enc.out.substr(0, enc.out.find('\n') + 1));
}

TEST_CASE("tokenizer: a model with other special ids is refused with the reason") {
    test::TempDir tmp("tokbad");
    make_corpus(tmp / "c", 4, 5);
    std::string model_prefix = (tmp / "other").string();
    auto status = sentencepiece::SentencePieceTrainer::Train(
        "--input=" + (tmp / "c/doc0.txt").string() + "," + (tmp / "c/doc1.txt").string() + " --model_prefix=" +
        model_prefix + " --vocab_size=60 --hard_vocab_limit=false --minloglevel=2");   // default ids: unk=0 bos=1 eos=2
    REQUIRE(status.ok());
    std::string msg;
    try {
        Tokenizer tok(model_prefix + ".model");
    } catch (const UserError& e) {
        msg = e.what();
    }
    CHECK(msg.find(model_prefix + ".model: ") == 0);
    CHECK(msg.find("special ids must be pad=0 unk=1 bos=2 eos=3") != std::string::npos);
    auto r = test::run_tool("retro-tokenizer", "encode --model " + model_prefix + ".model", "x\n");
    CHECK(r.exit_code == 2);
}

TEST_CASE("tokenizer: CLI help - version and bad input") {
    auto help = test::run_tool("retro-tokenizer", "train --help");
    CHECK(help.exit_code == 0);
    CHECK(help.out.find("--vocab-size") != std::string::npos);
    CHECK(help.out.find("8000") != std::string::npos);   // defaults are shown
    auto version = test::run_tool("retro-tokenizer", "--version");
    CHECK(version.exit_code == 0);
    CHECK(version.out.find("RetroKit") != std::string::npos);
    auto none = test::run_tool("retro-tokenizer", "");
    CHECK(none.exit_code == 2);
    test::TempDir tmp("tokcli");
    auto missing = test::run_tool("retro-tokenizer", "train " + (tmp / "nope").string() + " --out " + (tmp / "o").string());
    CHECK(missing.exit_code == 2);
    CHECK(missing.err.find("nope: no such file or folder") != std::string::npos);
    CHECK(std::count(missing.err.begin(), missing.err.end(), '\n') == 1);
    CHECK(!fs::exists(tmp / "o/manifest.json"));
    fs::create_directories(tmp / "emptydir");
    auto nomatch = test::run_tool("retro-tokenizer", "train " + (tmp / "emptydir").string() + " --out " + (tmp / "o").string());
    CHECK(nomatch.exit_code == 2);
    CHECK(nomatch.err.find("no file matches") != std::string::npos);
    // a glob of a syntax it does not have says so (it said only "no file matches")
    test::write_text(tmp / "emptydir" / "a.txt", "Kamiro tel.");
    auto braces = test::run_tool("retro-tokenizer", "train " + (tmp / "emptydir").string() + " --glob '*.{txt,md}' --out " + (tmp / "o").string());
    CHECK(braces.exit_code == 2);
    CHECK_MESSAGE(braces.err.find("--glob knows *, ? and ** only") != std::string::npos, braces.err);
    // an empty model file (sentencepiece said "Internal: unk is not defined."), and a device
    test::write_text(tmp / "empty.model", "");
    auto empty_model = test::run_tool("retro-tokenizer", "encode --model " + (tmp / "empty.model").string(), "x\n");
    CHECK(empty_model.exit_code == 2);
    CHECK_MESSAGE(empty_model.err.find("empty.model: is empty (0 bytes), not a sentencepiece model") != std::string::npos, empty_model.err);
    auto device = test::run_tool("retro-tokenizer", "encode --model /dev/null", "x\n");
    CHECK(device.exit_code == 2);
    CHECK_MESSAGE(device.err.find("/dev/null: is not a tokenizer model file") != std::string::npos, device.err);
    auto badflag = test::run_tool("retro-tokenizer", "train x --vocab-size lots");
    CHECK(badflag.exit_code == 2);
    // --max-sentences 0 samples nothing: named, not "the corpus holds no text"
    fs::create_directories(tmp / "corpus");
    test::write_text(tmp / "corpus/a.txt", "Kamiro tel sulan.\nVi ta ro.\n");
    auto zero = test::run_tool("retro-tokenizer", "train " + (tmp / "corpus").string() + " --out " + (tmp / "o").string() +
                                                      " --vocab-size 300 --max-sentences 0 --quiet");
    CHECK(zero.exit_code == 2);
    CHECK_MESSAGE(zero.err.find("retro-tokenizer: error: --max-sentences: must be at least 1 (got 0)") == 0, zero.err);
    CHECK(std::count(zero.err.begin(), zero.err.end(), '\n') == 1);
    CHECK(!fs::exists(tmp / "o/manifest.json"));
    // a seed beyond sentencepiece's 32 bits: 2^32 + 1 trained as 1, the manifest saying 4294967297
    auto seed = test::run_tool("retro-tokenizer", "train " + (tmp / "corpus").string() + " --out " + (tmp / "o").string() +
                                                      " --vocab-size 300 --seed 4294967297 --quiet");
    CHECK(seed.exit_code == 2);
    CHECK_MESSAGE(seed.err.find("--seed: 4294967297 is above 4,294,967,295") != std::string::npos, seed.err);
    CHECK(!fs::exists(tmp / "o/manifest.json"));
    // more distinct characters than the vocabulary holds: the fix is a larger vocabulary, not a smaller one
    std::string many;
    for (char32_t c = 0x4e00; c < 0x4e00 + 600; ++c)   // 600 CJK ideographs, each a few times
        for (int rep = 0; rep < 3; ++rep) {
            many += static_cast<char>(0xe0 | (c >> 12));
            many += static_cast<char>(0x80 | ((c >> 6) & 0x3f));
            many += static_cast<char>(0x80 | (c & 0x3f));
            if (rep == 2) many += c % 20 == 0 ? "\n" : " ";
        }
    test::write_text(tmp / "corpus/a.txt", many);
    auto small = test::run_tool("retro-tokenizer", "train " + (tmp / "corpus").string() + " --out " + (tmp / "o").string() +
                                                       " --vocab-size 300 --quiet");
    CHECK(small.exit_code == 2);
    CHECK_MESSAGE(small.err.find("--vocab-size: 300 is smaller than the ") != std::string::npos, small.err);
    CHECK_MESSAGE(small.err.find("pieces the corpus's characters and the special pieces need (fix: give --vocab-size ") !=
                      std::string::npos,
                  small.err);
    CHECK(std::count(small.err.begin(), small.err.end(), '\n') == 1);
}

TEST_CASE("tokenizer: an existing output folder is refused unless --force") {
    TrainedTokenizer t;
    std::string args = "train " + (t.tmp / "corpus").string() + " --out " + (t.tmp / "tok").string() + " --vocab-size 400 --quiet";
    auto again = test::run_tool("retro-tokenizer", args);
    CHECK(again.exit_code == 2);
    CHECK(again.err.find("already holds a tokenizer") != std::string::npos);
    auto forced = test::run_tool("retro-tokenizer", args + " --force");
    CHECK(forced.exit_code == 0);
    // --resume (a pipeline script run again, session 54): this command's tokenizer kept untouched, another refused
    const std::string model = test::read_text(t.tmp / "tok" / "tok.model"), manifest = test::read_text(t.tmp / "tok" / "manifest.json");
    auto kept = test::run_tool("retro-tokenizer", "train " + (t.tmp / "corpus").string() + " --out " + (t.tmp / "tok").string() +
                                                      " --vocab-size 400 --resume");
    CHECK_MESSAGE(kept.exit_code == 0, kept.err);
    CHECK(kept.err.find("is already complete") != std::string::npos);
    CHECK(test::read_text(t.tmp / "tok" / "manifest.json") == manifest);
    auto other = test::run_tool("retro-tokenizer", "train " + (t.tmp / "corpus").string() + " --out " + (t.tmp / "tok").string() +
                                                       " --vocab-size 420 --resume");
    CHECK(other.exit_code == 2);
    CHECK(other.err.find("already holds a tokenizer made from other inputs or parameters: parameters.vocab_size is 420, the folder's 400") !=
          std::string::npos);
    CHECK(test::read_text(t.tmp / "tok" / "tok.model") == model);
    // a folder without a finished tokenizer is trained into
    auto fresh = test::run_tool("retro-tokenizer", "train " + (t.tmp / "corpus").string() + " --out " + (t.tmp / "tok2").string() +
                                                       " --vocab-size 400 --resume --quiet");
    CHECK_MESSAGE(fresh.exit_code == 0, fresh.err);
    CHECK(test::read_text(t.tmp / "tok2" / "tok.model") == model);
    CHECK(test::run_tool("retro-tokenizer", args + " --resume --force").exit_code == 2);
    // stopped between writing tok.model and its manifest (the interrupt campaign, session 55: the note said "no tokenizer
    // was written", and the rerun "already holds a tokenizer"): named as such, and --resume trains it again
    fs::create_directories(t.tmp / "tok3");
    fs::copy_file(t.tmp / "tok" / "tok.model", t.tmp / "tok3" / "tok.model");
    const std::string args3 = "train " + (t.tmp / "corpus").string() + " --out " + (t.tmp / "tok3").string() + " --vocab-size 400";
    auto cut = test::run_tool("retro-tokenizer", args3);
    CHECK(cut.exit_code == 2);
    CHECK_MESSAGE(cut.err.find("holds a tok.model without its manifest.json (a training stopped as it wrote them, or a model "
                               "RetroKit did not train) (fix: run the same command with --resume or --force to train it again") !=
                      std::string::npos,
                  cut.err);
    auto redone = test::run_tool("retro-tokenizer", args3 + " --resume --quiet");
    CHECK_MESSAGE(redone.exit_code == 0, redone.err);
    CHECK(fs::exists(t.tmp / "tok3" / "manifest.json"));
    CHECK(test::read_text(t.tmp / "tok3" / "tok.model") == model);
}

TEST_CASE("tokenizer: a line longer than the trainer takes is trained on in pieces, not dropped") {
    // one document without line breaks (~50 KB, multi-byte characters among its words): sentencepiece skips a
    // sentence over its max_sentence_length whole, so a corpus of such lines trained on nothing (session 37's audit)
    test::TempDir tmp("toklong");
    make_corpus(tmp / "lines", 12, 5);
    std::string joined;
    for (int round = 0; round < 4; ++round)
        for (int d = 0; d < 12; ++d) {
            std::string text = test::read_text(tmp / "lines" / ("doc" + std::to_string(d) + ".txt"));
            std::replace(text.begin(), text.end(), '\n', ' ');
            joined += text;
        }
    REQUIRE(joined.size() > 3 * kTrainSentenceBytes);
    fs::create_directories(tmp / "one");
    test::write_text(tmp / "one" / "all.txt", joined + "\n");
    auto r = test::run_tool("retro-tokenizer", "train " + (tmp / "one").string() + " --out " + (tmp / "tok").string() +
                                                   " --vocab-size 400");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    CHECK(r.err.find("1 line over " + std::to_string(kTrainSentenceBytes) + " bytes cut into pieces at blanks") !=
          std::string::npos);
    const auto m = manifest_read((tmp / "tok").string());
    CHECK(m["corpus"]["long_lines_split"] == 1);
    CHECK(m["corpus"]["sentences_seen"].get<std::int64_t>() >= static_cast<std::int64_t>(joined.size() / kTrainSentenceBytes));
    Tokenizer tok((tmp / "tok" / "tok.model").string());
    CHECK(tok.vocab_size() > 300);   // the pieces taught it the corpus's words, not only its characters
    const std::string sample = joined.substr(0, 200);
    CHECK(tok.decode(tok.encode(sample)) == sample);
}

TEST_CASE("tokenizer: a text vocabulary (a BERT vocab.txt) given as the model is named as another kind of tokenizer") {
    // (an RP user's walk, session 61: it said "restore the file from the checkpoint it came from", as of damage)
    const fs::path vocab = test::source_dir() / "tests/reference/golden/bert_tiny/vocab.txt";
    const std::string said = vocab.string() + ": is a text file (a WordPiece or BPE vocabulary, a tokenizer.json?), not a "
                                              "sentencepiece model";
    CHECK_THROWS_WITH_AS(Tokenizer(vocab.string()), doctest::Contains(said.c_str()), UserError);
    test::TempDir tmp("tok-damaged");   // damaged bytes are still named as damage
    test::write_text(tmp / "bad.model", std::string("\x0a\x05\x01\x02\x03", 5) + std::string(1, '\0') + "\xff\xff");
    CHECK_THROWS_WITH_AS(Tokenizer((tmp / "bad.model").string()), doctest::Contains("restore the file"), UserError);
}
