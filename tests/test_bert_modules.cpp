// The sentence-transformers modules the bert embedder applies after the encoder since session 42: max pooling and
// Dense layers (LaBSE: CLS pooling, Dense with Tanh, Normalize; distiluse-base-multilingual: mean pooling, Dense with
// Tanh), held to sentence-transformers 6.3's encode() on tiny folders; the index records them (fingerprint, dim,
// pooling) and refuses a folder whose Dense weights changed; a Dense that does not fit the encoder is refused.
// Golden files: tests/reference/make_bert_golden.py --only st_dense (run by hand).
#include <filesystem>
#include <fstream>

#include "core/cuda_device.h"
#include "core/fingerprint.h"
#include "embed/bert_embedder.h"
#include "embed/checkpoint_weights.h"
#include "test_bert_util.h"
#include "test_embed_util.h"

using namespace retro;
namespace fs = std::filesystem;

namespace {

fs::path golden() { return test::source_dir() / "tests/reference/golden"; }

// The encoder's folder (bert_tiny, distilbert_tiny) with the golden's module files beside it, in tmp / name.
fs::path assemble(const test::TempDir& tmp, const std::string& name, const std::string& encoder) {
    const fs::path dir = tmp / name;
    fs::copy(golden() / encoder, dir, fs::copy_options::recursive);
    fs::copy(golden() / "st_dense" / name, dir, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
    return dir;
}

}  // namespace

TEST_CASE("bert modules: max pooling and Dense layers (LaBSE's and distiluse's forms) match sentence-transformers") {
    const auto g = test::golden_json(golden() / "st_dense/golden.json");
    const auto texts = g["texts"].get<std::vector<std::string>>();
    test::TempDir tmp("bert-modules-golden");
    for (const auto& [name, f] : g["folders"].items()) {
        CAPTURE(name);
        const fs::path dir = assemble(tmp, name, f["encoder"].get<std::string>());
        BertEmbedderOptions o;
        o.model_dir = dir.string();
        o.max_length = g["max_length"].get<int>();
        o.batch = 4;
        BertEmbedder e(o, nullptr);
        CHECK(e.dim() == f["dim"].get<int>());
        CHECK(e.pooling() == f["pooling"].get<std::string>());
        for (std::size_t i = 0; i < texts.size(); ++i) CHECK(e.encode_text(texts[i]) == f["ids"][i].get<std::vector<int>>());
        std::vector<float> out(texts.size() * e.dim());
        e.embed_texts(texts, out.data());
        MESSAGE(name << ": min cosine "
                     << test::check_embeddings(out, golden() / "st_dense" / (name + ".npy"), e.dim(), texts,
                                               test::BERT_MIN_COSINE, test::BERT_MAX_ABS));
        // the index records the output's dimension and pooling, and the Dense weights in the fingerprint (a folder
        // without Dense modules keeps the weights' own fingerprint, as every index before)
        const nlohmann::json j = e.to_json();
        CHECK(j["dim"] == f["dim"]);
        const std::string recorded = j.contains("pooling") ? j["pooling"].get<std::string>() : "mean";   // absent = mean
        CHECK(recorded == f["pooling"].get<std::string>());
        CHECK(j.contains("pooling") == (name != "distiluse"));
        const std::string weights = CheckpointWeights::fingerprint(dir.string());
        CHECK((j["fingerprint"] == weights) == (name == "max"));
        CHECK_NOTHROW(make_bert_embedder_from_json(j, nullptr));
        if (name == "max") {
            o.device = "cuda";   // the CUDA encoder pools by the mean or the first token only
            CHECK(test::bert_refusal(o).find("--device cuda: the CUDA encoder pools by the mean or the CLS token") == 0);
            continue;
        }
        // a Dense layer changed since the index was built: refused before embedding, naming the weights
        const fs::path dense = dir / "2_Dense" / "model.safetensors";
        std::string bytes = test::read_text(dense);
        bytes[bytes.size() - 1] ^= 0x01;
        test::write_text(dense, bytes);
        try {
            make_bert_embedder_from_json(j, nullptr);
            FAIL("an index was rebuilt over changed Dense weights");
        } catch (const UserError& err) {
            CHECK(std::string(err.what()).find("fingerprint") != std::string::npos);
        }
    }
}

TEST_CASE("bert modules: a Pooling or Dense module that does not fit the encoder is refused naming its file") {
    test::TempDir tmp("bert-modules-misfit");
    const fs::path dir = assemble(tmp, "labse", "bert_tiny");
    BertEmbedderOptions o;
    o.model_dir = dir.string();
    nlohmann::json dense = nlohmann::json::parse(test::read_text(dir / "2_Dense/config.json"));
    dense["in_features"] = 48;
    test::write_text(dir / "2_Dense/config.json", dense.dump());
    const std::string msg = test::bert_refusal(o);
    CHECK(msg.find((dir / "2_Dense").string()) == 0);
    CHECK(msg.find('\n') == std::string::npos);
    dense["in_features"] = 32;
    test::write_text(dir / "2_Dense/config.json", dense.dump());
    nlohmann::json pooling = nlohmann::json::parse(test::read_text(dir / "1_Pooling/config.json"));
    pooling["word_embedding_dimension"] = 64;
    test::write_text(dir / "1_Pooling/config.json", pooling.dump());
    CHECK(test::bert_refusal(o).find("1_Pooling/config.json: has word_embedding_dimension 64, the encoder's hidden_size is 32") !=
          std::string::npos);
    pooling["word_embedding_dimension"] = 32;
    test::write_text(dir / "1_Pooling/config.json", pooling.dump());
    // sentence-transformers 6's Dense options RetroKit does not apply: refused, not embedded wrongly
    const std::string fp = bert_fingerprint(dir.string());
    dense["use_residual"] = true;
    test::write_text(dir / "2_Dense/config.json", dense.dump());
    CHECK(test::bert_refusal(o).find("2_Dense/config.json: has use_residual true") != std::string::npos);
    dense.erase("use_residual");
    dense["module_input_name"] = "token_embeddings";
    test::write_text(dir / "2_Dense/config.json", dense.dump());
    CHECK(test::bert_refusal(o).find("has module_input_name \"token_embeddings\"") != std::string::npos);
    // the Dense settings are in the fingerprint: another activation is another model
    dense["module_input_name"] = "sentence_embedding";
    dense["activation_function"] = "torch.nn.modules.linear.Identity";
    test::write_text(dir / "2_Dense/config.json", dense.dump());
    CHECK(test::bert_refusal(o) == "(accepted)");
    CHECK(bert_fingerprint(dir.string()) != fp);
    // a second Dense whose input is not the first one's output (LaBSE's 32 -> 24 listed twice): refused, naming it (a
    // mutant without the check survived)
    fs::copy(dir / "2_Dense", dir / "3_Dense", fs::copy_options::recursive);
    nlohmann::json modules = nlohmann::json::parse(test::read_text(dir / "modules.json"));
    modules.insert(modules.begin() + 3, nlohmann::json{{"idx", 3}, {"name", "3"}, {"path", "3_Dense"},
                                                       {"type", "sentence_transformers.base.modules.dense.Dense"}});
    test::write_text(dir / "modules.json", modules.dump());
    CHECK(test::bert_refusal(o).find("3_Dense/config.json: has in_features 32, the Dense before it gives 24-d vectors") !=
          std::string::npos);
}
