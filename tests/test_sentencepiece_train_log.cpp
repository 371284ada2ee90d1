// Tokenizer training's progress (text/sentencepiece_train_log.h): sentencepiece's log lines read as progress of the
// stage that takes the time, and retro-tokenizer train showing it (a bar; its lines under --verbose; nothing under
// --quiet) instead of a silence between "training" and "wrote".
#include <doctest/doctest.h>

#include <iostream>
#include <string>

#include "core/stderr_capture.h"

#include "test_util.h"
#include "text/sentencepiece_train_log.h"

using namespace retro;
namespace fs = std::filesystem;

TEST_CASE("sentencepiece progress: a unigram model's pruning from its seed pieces down to the vocabulary x 1.1") {
    SentencepieceTrainProgress p("unigram", 2000);
    CHECK(!p.feed("trainer_interface.cc(557) LOG(INFO) Alphabet size=81"));
    CHECK(!p.feed("unigram_model_trainer.cc(507) LOG(INFO) EM sub_iter=0 size=3583 obj=10.6 num_tokens=17952"));   // no seed yet
    CHECK(p.stage().empty());
    REQUIRE(p.feed("unigram_model_trainer.cc(201) LOG(INFO) Initialized 8772 seed sentencepieces"));
    CHECK(p.stage() == "pruning the seed pieces");
    CHECK(p.total() == 8772 - 2200);
    CHECK(p.done() == 0);
    REQUIRE(p.feed("unigram_model_trainer.cc(507) LOG(INFO) EM sub_iter=0 size=3583 obj=10.6534 num_tokens=17952 num_tokens/piece=5.01"));
    CHECK(p.done() == 8772 - 3583);
    REQUIRE(p.feed("unigram_model_trainer.cc(507) LOG(INFO) EM sub_iter=1 size=2150 obj=8.3 num_tokens=19721 num_tokens/piece=8.96"));
    CHECK(p.done() == p.total());   // below the target: done, never past it
    CHECK(!p.feed("bpe_model_trainer.cc(258) LOG(INFO) Added: freq=1102 size=20 all=1838 active=1468 piece=un"));
    CHECK(!p.feed("EM sub_iter=0 size="));   // cut line: no number
}

TEST_CASE("sentencepiece progress: a BPE model's merges of the vocabulary less its meta pieces and alphabet") {
    SentencepieceTrainProgress p("bpe", 2000);
    for (int i = 0; i < 260; ++i) CHECK(!p.feed("trainer_interface.cc(422) LOG(INFO) Adding meta_piece: <0x00>"));
    CHECK(!p.feed("trainer_interface.cc(557) LOG(INFO) Alphabet size=81"));
    REQUIRE(p.feed("bpe_model_trainer.cc(258) LOG(INFO) Added: freq=1102 size=20 all=1838 active=1468 piece=un"));
    CHECK(p.stage() == "merging pieces");
    CHECK(p.total() == 2000 - 260 - 81);
    CHECK(p.done() == 20);
    CHECK(!p.feed("unigram_model_trainer.cc(201) LOG(INFO) Initialized 8772 seed sentencepieces"));
}

TEST_CASE("sentencepiece log: a failed CHECK and its end are warnings, its info lines debug ones") {
    // sentencepiece 0.1.97's CHECK prints "file.cc(N) [cond] message" untagged, then "Program terminated with an
    // unrecoverable error." and exits: without --verbose these were lost as debug lines (exit 255 without a word)
    const std::string err = capture_stderr([] {
        SentencepieceTrainLog log("unigram", 100);
        std::cerr << "unigram_model_trainer.cc(201) LOG(INFO) Initialized 10 seed sentencepieces\n"
                  << "trainer_interface.cc(77) [!sentences_.empty()] no sentence\n"
                  << "Program terminated with an unrecoverable error.\n"
                  << "trainer_interface.cc(12) LOG(ERROR) broken\n";
    });
    CHECK(err.find("warning: sentencepiece: trainer_interface.cc(77) [!sentences_.empty()] no sentence") != std::string::npos);
    CHECK(err.find("warning: sentencepiece: Program terminated with an unrecoverable error.") != std::string::npos);
    CHECK(err.find("warning: sentencepiece: broken") != std::string::npos);
    CHECK(err.find("Initialized") == std::string::npos);   // (info: --verbose's)
}

TEST_CASE("retro-tokenizer train shows the training's progress - its lines under --verbose - nothing under --quiet") {
    test::TempDir t("sp-log");
    std::string text;
    for (int i = 0; i < 400; ++i)
        text += "line " + std::to_string(i) + ": the quick brown fox " + std::to_string(i * 7919 % 1000) + " jumps over the lazy dog\n";
    fs::create_directories(t / "corpus");
    test::write_text(t / "corpus" / "a.txt", text);
    const std::string corpus = (t / "corpus").string();
    for (const std::string type : {"unigram", "bpe"}) {
        CAPTURE(type);
        const std::string stage = type == "unigram" ? "pruning the seed pieces 100% " : "merging pieces 100% ";
        const auto r = test::run_tool("retro-tokenizer", "train " + corpus + " --out " + (t / type).string() +
                                                             " --vocab-size 500 --model-type " + type);
        REQUIRE_MESSAGE(r.exit_code == 0, r.err);
        CHECK_MESSAGE(r.err.find(stage) != std::string::npos, r.err);
        CHECK(r.err.find("sentencepiece") == std::string::npos);
        const auto verbose = test::run_tool("retro-tokenizer", "train " + corpus + " --out " + (t / type).string() +
                                                                   " --vocab-size 500 --force --verbose --model-type " + type);
        REQUIRE(verbose.exit_code == 0);
        CHECK(verbose.err.find("debug: sentencepiece: Starts training") != std::string::npos);
        CHECK(verbose.err.find(type == "unigram" ? "debug: sentencepiece: EM sub_iter=" : "debug: sentencepiece: Added: ") !=
              std::string::npos);
        CHECK(verbose.err.find("LOG(INFO)") == std::string::npos);   // sentencepiece's raw lines (they were, under --verbose)
        const auto quiet = test::run_tool("retro-tokenizer", "train " + corpus + " --out " + (t / type).string() +
                                                                 " --vocab-size 500 --force --quiet --model-type " + type);
        REQUIRE(quiet.exit_code == 0);
        CHECK_MESSAGE(quiet.err.empty(), quiet.err);
    }
}
