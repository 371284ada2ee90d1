// bert embedder, the tokenizer a model folder gets: tokens added after training with the files' ids and strip flags,
// the choice of tokenizer (tokenizer_class, add_prefix_space), the prompt's text checks, GPT-2's pre-tokeniser regex.
// Golden files: tests/reference/make_bert_golden.py (run by hand).
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/cuda_device.h"
#include "core/error.h"
#include "core/fingerprint.h"
#include "core/manifest.h"
#include "embed/bert_embedder.h"
#include "test_bert_util.h"
#include "test_chunk_util.h"
#include "test_embed_util.h"
#include "test_util.h"
#include "text/regex_unicode.h"
#include "text/roberta_bpe.h"
#include "text/wordpiece.h"

using namespace retro;
namespace fs = std::filesystem;

namespace {

using test::bert_refusal;
std::filesystem::path tiny_dir() { return test::bert_tiny_dir(); }

}  // namespace

TEST_CASE("bert: tokens added after training (new ids) are split out with the ids the tokenizer files give, in all three tokenizers") {
    // tests/reference/make_bert_golden.py --only added_tokens: tokenizer.add_tokens(["<ent>"]) and an additional special
    // token "[E1]", saved by transformers 5 (tokenizer.json; the legacy BertTokenizer: vocab.txt + added_tokens.json)
    const fs::path root = test::source_dir() / "tests/reference/golden/added_tokens";
    auto golden = test::golden_json(root / "golden.json");
    auto sentences = golden["sentences"].get<std::vector<std::string>>();
    for (const char* name : {"bert_fast", "bert_slow", "roberta", "xlmr", "roberta_strip"}) {
        CAPTURE(name);
        test::TempDir dir("added-tokens");
        for (const auto& f : fs::directory_iterator(root / name)) fs::copy_file(f.path(), dir / f.path().filename());
        if (std::string(name) == "xlmr")
            fs::copy_file(test::source_dir() / "tests/reference/golden/xlmr_tiny/sentencepiece.bpe.model", dir / "sentencepiece.bpe.model");
        const BertTextTokenizer tok(dir.path.string(), -1);
        for (std::size_t i = 0; i < sentences.size(); ++i) {
            CAPTURE(sentences[i]);
            CHECK(tok.encode(sentences[i], 128) == golden["ids"][name][i].get<std::vector<int>>());
        }
        const auto first = golden["ids"][name][0].get<std::vector<int>>();
        CHECK(tok.vocab_size() == *std::max_element(first.begin(), first.end()) + 1);   // [E1]'s id, the last added, counts
    }
    // a model whose embeddings were not resized for them is refused, naming the tokenizer and the sizes
    test::TempDir dir("added-unresized");
    for (const char* f : {"config.json", "model.safetensors"}) fs::copy_file(tiny_dir() / f, dir / f);
    for (const auto& f : fs::directory_iterator(root / "bert_slow")) fs::copy_file(f.path(), dir / f.path().filename());
    BertEmbedderOptions o;
    o.model_dir = dir.path.string();
    const std::string msg = bert_refusal(o);
    CHECK_MESSAGE(msg.find("vocab.txt: has 403 tokens, config.json says vocab_size 401") != std::string::npos, msg);
    // an added token's id that a vocabulary line already holds cannot be followed
    test::write_text(dir / "added_tokens.json", R"({"<ent>": 7})");
    CHECK(bert_refusal(o).find("where the tokenizer files put the added token '<ent>'") != std::string::npos);
    test::write_text(dir / "added_tokens.json", R"({"<ent>": -3})");
    CHECK(bert_refusal(o).find("added_tokens.json: gives the added token '<ent>' the id -3, not a token id") != std::string::npos);
}

TEST_CASE("bert: the tokenizer follows what transformers reads: tokenizer_class, add_prefix_space, the prompt's text") {
    const fs::path roberta = test::source_dir() / "tests/reference/golden/roberta_tiny";
    const auto golden = test::golden_json(roberta / "golden.json");
    const auto sentences = golden["sentences"].get<std::vector<std::string>>();
    test::TempDir dir("bert-tokenizer-choice");
    for (const char* f : {"config.json", "model.safetensors", "vocab.json", "merges.txt"}) fs::copy_file(roberta / f, dir / f);
    // transformers' RobertaTokenizer builds its pre-tokenizer from tokenizer_config.json's add_prefix_space (false
    // where absent), not from tokenizer.json's ByteLevel entry
    test::write_text(dir / "tokenizer_config.json", R"({"tokenizer_class": "RobertaTokenizer"})");
    test::write_text(dir / "tokenizer.json", R"({"pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": true}, "added_tokens": []})");
    BertEmbedderOptions o;
    o.model_dir = dir.path.string();
    {
        BertEmbedder e(o, nullptr);
        for (std::size_t i = 0; i < sentences.size(); ++i) CHECK(e.encode_text(sentences[i]) == golden["ids"][i].get<std::vector<int>>());
    }
    // a tokenizer RetroKit does not have is refused, not guessed from the files (HerBERT's: vocab.json + merges.txt)
    test::write_text(dir / "tokenizer_config.json", R"({"tokenizer_class": "HerbertTokenizer"})");
    CHECK(bert_refusal(o).find("tokenizer_config.json: names the tokenizer_class HerbertTokenizer, which the bert embedder does not have") !=
          std::string::npos);
    test::write_text(dir / "tokenizer_config.json", R"({"tokenizer_class": "PreTrainedTokenizerFast"})");   // generic: the files decide
    CHECK(bert_refusal(o) == "(accepted)");
    // a prompt must be UTF-8 text; a default prompt of null is none, as in sentence-transformers
    o.prompt = std::string("\xff\xfe: ");
    CHECK(bert_refusal(o).find("--prompt: is not valid UTF-8") == 0);
    o.prompt.reset();
    test::write_text(dir / "config_sentence_transformers.json", R"({"prompts": {"query": null}, "default_prompt_name": "query"})");
    BertEmbedder none(o, nullptr);
    CHECK(none.prompt().empty());
}

TEST_CASE("bert: the uncased lowercasing maps each capital of the alternating Latin runs to its small letter and leaves the small ones") {
    // unicode::lower_simple's runs of stride 2 (U+0100..U+017F and others: capital, small, capital, ...): pairs as
    // Python's str.lower() gives them (which BertTokenizer's do_lower_case calls), and a small letter is its own
    // lowercase everywhere (simple lowercasing is idempotent over every code point)
    const char32_t pairs[][2] = {{0x41, 0x61},     {0x61, 0x61},     {0x100, 0x101},   {0x101, 0x101},
                                 {0x141, 0x142},   {0x142, 0x142},   {0x15A, 0x15B},   {0x15B, 0x15B},
                                 {0x179, 0x17A},   {0x17A, 0x17A},   {0x17B, 0x17C},   {0x17C, 0x17C},
                                 {0x1A0, 0x1A1},   {0x1A1, 0x1A1},   {0x1E9E, 0xDF},   {0x391, 0x3B1},
                                 {0x3C9, 0x3C9},   {0x1F08, 0x1F00}};
    for (const auto& p : pairs) {
        CAPTURE(static_cast<std::uint32_t>(p[0]));
        CHECK(unicode::lower_simple(p[0]) == p[1]);
    }
    std::int64_t not_idempotent = 0;
    char32_t first = 0;
    for (char32_t c = 0; c < 0x110000; ++c) {
        const char32_t l = unicode::lower_simple(c);
        if (unicode::lower_simple(l) != l && not_idempotent++ == 0) first = c;
    }
    CAPTURE(static_cast<std::uint32_t>(first));
    CHECK(not_idempotent == 0);
    // through the tokenizer's text: Polish small letters stay what they are (ł, ś, ź, ż), capitals fold to them
    CHECK(unicode::u32_to_utf8(std::u32string{unicode::lower_simple(0x141), unicode::lower_simple(0x15B),
                                              unicode::lower_simple(0x179), unicode::lower_simple(0x17C)}) ==
          "\u0142\u015B\u017A\u017C");
}

TEST_CASE("bert: GPT-2's pre-tokeniser splits white space, contractions and symbol runs as its regex does") {
    // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
    const auto pieces = [](const char* text) {
        std::vector<std::string> out;
        for (const auto& p : gpt2_pieces(unicode::utf8_to_u32(text))) out.push_back(unicode::u32_to_utf8(p));
        return out;
    };
    using V = std::vector<std::string>;
    CHECK(pieces("Hello world") == V{"Hello", " world"});
    CHECK(pieces("a  b") == V{"a", " ", " b"});           // a run leaves its last space to the word after it
    CHECK(pieces("a\n\nb") == V{"a", "\n", "\n", "b"});   // ... which takes only a literal space
    CHECK(pieces("a   ") == V{"a", "   "});               // a run at the end is one piece
    CHECK(pieces("don't I'M") == V{"don", "'t", " I", "'", "M"});   // contractions are lower case only
    CHECK(pieces("x 123 4,5!!") == V{"x", " 123", " 4", ",", "5", "!!"});
    CHECK(pieces(" ") == V{" "});
    CHECK(pieces("") == V{});
}

TEST_CASE("bert: a RoBERTa tokenizer.json without tokenizer_config.json follows RobertaTokenizer, a generic one the file") {
    // tests/reference/make_bert_golden.py --only roberta_json_only: saved with add_prefix_space=True, the config then
    // removed; transformers 5 loads it with RobertaTokenizer (model_type roberta), whose add_prefix_space is false
    const fs::path dir = test::source_dir() / "tests/reference/golden/roberta_tiny/json_only";
    const auto g = test::golden_json(dir / "ids.json");
    const BertTextTokenizer roberta(dir.string(), -1);
    CHECK_FALSE(roberta.add_prefix_space());
    for (std::size_t i = 0; i < g["texts"].size(); ++i)
        CHECK(roberta.encode(g["texts"][i].get<std::string>(), 128) == g["ids"][i].get<std::vector<int>>());
    // ModernBERT's folder without tokenizer_config.json: the file's post-processor names [CLS] and [SEP]
    test::TempDir tmp("modernbert-no-config");
    const fs::path mb = test::source_dir() / "tests/reference/golden/modernbert_tiny";
    for (const char* f : {"config.json", "tokenizer.json"}) fs::copy_file(mb / f, tmp / f);
    const auto mg = test::golden_json(mb / "golden.json");
    const BertTextTokenizer generic(tmp.path.string(), -1);
    for (std::size_t i = 0; i < mg["sentences"].size(); ++i)
        CHECK(generic.encode(mg["sentences"][i].get<std::string>(), 256) == mg["ids"][i].get<std::vector<int>>());
}

TEST_CASE("bert: added tokens marked normalized are matched in the normalised text, as transformers 5's BertTokenizer") {
    // tests/reference/make_bert_golden.py --only added_normalized: add_tokens(["NewWord", "<Tag>", "Ångström", "中文X"])
    // on an uncased tokenizer ("normalized": true: "NEWWORD" and "Ångström" match, their spellings lowercased and
    // stripped, CJK spaced) beside a special [E1] (normalized false: "[e1]" does not)
    const fs::path dir = test::source_dir() / "tests/reference/golden/added_tokens";
    const auto g = test::golden_json(dir / "golden_normalized.json");
    const WordPiece wp = WordPiece::from_dir((dir / "bert_normalized").string());
    for (std::size_t i = 0; i < g["sentences"].size(); ++i) {
        const std::string text = g["sentences"][i].get<std::string>();
        CAPTURE(text);
        CHECK(wp.encode(text, 128) == g["ids"][i].get<std::vector<int>>());
    }
}
