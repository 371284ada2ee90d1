// bert embedder, the families beyond BERT: tiny random MPNet, XLM-RoBERTa and RoBERTa checkpoints against
// transformers (positions, relative-position bias, their tokenizers' ids), RoBERTa on Unicode 15-16 text, and a BERT
// model over XLM-R's sentencepiece vocabulary. Golden files: tests/reference/make_bert_golden.py (run by hand).
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

constexpr double MIN_COSINE = test::BERT_MIN_COSINE;
constexpr double MAX_ABS = test::BERT_MAX_ABS;
using test::bert_refusal;
using test::copy_with_config;
std::filesystem::path tiny_dir() { return test::bert_tiny_dir(); }

}  // namespace

TEST_CASE("bert: a tiny random MPNetModel (all-mpnet-base-v2's form) matches transformers and sentence-transformers' pooling") {
    // tests/reference/make_bert_golden.py --only mpnet_tiny: positions from 2, a relative-position bias in every layer,
    // <s> ... </s> around the text, a sentence-transformers folder (mean pooling, Normalize)
    const fs::path dir = test::source_dir() / "tests/reference/golden/mpnet_tiny";
    auto golden = test::golden_json(dir / "golden.json");
    auto sentences = golden["sentences"].get<std::vector<std::string>>();
    const int max_length = golden["max_length"].get<int>();
    BertEmbedderOptions o;
    o.model_dir = dir.string();
    o.max_length = max_length;
    o.batch = 6;   // several batches of mixed lengths: the bias offsets of shorter sequences inside a longer batch
    BertEmbedder e(o, nullptr);
    REQUIRE(e.dim() == 32);
    CHECK(e.model().config().mpnet);
    CHECK(e.model().config().max_tokens() == 128);
    CHECK(e.wordpiece().token(e.wordpiece().cls_id()) == "<s>");
    CHECK(e.wordpiece().token(e.wordpiece().sep_id()) == "</s>");
    // the ids of BertTokenizer given MPNet's specials; the fast MPNetTokenizer agrees but where Python's str.lower()
    // and the tokenizers crate differ (final sigma: recorded by the script)
    const auto disagree = golden["fast_tokenizer_disagrees_on"].get<std::vector<std::size_t>>();
    for (std::size_t i = 0; i < sentences.size(); ++i) {
        CAPTURE(sentences[i]);
        const std::vector<int> ids = e.wordpiece().encode(sentences[i], max_length);
        CHECK(ids == golden["ids"][i].get<std::vector<int>>());
        if (std::find(disagree.begin(), disagree.end(), i) == disagree.end())
            CHECK(ids == golden["fast_ids"][i].get<std::vector<int>>());
    }
    std::vector<float> out(sentences.size() * e.dim());
    e.embed_texts(sentences, out.data());
    const double worst = test::check_embeddings(out, dir / "embeddings_uncased.npy", e.dim(), sentences, MIN_COSINE, MAX_ABS);
    MESSAGE("mpnet_tiny: min cosine " << worst);
    // MPNet's specials enter the tokenizer fingerprint; BERT's keeps the form indices built before 2026-12-02 recorded
    CHECK(e.tokenizer_fingerprint() != fingerprint_bytes(nullptr, 0));
    const std::string bert_form = fingerprint_file((tiny_dir() / "vocab.txt").string()) + " strip_accents=unset tokenize_chinese_chars=true";
    CHECK(bert_tokenizer_fingerprint(tiny_dir().string()) == fingerprint_bytes(bert_form.data(), bert_form.size()));
    const std::string mpnet_plain = fingerprint_file((dir / "vocab.txt").string()) + " strip_accents=unset tokenize_chinese_chars=true";
    CHECK(e.tokenizer_fingerprint() != fingerprint_bytes(mpnet_plain.data(), mpnet_plain.size()));
    {   // the tokenizer as transformers 5 saves it (tokenizer.json with its added tokens, no vocab.txt): the same ids
        test::TempDir fast("mpnet-fast");
        for (const char* f : {"config.json", "model.safetensors"}) fs::copy_file(dir / f, fast / f);
        for (const char* f : {"tokenizer.json", "tokenizer_config.json"}) fs::copy_file(dir / "fast" / f, fast / f);
        BertEmbedderOptions f = o;
        f.model_dir = fast.path.string();
        BertEmbedder ef(f, nullptr);
        for (std::size_t i = 0; i < sentences.size(); ++i) {
            CAPTURE(sentences[i]);
            CHECK(ef.wordpiece().encode(sentences[i], max_length) == golden["ids"][i].get<std::vector<int>>());
        }
        CHECK(ef.tokenizer_fingerprint() != e.tokenizer_fingerprint());   // another vocabulary file
    }
    {   // MPNet's special names are its defaults where the folder has no tokenizer_config.json
        test::TempDir bare("mpnet-bare");
        for (const char* f : {"config.json", "model.safetensors", "vocab.txt"}) fs::copy_file(dir / f, bare / f);
        BertEmbedderOptions b = o;
        b.model_dir = bare.path.string();
        b.lower_case = 1;   // (without tokenizer_config.json the case is guessed from the vocabulary: cased here)
        BertEmbedder eb(b, nullptr);
        CHECK(eb.wordpiece().encode(sentences[20], max_length) == golden["ids"][20].get<std::vector<int>>());
    }
    // positions 0 and 1 are never a token's: 128 tokens fill max_position_embeddings 130
    o.max_length = 129;
    CHECK(bert_refusal(o).find("--max-length: is 129, the model allows 128 tokens") == 0);
    o.max_length = 128;
    o.device = "cuda";
    CHECK(bert_refusal(o).find("--device cuda: the CUDA encoder has no relative-position bias") == 0);
    // transformers' MPNetEncoder reads 32 buckets whatever the config says: a smaller table cannot be followed
    test::TempDir few("mpnet-buckets");
    BertEmbedderOptions c = o;
    c.device = "cpu";
    c.model_dir = copy_with_config(few, dir, "relative_attention_num_buckets", 16).string();
    CHECK(bert_refusal(c).find("relative_attention_num_buckets is 16") != std::string::npos);
}

TEST_CASE("bert: a tiny random XLMRobertaModel (multilingual-e5's form) with its sentencepiece tokenizer matches transformers") {
    // tests/reference/make_bert_golden.py --only xlmr_tiny: fairseq's ids around a unigram sentencepiece model, positions
    // from pad_token_id + 1, BERT's layers under BERT's names
    const fs::path dir = test::source_dir() / "tests/reference/golden/xlmr_tiny";
    auto golden = test::golden_json(dir / "golden.json");
    auto sentences = golden["sentences"].get<std::vector<std::string>>();
    const int max_length = golden["max_length"].get<int>();
    BertEmbedderOptions o;
    o.model_dir = dir.string();
    o.max_length = max_length;
    o.batch = 5;
    BertEmbedder e(o, nullptr);
    REQUIRE(e.dim() == 32);
    CHECK(e.model().config().model_type == "xlm-roberta");
    CHECK(e.model().config().max_tokens() == 128);
    int unknown = 0;
    for (std::size_t i = 0; i < sentences.size(); ++i) {
        CAPTURE(sentences[i]);
        const std::vector<int> ids = e.encode_text(sentences[i]);
        CHECK(ids == golden["ids"][i].get<std::vector<int>>());
        if (golden["transformers_ids"].is_array()) CHECK(ids == golden["transformers_ids"][i].get<std::vector<int>>());
        unknown += static_cast<int>(std::count(ids.begin(), ids.end(), XlmrTokenizer::kUnk));
    }
    CHECK(unknown > 0);   // characters the model does not cover reach <unk>, as sentencepiece's id 0 does
    CHECK_THROWS_AS(e.wordpiece(), InternalError);
    std::vector<float> out(sentences.size() * e.dim());
    e.embed_texts(sentences, out.data());
    MESSAGE("xlmr_tiny: min cosine " << test::check_embeddings(out, dir / "embeddings.npy", e.dim(), sentences, MIN_COSINE, MAX_ABS));
    // the index records the sentencepiece model's fingerprint
    const nlohmann::json j = e.to_json();
    const std::string want = fingerprint_file((dir / "sentencepiece.bpe.model").string()) + " xlm-roberta";
    CHECK(j["tokenizer_fingerprint"] == fingerprint_bytes(want.data(), want.size()));
    CHECK(j["lower_case"] == false);
    CHECK(make_bert_embedder_from_json(j, nullptr)->dim() == 32);
    {   // another sentencepiece model in the folder: the index refuses it before the model loads
        test::TempDir swapped("xlmr-swap");
        for (const char* f : {"config.json", "model.safetensors", "tokenizer_config.json"}) fs::copy_file(dir / f, swapped / f);
        std::string spm = test::read_text(dir / "sentencepiece.bpe.model");
        spm[spm.size() / 2] ^= 1;   // a score's low bit: still a loadable model
        test::write_text(swapped / "sentencepiece.bpe.model", spm);
        nlohmann::json moved = j;
        moved["model"] = swapped.path.string();
        try {
            make_bert_embedder_from_json(moved, nullptr);
            FAIL("a changed sentencepiece.bpe.model was accepted");
        } catch (const UserError& err) {
            CHECK(std::string(err.what()).find("sentencepiece.bpe.model: differs from the vocabulary the index was built with") !=
                  std::string::npos);
        }
        fs::remove(swapped / "sentencepiece.bpe.model");
        BertEmbedderOptions m = o;
        m.model_dir = swapped.path.string();
        CHECK(bert_refusal(m).find("sentencepiece.bpe.model: missing (a bert model folder needs it)") != std::string::npos);
    }
    o.max_length = 129;
    CHECK(bert_refusal(o).find("--max-length: is 129, the model allows 128 tokens") == 0);
    o.max_length = 128;
    o.device = "cuda";   // fairseq's positions run on the CUDA encoder too (its golden case below); here only the device's refusal
    if (cuda_device_count() == 0) CHECK(bert_refusal(o).find(kCudaBuilt ? "no CUDA device found" : "built without CUDA") != std::string::npos);
}

TEST_CASE("bert: a tiny random RobertaModel (all-distilroberta-v1's form) with its byte-level BPE matches transformers") {
    // tests/reference/make_bert_golden.py --only roberta_tiny: GPT-2's pre-tokeniser and byte-level BPE, <mask> taking
    // the space before it, add_prefix_space both ways, positions from pad_token_id + 1
    const fs::path dir = test::source_dir() / "tests/reference/golden/roberta_tiny";
    auto golden = test::golden_json(dir / "golden.json");
    auto sentences = golden["sentences"].get<std::vector<std::string>>();
    BertEmbedderOptions o;
    o.model_dir = dir.string();
    o.max_length = golden["max_length"].get<int>();
    o.batch = 9;
    BertEmbedder e(o, nullptr);
    CHECK(e.tokenizer_kind() == BertTokenizerKind::ROBERTA_BPE);
    CHECK(e.model().config().model_type == "roberta");
    for (std::size_t i = 0; i < sentences.size(); ++i) {
        CAPTURE(sentences[i]);
        CHECK(e.encode_text(sentences[i]) == golden["ids"][i].get<std::vector<int>>());
    }
    std::vector<float> out(sentences.size() * e.dim());
    e.embed_texts(sentences, out.data());
    MESSAGE("roberta_tiny: min cosine " << test::check_embeddings(out, dir / "embeddings.npy", e.dim(), sentences, MIN_COSINE, MAX_ABS));
    const std::string plain = bert_tokenizer_fingerprint(dir.string());
    {   // add_prefix_space true (tokenizer_config.json): a space before each run of text that lacks one
        test::TempDir prefixed("roberta-prefix");
        for (const char* f : {"config.json", "model.safetensors", "vocab.json", "merges.txt"}) fs::copy_file(dir / f, prefixed / f);
        nlohmann::json config = nlohmann::json::parse(test::read_text(dir / "tokenizer_config.json"));
        config["add_prefix_space"] = true;
        test::write_text(prefixed / "tokenizer_config.json", config.dump());
        BertEmbedderOptions p = o;
        p.model_dir = prefixed.path.string();
        BertEmbedder ep(p, nullptr);
        for (std::size_t i = 0; i < sentences.size(); ++i) {
            CAPTURE(sentences[i]);
            CHECK(ep.encode_text(sentences[i]) == golden["ids_prefix_space"][i].get<std::vector<int>>());
        }
        CHECK(ep.tokenizer_fingerprint() != plain);   // the option changes the ids: the index records it
        fs::remove(prefixed / "merges.txt");
        CHECK(bert_refusal(p).find("merges.txt: missing (a bert model folder needs it)") != std::string::npos);
    }
    o.device = "cuda";
    if (cuda_device_count() == 0) CHECK(bert_refusal(o).find(kCudaBuilt ? "no CUDA device found" : "built without CUDA") != std::string::npos);
}

TEST_CASE("bert: RoBERTa's pre-tokeniser knows the letters and numbers of Unicode 15 and 16, as the tokenizers library") {
    // tests/reference/make_bert_golden.py --only roberta_unicode: the tables came from Python 3.11's unicodedata (14.0)
    // before session 41 and split U+13E2C or U+1C89 from the letters around them (tests/reference/make_regex_unicode.py)
    const fs::path dir = test::source_dir() / "tests/reference/golden/roberta_tiny";
    const auto golden = test::golden_json(dir / "unicode16.json");
    const RobertaBpeTokenizer tok(dir.string());
    for (std::size_t i = 0; i < golden["texts"].size(); ++i) {
        CAPTURE(i);
        CHECK(tok.encode(golden["texts"][i].get<std::string>(), 128) == golden["ids"][i].get<std::vector<int>>());
    }
    CHECK(regex_unicode::is_letter(0x1C89));    // Unicode 16: Cyrillic capital tje
    CHECK(regex_unicode::is_letter(0x2EBF0));   // CJK extension I
    CHECK(regex_unicode::is_number(0x1E4F0));   // Nag Mundari digit zero (15.0)
    CHECK(!regex_unicode::is_letter(0x0558));   // unassigned there
}

TEST_CASE("bert: a BERT checkpoint over XLM-R's sentencepiece vocabulary (paraphrase-multilingual-MiniLM-L12-v2's form)") {
    // BertModel layers and positions, XLMRobertaTokenizer named by tokenizer_config.json (or sentencepiece.bpe.model
    // without vocab.txt): the ids are xlmr_tiny's, the encoder bert_tiny's (each held to transformers by its own golden)
    const fs::path xlmr = test::source_dir() / "tests/reference/golden/xlmr_tiny";
    auto golden = test::golden_json(xlmr / "golden.json");
    auto sentences = golden["sentences"].get<std::vector<std::string>>();
    for (const bool named : {true, false}) {
        CAPTURE(named);
        test::TempDir dir("bert-xlmr-vocab");
        for (const char* f : {"config.json", "model.safetensors"}) fs::copy_file(tiny_dir() / f, dir / f);
        fs::copy_file(xlmr / "sentencepiece.bpe.model", dir / "sentencepiece.bpe.model");
        if (named) test::write_text(dir / "tokenizer_config.json", R"({"tokenizer_class": "XLMRobertaTokenizer", "model_max_length": 512})");
        BertEmbedderOptions o;
        o.model_dir = dir.path.string();
        BertEmbedder e(o, nullptr);
        CHECK(e.model().config().model_type == "bert");
        CHECK(e.model().config().max_tokens() == e.model().config().max_position);   // BERT's positions from 0
        std::vector<std::vector<int>> ids;
        for (std::size_t i = 0; i < sentences.size(); ++i) {
            ids.push_back(e.encode_text(sentences[i]));
            CHECK(ids.back() == golden["ids"][i].get<std::vector<int>>());
        }
        std::vector<float> out(sentences.size() * e.dim()), want(out.size());
        e.embed_texts(sentences, out.data());
        std::vector<std::int32_t> flat;
        std::vector<std::int64_t> offsets{0};
        for (const auto& seq : ids) {
            flat.insert(flat.end(), seq.begin(), seq.end());
            offsets.push_back(static_cast<std::int64_t>(flat.size()));
        }
        e.model().forward_mean(flat.data(), offsets.data(), static_cast<int>(ids.size()), want.data());
        for (std::size_t s = 0; s < ids.size(); ++s) {
            double norm = 0, dot = 0, self = 0;
            for (int k = 0; k < e.dim(); ++k) norm += double(want[s * e.dim() + k]) * want[s * e.dim() + k];
            for (int k = 0; k < e.dim(); ++k) {
                dot += out[s * e.dim() + k] * want[s * e.dim() + k] / std::sqrt(norm);
                self += double(out[s * e.dim() + k]) * out[s * e.dim() + k];
            }
            CHECK(dot == doctest::Approx(1.0).epsilon(1e-6));
            CHECK(self == doctest::Approx(1.0).epsilon(1e-6));
        }
    }
}
