// t5 embedder: relative-position buckets, spiece ids and embeddings of tiny random T5 encoders
// (v1.0 relu, v1.1 gated-gelu) and of a sentence-transformers folder (Pooling + Dense + Normalize)
// against transformers / sentence-transformers; a real checkpoint when RETRO_T5_REAL_DIR names one;
// prefixed tensor names; the manifest round trip; bad input (a decoder-only checkpoint, mismatched
// dimensions, missing files) as one line, and exit 2 from retro-index.
// Golden files: tests/reference/make_t5_golden.py (run by hand).
#include <cmath>
#include <cstdlib>
#include <fstream>

#include "core/error.h"
#include "core/npy.h"
#include "core/safetensors.h"
#include "embed/relative_position.h"
#include "embed/t5_embedder.h"
#include "test_chunk_util.h"
#include "test_embed_util.h"
#include "test_util.h"
#include "text/tokenizer.h"

using namespace retro;
namespace fs = std::filesystem;

namespace {

// Tolerances: the same fp32 graph summed in another order. The issue's bar is cosine >= 0.9999;
// each element is also held to MAX_ABS, which a wrong bucket or a missing bias would exceed by far.
constexpr double MIN_COSINE = 0.9999;
constexpr double MAX_ABS = 2e-5;

fs::path golden_dir() { return test::source_dir() / "tests/reference/golden/t5_tiny"; }

// Copies a golden model folder into `to` (recursively).
fs::path copy_model(const std::string& name, const fs::path& to) {
    fs::copy(golden_dir() / name, to, fs::copy_options::recursive);
    return to;
}

// The UserError message of make_t5_embedder on `dir` (fails the test when it succeeds).
std::string load_error(const fs::path& dir) {
    try {
        T5Embedder e(T5EmbedderOptions{dir.string()}, nullptr);
    } catch (const UserError& err) {
        return err.what();
    }
    FAIL("the t5 model folder " << dir.string() << " was accepted");
    return "";
}

std::vector<float> embed(const fs::path& dir, const std::vector<std::string>& texts, int max_length = 64) {
    T5EmbedderOptions o{dir.string(), max_length, 3};
    T5Embedder e(o, nullptr);
    std::vector<float> out(texts.size() * e.dim());
    e.embed_texts(texts, out.data());
    return out;
}

}  // namespace

TEST_CASE("t5: relative position buckets equal transformers' _relative_position_bucket") {
    auto golden = test::golden_json(golden_dir() / "golden.json");
    REQUIRE(golden["buckets"].size() == 2);
    for (const auto& c : golden["buckets"]) {
        const int nb = c["num_buckets"].get<int>(), md = c["max_distance"].get<int>(), from = c["from"].get<int>();
        const auto want = c["buckets"].get<std::vector<int>>();
        int differ = 0;
        for (std::size_t i = 0; i < want.size(); ++i) {
            const int rp = from + static_cast<int>(i);
            CAPTURE(nb);
            CAPTURE(md);
            CAPTURE(rp);
            CHECK(relative_position_bucket(rp, nb, md) == want[i]);
            differ += relative_position_bucket(rp, nb, md) != want[i];
        }
        CHECK(differ == 0);
    }
    // T5's own settings over a long range: monotone in |rp|, the two directions in their own halves.
    for (int rp = 1; rp < 2000; ++rp) {
        CHECK(relative_position_bucket(rp, 32, 128) >= 16);
        CHECK(relative_position_bucket(-rp, 32, 128) < 16);
        CHECK(relative_position_bucket(rp, 32, 128) >= relative_position_bucket(rp - 1, 32, 128) - (rp == 1 ? 16 : 0));
    }
    CHECK(relative_position_bucket(100000, 32, 128) == 31);
    CHECK(relative_position_bucket(0, 32, 128) == 0);
}

TEST_CASE("t5: spiece ids plus </s> equal transformers' T5Tokenizer, truncated or not") {
    auto golden = test::golden_json(golden_dir() / "golden.json");
    SpieceTokenizer tok((golden_dir() / "v1_0/spiece.model").string());
    CHECK(tok.eos_id() == 1);
    CHECK(tok.pad_id() == 0);
    CHECK(test::check_golden_ids(golden, [&](const std::string& t, int n) { return tok.encode(t, n); }) == 20);
}

TEST_CASE("t5: special spellings in the text (</s>, <pad>, <extra_id_N>) take their ids, as transformers 5's T5Tokenizer") {
    // tests/reference/make_tokenizer_json_golden.py: transformers 5.24 on a tokenizer.json with and without T5's 100
    // extra ids and on a folder with spiece.model alone (T5Tokenizer's default: 100 extra ids after the pieces)
    const fs::path json_dir = test::source_dir() / "tests/reference/golden/tokenizer_json";
    const auto g = test::golden_json(json_dir / "ids.json");
    const auto texts = g["special_texts"].get<std::vector<std::string>>();
    test::TempDir tmp("t5-specials");
    fs::create_directories(tmp / "spiece_default");
    fs::copy_file(golden_dir() / "v1_0/spiece.model", tmp / "spiece_default/spiece.model");
    const std::pair<std::string, fs::path> folders[] = {{"t5", json_dir / "t5"},
                                                        {"t5_extra", json_dir / "t5_extra"},
                                                        {"spiece_default", tmp / "spiece_default"}};
    for (const auto& [name, dir] : folders) {
        CAPTURE(name);
        const fs::path file = fs::exists(dir / "spiece.model") ? dir / "spiece.model" : dir / "tokenizer.json";
        SpieceTokenizer tok(file.string());
        const T5SpecialTokens specials = t5_special_tokens(dir.string(), tok, 1000);
        CHECK(specials.tokens.size() == (name == "t5" ? 3u : 103u));
        tok.set_special_tokens(specials.tokens, specials.strip);
        for (std::size_t i = 0; i < texts.size(); ++i) {
            CAPTURE(texts[i]);
            CHECK(tok.encode(texts[i], 1 << 20) == g["special_ids"][name][i].get<std::vector<int>>());
        }
        // ids the model's embeddings do not hold stay text (a tiny model's 147 rows; HF would index past them)
        CHECK(t5_special_tokens(dir.string(), tok, 147).tokens.size() == 3u);
    }
    // the embedder splits them out: "</s>" inside a text is the eos id, not its characters
    T5Embedder e(T5EmbedderOptions{(golden_dir() / "v1_0").string(), 64, 2}, nullptr);
    CHECK(e.tokenizer().encode("a </s> b", 64) == std::vector<int>{15, 1, 47, 1});
}

TEST_CASE("t5: embeddings of tiny random T5 encoders and a sentence-transformers folder match (cosine >= 0.9999)") {
    auto golden = test::golden_json(golden_dir() / "golden.json");
    auto texts = golden["texts"].get<std::vector<std::string>>();
    int cases = 0;
    for (const auto& c : golden["cases"]) {
        const std::string model = c["model"].get<std::string>();
        const int max_length = c["max_length"].get<int>();
        CAPTURE(model);
        CAPTURE(max_length);
        T5Embedder e(T5EmbedderOptions{(golden_dir() / model).string(), max_length, 4}, nullptr);
        CHECK(e.dim() == (model == "st" ? 24 : 32));
        CHECK(e.model().config().gated == (model != "v1_0"));
        CHECK(e.modules().present == (model == "st"));
        std::vector<float> out(texts.size() * e.dim());
        e.embed_texts(texts, out.data());
        test::check_embeddings(out, golden_dir() / c["embeddings"].get<std::string>(), e.dim(), texts, MIN_COSINE, MAX_ABS);
        ++cases;
    }
    CHECK(cases == 6);
}

TEST_CASE("t5: a real checkpoint matches sentence-transformers (RETRO_T5_REAL_DIR)") {
    const char* env = std::getenv("RETRO_T5_REAL_DIR");
    const fs::path gdir = test::source_dir() / "tests/reference/golden/t5_real";
    if (!env || !*env) RETRO_SKIP("RETRO_T5_REAL_DIR not set (a gtr-t5-base or sentence-t5-base folder; see docs/embedders.md)");
    if (!fs::exists(gdir / "golden.json"))
        RETRO_SKIP("no tests/reference/golden/t5_real (run make_t5_golden.py with RETRO_T5_REAL_DIR set)");
    auto golden = test::golden_json(gdir / "golden.json");
    auto texts = golden["texts"].get<std::vector<std::string>>();
    const int max_length = golden["max_length"].get<int>();
    T5Embedder e(T5EmbedderOptions{env, max_length, 8}, nullptr);
    for (std::size_t i = 0; i < texts.size(); ++i) {
        CAPTURE(texts[i]);
        CHECK(e.tokenizer().encode(texts[i], max_length) == golden["ids"][i].get<std::vector<int>>());
    }
    std::vector<float> out(texts.size() * e.dim());
    e.embed_texts(texts, out.data());
    test::check_embeddings(out, gdir / "embeddings.npy", e.dim(), texts, MIN_COSINE, MAX_ABS);
}

TEST_CASE("t5: prefixed tensor names, a seq2seq checkpoint and the old Pooling config give the same embeddings") {
    test::TempDir tmp("t5-prefix");
    const std::vector<std::string> texts = {"The quick brown fox", "short", "crème brûlée"};
    const auto want = embed(golden_dir() / "v1_1", texts);
    fs::path prefixed = copy_model("v1_1", tmp / "prefixed");
    test::rewrite_tensors(prefixed / "model.safetensors", [](const std::string& n) { return "0.auto_model." + n; });
    CHECK(embed(prefixed, texts) == want);
    // T5ForConditionalGeneration: decoder tensors beside the encoder's are ignored.
    fs::path seq2seq = copy_model("v1_1", tmp / "seq2seq");
    {
        std::vector<std::vector<char>> bytes;
        std::vector<TensorToWrite> out;
        SafetensorsFile st((seq2seq / "model.safetensors").string());
        for (const auto& [name, t] : st.tensors()) {
            for (const std::string& n : {name, name.rfind("encoder.", 0) == 0 ? "decoder." + name.substr(8) : std::string()}) {
                if (n.empty()) continue;
                bytes.emplace_back(static_cast<const char*>(t.data), static_cast<const char*>(t.data) + t.bytes);
                out.push_back({n, t.dtype, t.shape, nullptr});
            }
        }
        for (std::size_t i = 0; i < out.size(); ++i) out[i].data = bytes[i].data();
        safetensors_save((tmp / "s2s.safetensors").string(), out);
    }
    fs::rename(tmp / "s2s.safetensors", seq2seq / "model.safetensors");
    CHECK(embed(seq2seq, texts) == want);
    // sentence-transformers 2-5 write pooling_mode_mean_tokens and word_embedding_dimension (GTR, Sentence-T5 do).
    const auto st_want = embed(golden_dir() / "st", texts);
    fs::path old = copy_model("st", tmp / "old-st");
    test::write_text(old / "1_Pooling/config.json",
                     R"({"word_embedding_dimension": 32, "pooling_mode_cls_token": false, "pooling_mode_mean_tokens": true,
                         "pooling_mode_max_tokens": false, "pooling_mode_mean_sqrt_len_tokens": false})");
    test::edit_json(old / "modules.json", [](nlohmann::json& j) {
        j[0]["type"] = "sentence_transformers.models.Transformer";
        j[1]["type"] = "sentence_transformers.models.Pooling";
        j[2]["type"] = "sentence_transformers.models.Dense";
        j[3]["type"] = "sentence_transformers.models.Normalize";
    });
    CHECK(embed(old, texts) == st_want);
}

TEST_CASE("t5: chunk ids decode to the text embedding, an all-padding chunk is a zero row, the manifest settings rebuild it") {
    test::TempDir tmp("t5-chunks");
    Tokenizer tok(test::chunk_test_tokenizer());
    fs::path model = copy_model("st", tmp / "model");
    T5EmbedderOptions o{model.string() + "/", 32, 2};
    auto emb = make_t5_embedder(o, &tok);
    const auto& t5 = dynamic_cast<const T5Embedder&>(*emb);
    const int cs = 40, D = emb->dim();
    const std::vector<std::string> texts = {"the quick brown fox jumps", "hello world fine thanks", ""};
    std::vector<std::int32_t> chunks(texts.size() * cs, TOKEN_PAD);
    for (std::size_t i = 0; i + 1 < texts.size(); ++i) {
        std::vector<int> ids = tok.encode(texts[i]);
        ids.insert(ids.begin(), TOKEN_BOS);
        ids.push_back(TOKEN_EOS);
        REQUIRE(static_cast<int>(ids.size()) <= cs);
        std::copy(ids.begin(), ids.end(), chunks.begin() + i * cs);
    }
    std::vector<float> got(texts.size() * D, 7.0f), want(2 * D);
    emb->embed(chunks.data(), 3, cs, got.data());
    t5.embed_texts({texts[0], texts[1]}, want.data());
    for (int j = 0; j < 2 * D; ++j) CHECK(got[j] == doctest::Approx(want[j]).epsilon(1e-5));
    for (int j = 0; j < D; ++j) CHECK(got[2 * D + j] == 0.0f);

    nlohmann::json j = emb->to_json();
    CHECK(j["name"] == "t5");
    CHECK(j["model"] == fs::absolute(model).lexically_normal().string());
    CHECK(j["max_length"] == 32);
    CHECK(j["dim"] == 24);
    CHECK(j["fingerprint"].get<std::string>().size() == 16);
    auto again = embedder_from_json(j, tmp.path.string(), &tok);
    CHECK(again->to_json() == j);
    CHECK_THROWS_AS(embedder_from_json(j, tmp.path.string(), nullptr), UserError);
    // The Dense weights are part of the fingerprint: a changed one is refused.
    test::rewrite_tensors(model / "2_Dense/model.safetensors", [](const std::string& n) { return n; });
    {
        std::fstream f(model / "2_Dense/model.safetensors", std::ios::in | std::ios::out | std::ios::binary);
        f.seekg(-3, std::ios::end);
        char c = 0;
        f.read(&c, 1);
        c ^= 0x40;
        f.seekp(-3, std::ios::end);
        f.write(&c, 1);
    }
    try {
        embedder_from_json(j, tmp.path.string(), &tok);
        FAIL("a changed Dense layer was accepted");
    } catch (const UserError& err) {
        const std::string msg = err.what();
        CHECK(msg.find("fingerprint") != std::string::npos);
        CHECK(msg.find('\n') == std::string::npos);
    }
}

TEST_CASE("t5: a decoder-only checkpoint, mismatched dimensions and missing files are one-line errors naming the file") {
    test::TempDir tmp("t5-bad");
    auto one_line = [](const std::string& msg, const std::string& names) {
        CAPTURE(msg);
        CHECK(msg.find(names) != std::string::npos);
        CHECK(msg.find('\n') == std::string::npos);
    };
    {   // decoder-only: every encoder tensor renamed to decoder
        fs::path d = copy_model("v1_0", tmp / "decoder");
        test::rewrite_tensors(d / "model.safetensors", [](const std::string& n) {
            return n.rfind("encoder.", 0) == 0 ? "decoder." + n.substr(8) : n;
        });
        const std::string msg = load_error(d);
        one_line(msg, "model.safetensors");
        CHECK(msg.find("decoder") != std::string::npos);
        test::edit_json(d / "config.json", [](nlohmann::json& j) { j["is_decoder"] = true; });
        one_line(load_error(d), "config.json");
    }
    {   // config.json's d_model disagrees with the weights
        fs::path d = copy_model("v1_0", tmp / "dmodel");
        test::edit_json(d / "config.json", [](nlohmann::json& j) { j["d_model"] = 48; });
        const std::string msg = load_error(d);
        one_line(msg, "model.safetensors");
        CHECK(msg.find("shape") != std::string::npos);
    }
    {   // feed_forward_proj says gated, the weights are relu's wi
        fs::path d = copy_model("v1_0", tmp / "gated");
        test::edit_json(d / "config.json", [](nlohmann::json& j) { j["feed_forward_proj"] = "gated-gelu"; });
        one_line(load_error(d), "wi_0");
        test::edit_json(d / "config.json", [](nlohmann::json& j) { j["feed_forward_proj"] = "gated-tanh"; });
        one_line(load_error(d), "config.json");
    }
    {   // sentence-transformers: Pooling and Dense dimensions that do not fit the encoder
        fs::path d = copy_model("st", tmp / "pool");
        test::edit_json(d / "1_Pooling/config.json", [](nlohmann::json& j) { j["embedding_dimension"] = 768; });
        one_line(load_error(d), "1_Pooling/config.json");
        fs::path e = copy_model("st", tmp / "dense");
        test::edit_json(e / "2_Dense/config.json", [](nlohmann::json& j) { j["out_features"] = 16; });
        one_line(load_error(e), "2_Dense/model.safetensors");
        test::edit_json(e / "2_Dense/config.json", [](nlohmann::json& j) {
            j["out_features"] = 24;
            j["in_features"] = 768;
        });
        one_line(load_error(e), "2_Dense/config.json");
        test::edit_json(e / "2_Dense/config.json", [](nlohmann::json& j) {
            j["in_features"] = 32;
            j["activation_function"] = "torch.nn.modules.activation.GELU";
        });
        one_line(load_error(e), "2_Dense/config.json");
    }
    {   // missing files, each named with its fix
        int copy = 0;
        for (const char* f : {"2_Dense/model.safetensors", "spiece.model", "model.safetensors", "config.json", "1_Pooling/config.json"}) {
            fs::path d = copy_model("st", tmp / ("missing" + std::to_string(copy++)));
            fs::remove(d / f);
            const std::string msg = load_error(d);
            one_line(msg, f);
            CHECK(msg.find("fix:") != std::string::npos);
        }
        one_line(load_error(tmp / "nowhere"), "nowhere");
    }
}

TEST_CASE("t5: retro-index --embedder t5 builds an index, and a bad checkpoint exits 2 with one line and nothing complete") {
    test::TempDir tmp("t5-index");
    auto corpus = test::chunk_test_jsonl(tmp, "c.jsonl", 6000, 400);
    fs::path db = tmp / "db";
    auto r = test::run_tool("retro-chunk", corpus.string() + " --tokenizer " + test::chunk_test_tokenizer() +
                                               " --chunk-size 16 --seq-len 64 --out " + db.string() + " --quiet");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    fs::path model = golden_dir() / "st";
    r = test::run_tool("retro-index", db.string() + " --out " + (tmp / "idx").string() + " --embedder t5 --model " +
                                          model.string() + " --max-length 32 --quiet");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    nlohmann::json m = test::golden_json(tmp / "idx/manifest.json");
    CHECK(m["embedder"]["name"] == "t5");
    CHECK(m["index"]["dim"] == 24);
    NpyArray e((tmp / "idx/embeddings.npy").string());
    CHECK(e.dim(1) == 24);

    fs::path bad = copy_model("v1_0", tmp / "decoder");
    test::rewrite_tensors(bad / "model.safetensors", [](const std::string& n) {
        return n.rfind("encoder.", 0) == 0 ? "decoder." + n.substr(8) : n;
    });
    r = test::run_tool("retro-index", db.string() + " --out " + (tmp / "idx2").string() + " --embedder t5 --model " + bad.string());
    CHECK(r.exit_code == 2);
    CHECK(test::line_count(r.err) == 1);
    CHECK(r.err.find("model.safetensors") != std::string::npos);
    CHECK(!fs::exists(tmp / "idx2/manifest.json"));
}
