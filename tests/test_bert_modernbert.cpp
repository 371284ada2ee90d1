// ModernBERT checkpoints in the bert embedder (embed/modernbert_model.cpp): a tiny random ModernBertModel with a
// byte-level BPE tokenizer in tokenizer.json alone (ModernBERT's form, a generic fast tokenizer: NFC, ByteLevel,
// "[CLS] $A [SEP]") held to transformers 5.24 and sentence-transformers 6.3, with and without biases, its config in
// transformers 5's and 4's forms; mutants of the window and the rotary base must fail; what the embedder cannot follow
// (rope scaling, another normaliser, the CUDA encoder) is refused in one line.
// Golden files: tests/reference/make_modernbert_golden.py (run by hand).
#include <filesystem>

#include "core/cuda_device.h"
#include "embed/bert_embedder.h"
#include "test_bert_util.h"
#include "test_embed_util.h"

using namespace retro;
namespace fs = std::filesystem;

namespace {

fs::path golden_dir() { return test::source_dir() / "tests/reference/golden/modernbert_tiny"; }

BertEmbedderOptions options(const fs::path& dir) {
    BertEmbedderOptions o;
    o.model_dir = dir.string();
    o.max_length = 256;
    o.batch = 3;
    return o;
}

// `dir`'s embeddings of `sentences` (the mutants' measure against the golden model's).
std::vector<float> embed(const fs::path& dir, const std::vector<std::string>& sentences) {
    BertEmbedder e(options(dir), nullptr);
    std::vector<float> out(sentences.size() * e.dim());
    e.embed_texts(sentences, out.data());
    return out;
}

double max_abs_difference(const std::vector<float>& a, const std::vector<float>& b) {
    double m = 0;
    for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, static_cast<double>(std::abs(a[i] - b[i])));
    return m;
}

// `from`'s files copied into tmp / name with config[key] = value (null: the key removed).
fs::path with_config(const test::TempDir& tmp, const fs::path& from, const std::string& name, const std::string& key,
                     const nlohmann::json& value) {
    const fs::path dir = tmp / name;
    fs::create_directories(dir);
    for (const char* f : {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"}) fs::copy_file(from / f, dir / f);
    nlohmann::json c = nlohmann::json::parse(test::read_text(dir / "config.json"));
    if (value.is_null()) c.erase(key);
    else c[key] = value;
    test::write_text(dir / "config.json", c.dump(1));
    return dir;
}

}  // namespace

TEST_CASE("bert: tiny random ModernBertModels (rotary, GLU, sliding window) match transformers, their tokenizer transformers' ids") {
    const auto g = test::golden_json(golden_dir() / "golden.json");
    const auto sentences = g["sentences"].get<std::vector<std::string>>();
    for (const char* variant : {".", "bias"}) {
        CAPTURE(variant);
        const fs::path dir = golden_dir() / variant;
        BertEmbedder e(options(dir), nullptr);
        const BertConfig& c = e.model().config();
        CHECK(c.modernbert);
        CHECK(c.sliding_window == 8);
        CHECK(e.dim() == 16);
        // transformers 5's layer_types (global every 3: layers 0 and 3); the bias model's 4.x global_attn_every_n_layers 2
        const std::vector<char> want = std::string(variant) == "." ? std::vector<char>{1, 0, 0, 1} : std::vector<char>{1, 0, 1, 0};
        CHECK(c.layer_global == want);
        CHECK(c.norm_bias == (std::string(variant) == "bias"));
        CHECK(e.tokenizer_kind() == BertTokenizerKind::ROBERTA_BPE);
        for (std::size_t i = 0; i < sentences.size(); ++i) {
            CAPTURE(sentences[i]);
            CHECK(e.encode_text(sentences[i]) == g["ids"][i].get<std::vector<int>>());
        }
        std::vector<float> out(sentences.size() * e.dim());
        e.embed_texts(sentences, out.data());
        MESSAGE(std::string(variant) << ": min cosine "
                        << test::check_embeddings(out, dir / "embeddings.npy", e.dim(), sentences, test::BERT_MIN_COSINE,
                                                  test::BERT_MAX_ABS));
    }
}

TEST_CASE("bert: ModernBERT mutants (no window, another rotary base, the window one wider) move the embeddings") {
    const auto g = test::golden_json(golden_dir() / "golden.json");
    const auto sentences = g["sentences"].get<std::vector<std::string>>();
    test::TempDir tmp("modernbert-mutants");
    const std::vector<float> good = embed(golden_dir(), sentences);
    const struct {
        const char* name;
        const char* key;
        nlohmann::json value;
    } mutants[] = {{"no_window", "local_attention", 1024},
                   {"wider", "local_attention", 18},
                   {"all_global", "layer_types", nlohmann::json::array({"full_attention", "full_attention", "full_attention",
                                                                        "full_attention"})}};
    for (const auto& m : mutants) {
        CAPTURE(m.name);
        CHECK(max_abs_difference(embed(with_config(tmp, golden_dir(), m.name, m.key, m.value), sentences), good) > 1e-3);
    }
    nlohmann::json rope = nlohmann::json::parse(test::read_text(golden_dir() / "config.json"))["rope_parameters"];
    rope["sliding_attention"]["rope_theta"] = 100.0;
    CHECK(max_abs_difference(embed(with_config(tmp, golden_dir(), "theta", "rope_parameters", rope), sentences), good) > 1e-3);
}

TEST_CASE("bert: what the ModernBERT path cannot follow is refused in one line") {
    test::TempDir tmp("modernbert-refusals");
    const auto refusal = [](const fs::path& dir) { return test::bert_refusal(options(dir)); };
    nlohmann::json rope = nlohmann::json::parse(test::read_text(golden_dir() / "config.json"))["rope_parameters"];
    rope["full_attention"]["rope_type"] = "yarn";
    CHECK(refusal(with_config(tmp, golden_dir(), "yarn", "rope_parameters", rope)).find("rope_type is \"yarn\"") != std::string::npos);
    CHECK(refusal(with_config(tmp, golden_dir(), "scaling", "rope_scaling", {{"type", "linear"}, {"factor", 2.0}}))
              .find("has rope_scaling") != std::string::npos);
    CHECK(refusal(with_config(tmp, golden_dir(), "types", "layer_types", nlohmann::json::array({"full_attention"})))
              .find("layer_types is not a list of 4 layer types") != std::string::npos);
    // a tokenizer.json normaliser other than none or NFC
    const fs::path lower = with_config(tmp, golden_dir(), "lowercase", "model_type", "modernbert");
    nlohmann::json tj = nlohmann::json::parse(test::read_text(lower / "tokenizer.json"));
    tj["normalizer"] = {{"type", "Lowercase"}};
    test::write_text(lower / "tokenizer.json", tj.dump());
    const std::string msg = refusal(lower);
    CHECK(msg.find((lower / "tokenizer.json").string() + ": has a Lowercase normalizer") == 0);
    CHECK(msg.find('\n') == std::string::npos);
    BertEmbedderOptions cuda = options(golden_dir());
    cuda.device = "cuda";
    CHECK(test::bert_refusal(cuda).find("--device cuda: the CUDA encoder has no rotary positions") == 0);
}
