// bert embedder, prompts (sentence-transformers' prompts, e5's "query: "): from --prompt or the model's default,
// held to sentence-transformers' encode(prompt=...), recorded in an index and refused on a resume with another one.
// Golden files: tests/reference/make_bert_golden.py --only st_prompt (run by hand).
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

}  // namespace

TEST_CASE("bert: a prompt (sentence-transformers' prompts: e5's \"passage: \") goes before every text, from --prompt or the model's default") {
    const fs::path mpnet = test::source_dir() / "tests/reference/golden/mpnet_tiny";
    test::TempDir dir("bert-prompt");
    for (const auto& f : fs::recursive_directory_iterator(mpnet)) {
        const fs::path to = dir / fs::relative(f.path(), mpnet);
        if (f.is_directory()) fs::create_directories(to);
        else fs::copy_file(f.path(), to);
    }
    test::write_text(dir / "config_sentence_transformers.json",
                     R"({"prompts": {"query": "query: ", "passage": "passage: "}, "default_prompt_name": "passage"})");
    const std::vector<std::string> texts = {"The quick brown fox", "naïve café", "a"};
    BertEmbedderOptions o;
    o.model_dir = dir.path.string();
    BertEmbedder by_default(o, nullptr);
    CHECK(by_default.prompt() == "passage: ");
    CHECK(by_default.to_json()["prompt"] == "passage: ");
    o.prompt = "";
    BertEmbedder none(o, nullptr);
    CHECK(none.prompt().empty());
    CHECK(!none.to_json().contains("prompt"));   // as every index before prompts
    std::vector<std::string> prefixed;
    for (const auto& t : texts) prefixed.push_back("passage: " + t);
    CHECK(by_default.encode_text(texts[0]) == none.encode_text(prefixed[0]));
    std::vector<float> a(texts.size() * 32), b(texts.size() * 32), c(texts.size() * 32);
    by_default.embed_texts(texts, a.data());
    none.embed_texts(prefixed, b.data());
    CHECK(a == b);
    none.embed_texts(texts, c.data());
    CHECK(a != c);
    // an index rebuilds the embedder with its recorded prompt, not the folder's default of today
    nlohmann::json j = none.to_json();
    CHECK(dynamic_cast<const BertEmbedder&>(*make_bert_embedder_from_json(j, nullptr)).prompt().empty());
    j = by_default.to_json();
    test::write_text(dir / "config_sentence_transformers.json", R"({"prompts": {"query": "query: "}, "default_prompt_name": "query"})");
    CHECK(dynamic_cast<const BertEmbedder&>(*make_bert_embedder_from_json(j, nullptr)).prompt() == "passage: ");
    // refusals: a default the prompts lack; a prompt that leaves no room; a pool that leaves the prompt out
    test::write_text(dir / "config_sentence_transformers.json", R"({"prompts": {}, "default_prompt_name": "query"})");
    o.prompt.reset();
    CHECK(bert_refusal(o).find("config_sentence_transformers.json: names the default prompt \"query\"") != std::string::npos);
    o.prompt = "a very long prompt indeed";
    o.max_length = 6;
    CHECK_MESSAGE(bert_refusal(o).find("--prompt: is 18 tokens, which leave no room for a chunk's text in --max-length 6") == 0, bert_refusal(o));
    o.max_length = 128;
    nlohmann::json pooling = nlohmann::json::parse(test::read_text(dir / "1_Pooling" / "config.json"));
    pooling["include_prompt"] = false;
    test::write_text(dir / "1_Pooling" / "config.json", pooling.dump());
    CHECK(bert_refusal(o).find("leaves the prompt's tokens out of the pool (include_prompt false)") != std::string::npos);
    o.prompt = "";
    CHECK(bert_refusal(o) == "(accepted)");
}

// A prompt of P pieces in --max-length L leaves L - 2 - P pieces of text ([CLS] and [SEP] take two): at L = P + 2
// there is no room, and every chunk would embed as the prompt alone (refused); at L = P + 3 one piece of text fits.
TEST_CASE("bert: a prompt that fills --max-length but for [CLS] and [SEP] is refused - one position more is room for text") {
    const fs::path mpnet = test::source_dir() / "tests/reference/golden/mpnet_tiny";
    BertEmbedderOptions o;
    o.model_dir = mpnet.string();
    o.prompt = "";
    const BertEmbedder plain(o, nullptr);
    const std::string prompt = "a very long prompt indeed";
    const int pieces = static_cast<int>(plain.encode_text(prompt).size()) - 2;   // [CLS] prompt [SEP]
    REQUIRE(pieces > 2);
    o.prompt = prompt;
    o.max_length = pieces + 2;
    CHECK(bert_refusal(o).find("leave no room for a chunk's text in --max-length " + std::to_string(pieces + 2)) != std::string::npos);
    o.max_length = pieces + 3;
    REQUIRE(bert_refusal(o) == "(accepted)");
    const BertEmbedder tight(o, nullptr);
    const auto ids = tight.encode_text("fox");
    CHECK(ids.size() == static_cast<std::size_t>(pieces + 3));   // [CLS] prompt, one piece of text, [SEP]
    CHECK(ids != plain.encode_text(prompt));
}

TEST_CASE("bert: with a prompt, MPNet, XLM-R and RoBERTa embed as sentence-transformers' encode(prompt=...)") {
    // tests/reference/make_bert_golden.py --only st_prompt: sentence-transformers 6.3 itself over the three tiny folders
    for (const char* name : {"mpnet_tiny", "xlmr_tiny", "roberta_tiny"}) {
        CAPTURE(name);
        const fs::path dir = test::source_dir() / "tests/reference/golden" / name;
        const auto golden = test::golden_json(dir / "st_prompt.json");
        const auto texts = golden["texts"].get<std::vector<std::string>>();
        BertEmbedderOptions o;
        o.model_dir = dir.string();
        o.max_length = golden["max_length"].get<int>();
        o.prompt = golden["prompt"].get<std::string>();
        BertEmbedder e(o, nullptr);
        std::vector<float> out(texts.size() * e.dim());
        e.embed_texts(texts, out.data());
        MESSAGE(std::string(name) << " with a prompt: min cosine "
                     << test::check_embeddings(out, dir / "embeddings_st_prompt.npy", e.dim(), texts, MIN_COSINE, MAX_ABS));
    }
}

TEST_CASE("bert: retro-index --prompt is recorded, a resume with another prompt is refused, and other embedders refuse it") {
    test::TempDir tmp("bert-prompt-cli");
    const fs::path db = test::chunk_test_db(tmp, 17);
    const std::string model = (test::source_dir() / "tests/reference/golden/mpnet_tiny").string();
    const std::string base = db.string() + " --embedder bert --model " + model + " --index Flat --quiet --out " + (tmp / "idx").string();
    auto r = test::run_tool("retro-index", base + " --prompt 'query: '");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    CHECK(json_read_file((tmp / "idx" / "manifest.json").string())["embedder"]["prompt"] == "query: ");
    r = test::run_tool("retro-index", base + " --prompt 'passage: ' --resume");
    CHECK(r.exit_code == 2);
    CHECK_MESSAGE(r.err.find("the prompt is \"passage: \", the folder's \"query: \"") != std::string::npos, r.err);
    r = test::run_tool("retro-index", base + " --prompt 'query: ' --resume");
    CHECK_MESSAGE(r.exit_code == 0, r.err);
    r = test::run_tool("retro-index", db.string() + " --dim 16 --prompt 'query: ' --out " + (tmp / "bow").string());
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("--prompt: applies to --embedder bert only") != std::string::npos);
}

TEST_CASE("bert: retro-index query embeds the query with the model's query prompt, as sentence-transformers' encode_query") {
    // e5's form: prompts {"query": "query: ", "passage": "passage: "}, the chunks embedded with the default "passage: "
    test::TempDir tmp("bert-query-prompt");
    const fs::path db = test::chunk_test_db(tmp, 19), model = tmp / "model";
    fs::copy(test::source_dir() / "tests/reference/golden/mpnet_tiny", model, fs::copy_options::recursive);
    test::write_text(model / "config_sentence_transformers.json",
                     R"({"prompts": {"query": "query: ", "passage": "passage: "}, "default_prompt_name": "passage"})");
    const fs::path idx = tmp / "idx";
    auto r = test::run_tool("retro-index", db.string() + " --embedder bert --model " + model.string() + " --index Flat --quiet --out " + idx.string());
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    CHECK(json_read_file((idx / "manifest.json").string())["embedder"]["prompt"] == "passage: ");
    const auto query = [&](const std::string& extra) {
        const auto q = test::run_tool("retro-index", "query " + idx.string() + " 'the data of a chunk' --k 3 --json" + extra);
        REQUIRE_MESSAGE(q.exit_code == 0, q.err);
        return nlohmann::json::parse(q.out);
    };
    const nlohmann::json by_default = query(""), given = query(" --prompt 'query: '"), none = query(" --prompt ''"),
                         as_chunks = query(" --prompt 'passage: '");
    CHECK(by_default["prompt"] == "query: ");
    CHECK(given["results"] == by_default["results"]);   // the same prompt, the same scores
    CHECK_FALSE(none.contains("prompt"));
    CHECK(as_chunks["prompt"] == "passage: ");
    CHECK(none["results"][0]["score"] != by_default["results"][0]["score"]);
    CHECK(as_chunks["results"][0]["score"] != by_default["results"][0]["score"]);
    // without a "query" prompt in the model: the chunks' prompt, as before
    test::write_text(model / "config_sentence_transformers.json", R"({"prompts": {"passage": "passage: "}, "default_prompt_name": "passage"})");
    CHECK(query("")["results"] == as_chunks["results"]);
    // other indices refuse --prompt in one line
    r = test::run_tool("retro-index", db.string() + " --kind bm25 --quiet --out " + (tmp / "bm25").string());
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    r = test::run_tool("retro-index", "query " + (tmp / "bm25").string() + " 'the data' --prompt 'query: '");
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("--prompt: puts a text before a bert index's queries; this is a bm25 index") != std::string::npos);
}
