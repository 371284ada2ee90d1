// Sharded Hugging Face checkpoints (embed/checkpoint_weights.h): the tiny BERT, T5 (sentence-transformers, with its
// Dense module) and CLIP golden checkpoints split into two shards and a model.safetensors.index.json, as
// save_pretrained writes them above max_shard_size, embed exactly as the single files do; a missing shard, an index
// naming a file outside the folder or a tensor its shard lacks are one-line errors naming the file.
#include <doctest/doctest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/fingerprint.h"
#include "core/safetensors.h"
#include "embed/bert_embedder.h"
#include "embed/checkpoint_weights.h"
#include "embed/clip_embedder.h"
#include "embed/t5_embedder.h"
#include "test_util.h"

using namespace retro;
namespace fs = std::filesystem;

namespace {

const fs::path kGolden = test::source_dir() / "tests" / "reference" / "golden";

// A copy of `from` whose model.safetensors is two shards (tensors alternating by name) and an index; `weight_map`
// overrides entries of the index's map.
fs::path sharded_copy(const fs::path& from, const fs::path& to, const nlohmann::json& weight_map = nlohmann::json::object()) {
    fs::copy(from, to, fs::copy_options::recursive);
    const SafetensorsFile single((from / "model.safetensors").string());
    std::vector<TensorToWrite> shard[2];
    nlohmann::json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", nlohmann::json::object()}};
    int i = 0;
    for (const auto& [name, view] : single.tensors()) {
        const int s = i++ % 2;
        shard[s].push_back({name, view.dtype, view.shape, view.data});
        index["weight_map"][name] = s == 0 ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
    }
    for (const auto& [name, file] : weight_map.items()) index["weight_map"][name] = file;
    safetensors_save((to / "model-00001-of-00002.safetensors").string(), shard[0]);
    safetensors_save((to / "model-00002-of-00002.safetensors").string(), shard[1]);
    fs::remove(to / "model.safetensors");
    test::write_text(to / "model.safetensors.index.json", index.dump(2));
    return to;
}

std::string refusal(const fs::path& dir) {
    try {
        CheckpointWeights w(dir.string(), "a test folder");
    } catch (const UserError& e) {
        return e.what();
    }
    return "(accepted)";
}

}  // namespace

TEST_CASE("checkpoint weights: sharded BERT, T5 and CLIP checkpoints embed exactly as their single files") {
    test::TempDir tmp("sharded");
    const std::vector<std::string> texts = {"hello world", "the lazy dog sleeps in the sun", "a"};
    {
        const fs::path single = kGolden / "bert_tiny", sharded = sharded_copy(single, tmp / "bert");
        BertEmbedderOptions o;
        o.model_dir = single.string();
        BertEmbedder a(o, nullptr);
        o.model_dir = sharded.string();
        BertEmbedder b(o, nullptr);
        std::vector<float> ea(texts.size() * a.dim()), eb(ea.size());
        a.embed_texts(texts, ea.data());
        b.embed_texts(texts, eb.data());
        CHECK(ea == eb);
        // the fingerprint covers the index and both shards; the single file's is its own, as before
        CHECK(a.fingerprint() == fingerprint_file((single / "model.safetensors").string()));
        const std::string joined = fingerprint_file((sharded / "model.safetensors.index.json").string()) + " " +
                                   fingerprint_file((sharded / "model-00001-of-00002.safetensors").string()) + " " +
                                   fingerprint_file((sharded / "model-00002-of-00002.safetensors").string());
        CHECK(b.fingerprint() == fingerprint_bytes(joined.data(), joined.size()));
        CHECK(make_bert_embedder_from_json(b.to_json(), nullptr)->to_json() == b.to_json());
    }
    {   // sentence-transformers T5: the Transformer at the folder's root sharded, its Dense module beside it
        const fs::path single = kGolden / "t5_tiny" / "st", sharded = sharded_copy(single, tmp / "t5");
        T5Embedder a({single.string(), 64, 8}, nullptr), b({sharded.string(), 64, 8}, nullptr);
        std::vector<float> ea(texts.size() * a.dim()), eb(ea.size());
        a.embed_texts(texts, ea.data());
        b.embed_texts(texts, eb.data());
        CHECK(ea == eb);
        CHECK(a.to_json()["fingerprint"] != b.to_json()["fingerprint"]);
    }
    {
        const fs::path single = kGolden / "clip_tiny" / "tiny", sharded = sharded_copy(single, tmp / "clip");
        ClipEmbedder a({single.string(), 0, 4}), b({sharded.string(), 0, 4});
        std::vector<float> ea(texts.size() * a.dim()), eb(ea.size());
        a.embed_texts(texts, ea.data());
        b.embed_texts(texts, eb.data());
        CHECK(ea == eb);
    }
}

TEST_CASE("checkpoint weights: a missing shard, a shard path outside the folder or a tensor its shard lacks is refused") {
    test::TempDir tmp("sharded-bad");
    const fs::path bert = kGolden / "bert_tiny";
    {
        const fs::path dir = sharded_copy(bert, tmp / "missing");
        fs::remove(dir / "model-00002-of-00002.safetensors");
        const std::string msg = refusal(dir);
        CHECK(msg.find((dir / "model-00002-of-00002.safetensors").string() + ": missing (a shard model.safetensors.index.json names)") == 0);
    }
    {
        const fs::path dir = sharded_copy(bert, tmp / "outside", {{"pooler.dense.bias", "../model.safetensors"}});
        CHECK(refusal(dir).find("model.safetensors.index.json: maps 'pooler.dense.bias' to '../model.safetensors', not a file beside it") !=
              std::string::npos);
    }
    {
        // the first tensor by name is in the first shard: the index says the second
        const std::string first = SafetensorsFile((bert / "model.safetensors").string()).tensors().begin()->first;
        const fs::path dir = sharded_copy(bert, tmp / "moved", {{first, "model-00002-of-00002.safetensors"}});
        CHECK(refusal(dir).find("maps '" + first + "' to model-00002-of-00002.safetensors, which has no such tensor") != std::string::npos);
    }
    {
        const fs::path dir = tmp / "no-weights";
        fs::create_directories(dir);
        CHECK_FALSE(CheckpointWeights::present(dir.string()));
        CHECK(refusal(dir).find((dir / "model.safetensors").string() +
                                ": missing (a test folder needs model.safetensors or pytorch_model.bin, or their shards and index)") == 0);
        // another framework's weights only: named, with the conversion
        test::write_text(dir / "tf_model.h5", "x");
        CHECK(refusal(dir).find("the folder holds only TensorFlow weights (tf_model.h5)) (fix: convert them once in Python: "
                                "AutoModel.from_pretrained(DIR, from_tf=True)") != std::string::npos);
        fs::remove(dir / "tf_model.h5");
        test::write_text(dir / "flax_model.msgpack", "x");
        CHECK(refusal(dir).find("only Flax weights (flax_model.msgpack)") != std::string::npos);
        fs::remove(dir / "flax_model.msgpack");
        test::write_text(dir / "model.safetensors.index.json", "{\"weight_map\": {}}");
        CHECK(refusal(dir).find("model.safetensors.index.json: has no \"weight_map\"") != std::string::npos);
    }
}
