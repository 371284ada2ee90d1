// T5 and XLM-RoBERTa folders that hold tokenizer.json alone (transformers 5's save: text/sentencepiece_json.h): the
// sentencepiece model rebuilt from it tokenises as the original .model file does (the golden texts and random
// strings), as the tokenizers library does wherever that agrees with sentencepiece, and the embedders built over
// such folders give the tiny models' golden embeddings; what the rebuild cannot hold is refused in one line.
// Golden files: tests/reference/make_tokenizer_json_golden.py (run by hand).
#include <algorithm>
#include <functional>
#include <random>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/fingerprint.h"
#include "embed/bert_embedder.h"
#include "embed/bert_tokenizer.h"
#include "embed/t5_embedder.h"
#include "test_embed_util.h"
#include "test_util.h"
#include "text/sentencepiece_json.h"
#include "text/sentencepiece_load.h"
#include "text/special_tokens.h"
#include "text/spiece_tokenizer.h"
#include "text/tokenizer.h"
#include "text/xlmr_tokenizer.h"

using namespace retro;
namespace fs = std::filesystem;

namespace {

fs::path golden() { return test::source_dir() / "tests/reference/golden"; }
fs::path json_dir() { return golden() / "tokenizer_json"; }

// Random strings over letters the tiny models know and do not, white space of several kinds and NFKC-folded forms.
std::vector<std::string> random_texts(int count) {
    const std::vector<std::string> alphabet = {"a", "e", "t", "o", "n", "s", "r", "h", "l", "d", "T", "Q", " ", " ",
                                               "  ", "\t", "\n", "\r\n", ".", ",", "!", "é", "è", "ü", "Å", "ﬁ", "Ａ",
                                               "２", "中", "✓", "😀", "\xc2\xa0", "\xe3\x80\x80", "the", "ing", "re",
                                               "<", "</s>", "<pad>", "<unk>", "<extra_id_0>", "\xcc\x81"};
    std::mt19937 rng(42);
    std::vector<std::string> out;
    for (int i = 0; i < count; ++i) {
        std::string s;
        const int n = static_cast<int>(rng() % 24);
        for (int k = 0; k < n; ++k) s += alphabet[rng() % alphabet.size()];
        out.push_back(s);
    }
    return out;
}

std::string rebuild_error(const fs::path& file, SentencepieceLayout layout) {
    try {
        sentencepiece_model_from_tokenizer_json(file.string(), layout);
    } catch (const UserError& e) {
        return e.what();
    }
    FAIL("accepted: " << file.string());
    return "";
}

// tokenizer.json of `folder` edited by `edit`, written into `tmp` / name.
fs::path edited(const test::TempDir& tmp, const std::string& folder, const std::string& name,
                const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json j = test::golden_json(json_dir() / folder / "tokenizer.json");
    edit(j);
    fs::create_directories(tmp / name);
    const fs::path out = tmp / name / "tokenizer.json";
    test::write_text(out, j.dump());
    return out;
}

}  // namespace

TEST_CASE("tokenizer.json: T5's rebuilt sentencepiece model gives spiece.model's ids and the tokenizers library's") {
    const auto g = test::golden_json(json_dir() / "ids.json");
    const auto texts = g["texts"].get<std::vector<std::string>>();
    const SpieceTokenizer original((golden() / "t5_tiny/v1_0/spiece.model").string());
    const auto randoms = random_texts(3000);
    for (const char* folder : {"t5", "t5_extra", "t5_legacy"}) {
        CAPTURE(folder);
        const SpieceTokenizer rebuilt((json_dir() / folder / "tokenizer.json").string());
        CHECK(rebuilt.eos_id() == 1);
        CHECK(rebuilt.pad_id() == 0);
        CHECK(rebuilt.vocab_size() == (std::string(folder) == "t5_extra" ? 247 : 147));   // <extra_id_*> as control pieces
        const auto& f = g["folders"][folder];
        const auto differ = f["differ"].get<std::vector<std::size_t>>();
        std::size_t agree = 0;
        for (std::size_t i = 0; i < texts.size(); ++i) {
            CAPTURE(texts[i]);
            const std::vector<int> ids = rebuilt.encode(texts[i], 1 << 20);
            CHECK(ids == f["sentencepiece_ids"][i].get<std::vector<int>>());
            if (std::find(differ.begin(), differ.end(), i) == differ.end()) {
                CHECK(ids == f["tokenizers_ids"][i].get<std::vector<int>>());
                ++agree;
            }
        }
        CHECK(agree + differ.size() == texts.size());
        CHECK(agree >= texts.size() - 3);   // the tokenizers library differs on rare white space (docs/embedders.md)
        int mismatches = 0;
        for (const std::string& t : randoms) mismatches += rebuilt.encode(t, 1 << 20) != original.encode(t, 1 << 20);
        CHECK(mismatches == 0);
        CHECK(rebuilt.encode(texts[0], 5) == original.encode(texts[0], 5));   // truncated, then </s>
    }
}

TEST_CASE("tokenizer.json: XLM-R's rebuilt sentencepiece model gives sentencepiece.bpe.model's ids with fairseq's shift") {
    const auto g = test::golden_json(json_dir() / "ids.json");
    const auto texts = g["texts"].get<std::vector<std::string>>();
    const fs::path dir = json_dir() / "xlmr";
    const XlmrTokenizer original((golden() / "xlmr_tiny/sentencepiece.bpe.model").string());
    const XlmrTokenizer rebuilt((dir / "tokenizer.json").string(), SpecialTokens::from_dir(dir.string(), SpecialTokens::fairseq()));
    CHECK(rebuilt.vocab_size() == original.vocab_size());
    CHECK(rebuilt.mask_id() == 301);   // the last entry of tokenizer.json's vocab
    const auto& f = g["folders"]["xlmr"];
    const auto differ = f["differ"].get<std::vector<std::size_t>>();
    CHECK(differ.size() <= 1);   // U+0085 (docs/embedders.md)
    for (std::size_t i = 0; i < texts.size(); ++i) {
        CAPTURE(texts[i]);
        const std::vector<int> ids = rebuilt.encode(texts[i], 1 << 20);
        CHECK(ids == f["sentencepiece_ids"][i].get<std::vector<int>>());
        if (std::find(differ.begin(), differ.end(), i) == differ.end()) CHECK(ids == f["tokenizers_ids"][i].get<std::vector<int>>());
    }
    int mismatches = 0;
    for (const std::string& t : random_texts(3000)) mismatches += rebuilt.encode(t, 1 << 20) != original.encode(t, 1 << 20);
    CHECK(mismatches == 0);
}

TEST_CASE("tokenizer.json: t5 and bert embedders over folders without the sentencepiece file give the golden embeddings") {
    test::TempDir tmp("tokenizer-json-embed");
    {   // T5: config.json and weights of t5_tiny/v1_0, transformers 5's tokenizer files
        const fs::path dir = tmp / "t5";
        fs::create_directories(dir);
        for (const char* f : {"config.json", "model.safetensors"}) fs::copy_file(golden() / "t5_tiny/v1_0" / f, dir / f);
        for (const char* f : {"tokenizer.json", "tokenizer_config.json"}) fs::copy_file(json_dir() / "t5" / f, dir / f);
        const auto t5 = test::golden_json(golden() / "t5_tiny/golden.json");
        const auto texts = t5["texts"].get<std::vector<std::string>>();
        T5Embedder e(T5EmbedderOptions{dir.string(), 64, 4}, nullptr);
        std::vector<float> out(texts.size() * e.dim());
        e.embed_texts(texts, out.data());
        test::check_embeddings(out, golden() / "t5_tiny/v1_0_64.npy", e.dim(), texts, 0.9999, 2e-5);
        // the index records the tokenizer file it read (a folder with spiece.model keeps spiece.model's fingerprint)
        const std::string with_json = e.fingerprint();
        fs::copy_file(golden() / "t5_tiny/v1_0/spiece.model", dir / "spiece.model");
        CHECK(T5Embedder(T5EmbedderOptions{dir.string(), 64, 4}, nullptr).fingerprint() ==
              T5Embedder(T5EmbedderOptions{(golden() / "t5_tiny/v1_0").string(), 64, 4}, nullptr).fingerprint());
        CHECK(with_json != T5Embedder(T5EmbedderOptions{dir.string(), 64, 4}, nullptr).fingerprint());
        // neither file: one line naming spiece.model, with both fixes
        fs::remove(dir / "spiece.model");
        fs::remove(dir / "tokenizer.json");
        try {
            T5Embedder(T5EmbedderOptions{dir.string()}, nullptr);
            FAIL("a t5 folder without a tokenizer was accepted");
        } catch (const UserError& err) {
            const std::string msg = err.what();
            CHECK(msg.find((dir / "spiece.model").string() + ": missing") == 0);
            CHECK(msg.find("tokenizer.json") != std::string::npos);
        }
    }
    {   // XLM-R: xlmr_tiny's config.json and weights; tokenizer_class and model_type name it, and the files alone do
        const fs::path xlmr = golden() / "xlmr_tiny";
        const auto g = test::golden_json(xlmr / "golden.json");
        const auto sentences = g["sentences"].get<std::vector<std::string>>();
        for (bool with_config : {true, false}) {
            CAPTURE(with_config);
            const fs::path dir = tmp / (with_config ? "xlmr" : "xlmr_files");
            fs::create_directories(dir);
            for (const char* f : {"config.json", "model.safetensors"}) fs::copy_file(xlmr / f, dir / f);
            fs::copy_file(json_dir() / "xlmr/tokenizer.json", dir / "tokenizer.json");
            if (with_config) {
                fs::copy_file(json_dir() / "xlmr/tokenizer_config.json", dir / "tokenizer_config.json");
            } else {   // model_type bert: only the Unigram model in tokenizer.json says it is XLM-R's tokenizer
                nlohmann::json c = test::golden_json(xlmr / "config.json");
                c["model_type"] = "bert";
                test::write_text(dir / "config.json", c.dump());
            }
            CHECK(bert_tokenizer_kind(dir.string()) == BertTokenizerKind::XLMR_SENTENCEPIECE);
            CHECK(bert_tokenizer_file(dir.string()) == (dir / "tokenizer.json").string());
            BertEmbedderOptions o;
            o.model_dir = dir.string();
            o.max_length = g["max_length"].get<int>();
            o.batch = 5;
            BertEmbedder e(o, nullptr);
            for (std::size_t i = 0; i < sentences.size(); ++i) {
                CAPTURE(sentences[i]);
                CHECK(e.encode_text(sentences[i]) == g["ids"][i].get<std::vector<int>>());
            }
            if (!with_config) continue;   // positions differ for model_type bert: the ids are the point
            std::vector<float> out(sentences.size() * e.dim());
            e.embed_texts(sentences, out.data());
            test::check_embeddings(out, xlmr / "embeddings.npy", e.dim(), sentences, 0.9999, 2e-5);
            const std::string want = fingerprint_file((dir / "tokenizer.json").string()) + " xlm-roberta";
            CHECK(e.to_json()["tokenizer_fingerprint"] == fingerprint_bytes(want.data(), want.size()));
        }
    }
}

TEST_CASE("tokenizer.json: the pre-tokenizer, post-processor, normaliser rules and byte fallback are not read, as transformers 5") {
    // transformers 5's T5Tokenizer keeps the vocabulary, the character map and the added tokens, and builds the rest
    test::TempDir tmp("tokenizer-json-ignored");
    const SpieceTokenizer plain((json_dir() / "t5/tokenizer.json").string());
    const auto edit = [&](const std::string& name, const std::function<void(nlohmann::json&)>& f) {
        const fs::path file = edited(tmp, "t5", name, f);
        fs::copy_file(json_dir() / "t5/tokenizer_config.json", file.parent_path() / "tokenizer_config.json");
        return SpieceTokenizer(file.string());
    };
    const std::vector<SpieceTokenizer> variants = [&] {
        std::vector<SpieceTokenizer> v;
        v.push_back(edit("rules", [](nlohmann::json& j) {   // transformers 4.x's converter form with Strip
            j["normalizer"] = {{"type", "Sequence"},
                               {"normalizers", {j["normalizer"], {{"type", "Strip"}, {"strip_left", false}, {"strip_right", true}},
                                                {{"type", "Lowercase"}}}}};
        }));
        v.push_back(edit("metaspace", [](nlohmann::json& j) {   // Metaspace alone, prepend_scheme never
            j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "\u2581"}, {"prepend_scheme", "never"}, {"split", true}};
        }));
        v.push_back(edit("post", [](nlohmann::json& j) { j["post_processor"] = nullptr; }));
        v.push_back(edit("bytes", [](nlohmann::json& j) { j["model"]["byte_fallback"] = true; }));
        return v;
    }();
    for (const std::string& t : random_texts(500))
        for (const SpieceTokenizer& v : variants) CHECK(v.encode(t, 1 << 20) == plain.encode(t, 1 << 20));
    // T5Tokenizer appends tokenizer_config.json's eos_token
    const fs::path eos = edited(tmp, "t5", "eos", [](nlohmann::json&) {});
    nlohmann::json config = test::golden_json(json_dir() / "t5/tokenizer_config.json");
    config["eos_token"] = "<pad>";
    test::write_text(eos.parent_path() / "tokenizer_config.json", config.dump());
    CHECK(SpieceTokenizer(eos.string()).encode("hello", 64).back() == 0);
}

TEST_CASE("tokenizer.json: what a sentencepiece model cannot hold is refused in one line naming the file") {
    test::TempDir tmp("tokenizer-json-refusals");
    const auto same = SentencepieceLayout::same_ids;
    struct Case {
        const char* name;
        const char* folder;
        SentencepieceLayout layout;
        std::function<void(nlohmann::json&)> edit;
        const char* says;
    };
    const std::vector<Case> cases = {
        {"bpe", "t5", same, [](nlohmann::json& j) { j["model"]["type"] = "BPE"; }, "has a BPE model, not Unigram"},
        {"base64", "t5", same, [](nlohmann::json& j) { j["normalizer"]["precompiled_charsmap"] = "AAQ*"; }, "not valid base64"},
        {"unk", "t5", same, [](nlohmann::json& j) { j["model"]["unk_id"] = 100000; }, "has no unk_id inside its vocab"},
        {"entry", "t5", same, [](nlohmann::json& j) { j["model"]["vocab"][5] = "x"; }, "vocab entry 5 that is not [piece, score]"},
        {"score", "t5", same, [](nlohmann::json& j) { j["model"]["vocab"][5][1] = 1e300; }, "vocab entry 5 that is not [piece, score] with a finite float score"},
        {"not_fairseq", "t5", SentencepieceLayout::fairseq, [](nlohmann::json&) {},
         "does not start its vocab with fairseq's <s> <pad> </s> <unk>"},
    };
    for (const Case& c : cases) {
        CAPTURE(c.name);
        const fs::path file = edited(tmp, c.folder, c.name, c.edit);
        const std::string msg = rebuild_error(file, c.layout);
        CHECK(msg.find(file.string() + ": ") == 0);
        CHECK(msg.find(c.says) != std::string::npos);
        CHECK(msg.find('\n') == std::string::npos);
    }
    // a duplicate piece: sentencepiece's own refusal, naming the file
    const fs::path dup = edited(tmp, "t5", "duplicate", [](nlohmann::json& j) { j["model"]["vocab"][6][0] = j["model"]["vocab"][5][0]; });
    try {
        SpieceTokenizer t(dup.string());
        FAIL("a vocabulary with a duplicate piece was accepted");
    } catch (const UserError& e) {
        CHECK(std::string(e.what()).find(dup.string() + ": cannot load sentencepiece model") == 0);
    }
    // a piece the trie builder cannot hold (a lone NUL: "zero-length key") is a UserError too, not the library's exception
    const fs::path nul = edited(tmp, "t5", "nul", [](nlohmann::json& j) { j["model"]["vocab"][7][0] = std::string(1, '\0'); });
    try {
        SpieceTokenizer t(nul.string());
    } catch (const UserError& e) {
        CHECK(std::string(e.what()).find(nul.string() + ": ") == 0);
    }
    CHECK(tokenizer_json_is_unigram((json_dir() / "t5/tokenizer.json").string()));
    CHECK_FALSE(tokenizer_json_is_unigram((tmp / "bpe/tokenizer.json").string()));
    CHECK_FALSE(tokenizer_json_is_unigram((tmp / "absent.json").string()));
}

TEST_CASE("sentencepiece models: a damaged precompiled character map is refused before libsentencepiece walks it") {
    // Debian's libsentencepiece walks the map's trie and reads its replacement strings without bounds checks (newer
    // sentencepiece releases check them): make_tokenizer_json_golden.py damages t5_tiny's map in three ways
    const fs::path broken = json_dir() / "broken";
    int refused = 0;
    for (const char* name : {"value_past_end.model", "root_past_end.model", "trie_size_small.model"}) {
        CAPTURE(name);
        const fs::path file = broken / name;
        for (int kind = 0; kind < 2; ++kind) {   // the t5 embedder's tokenizer, the database's
            try {
                if (kind == 0) SpieceTokenizer t(file.string());
                else Tokenizer t(file.string());
                FAIL("a damaged character map was loaded");
            } catch (const UserError& e) {
                const std::string msg = e.what();
                CHECK(msg.find(file.string() + ": ") == 0);
                CHECK(msg.find('\n') == std::string::npos);
                refused += msg.find("broken normalizer character map") != std::string::npos;
            }
        }
    }
    CHECK(refused == 6);
    {   // a protocol-buffer group (field 100, empty) before the damaged map: protobuf skips it, so the check must not
        test::TempDir tmp("sentencepiece-group");
        const fs::path grouped = tmp / "spiece.model";
        test::write_text(grouped, std::string("\xa3\x06\xa4\x06", 4) + test::read_text(broken / "root_past_end.model"));
        try {
            SpieceTokenizer t(grouped.string());
            FAIL("a damaged map behind a protobuf group was loaded");
        } catch (const UserError& e) {
            CHECK(std::string(e.what()).find(grouped.string() + ": is not a sentencepiece model RetroKit can check") == 0);
        }
    }   // Debian's library segfaults on root_past_end and reads freed memory on value_past_end (checked under ASan)
    // the genuine maps pass: the tiny models' (a small rule set; XLM-R's full nmt_nfkc) and the rebuilt tokenizer.json
    for (const fs::path& ok : {golden() / "t5_tiny/v1_0/spiece.model", golden() / "xlmr_tiny/sentencepiece.bpe.model"})
        CHECK_NOTHROW(sentencepiece_model_bytes(ok.string()));
    const std::string rebuilt = sentencepiece_model_from_tokenizer_json((json_dir() / "xlmr/tokenizer.json").string(),
                                                                        SentencepieceLayout::fairseq);
    CHECK_NOTHROW(sentencepiece_model_check("xlmr", rebuilt));
    CHECK(precompiled_charsmap_problem("") == "");
    CHECK(precompiled_charsmap_problem(std::string("\x08\x00\x00\x00\x01\x00\x00\x00", 8)) == "");   // sentencepiece refuses it itself
    CHECK(precompiled_charsmap_problem(std::string("\x04\x00\x00\x00\x00\xfc\xff\x7f\x00", 9)) == "its trie reaches past its end");
}
