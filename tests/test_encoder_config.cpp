// An index records its encoder's settings files (embedder.config_fingerprint, embed/encoder_settings.h): the model's
// config.json and, in a sentence-transformers folder, modules.json and each module's config.json. Rebuilding the
// embedder from an index (retro-index query, retro-knn, retro-generate) after one of them changed — an activation, a
// Dense module's function, the pooling — is refused in one line, as is resuming a retro-index job; an index written
// before the field existed is not held to it.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include "core/error.h"
#include "core/manifest.h"
#include "embed/bert_embedder.h"
#include "embed/clip_embedder.h"
#include "embed/t5_embedder.h"
#include "test_chunk_util.h"
#include "test_util.h"

using namespace retro;
namespace fs = std::filesystem;

namespace {

const fs::path kGolden = test::source_dir() / "tests" / "reference" / "golden";

// The refusal's message of rebuilding `recorded`'s embedder, or "(accepted)".
template <typename Rebuild>
std::string refusal(Rebuild rebuild) {
    try {
        rebuild();
    } catch (const UserError& e) {
        return e.what();
    }
    return "(accepted)";
}

// `file` (JSON) with `key` set to `value`.
void set_json(const fs::path& file, const std::string& key, const nlohmann::json& value) {
    nlohmann::json j = json_read_file(file.string());
    j[key] = value;
    test::write_text(file, j.dump(2));
}

const char* kChanged = "differ from those the index was built with";

}  // namespace

TEST_CASE("encoder config: a changed config.json or module config refuses an index's embedder, and an older index is not held to it") {
    test::TempDir tmp("encoder-config");
    SUBCASE("bert: the activation in config.json") {
        fs::copy(kGolden / "bert_tiny", tmp / "m", fs::copy_options::recursive);
        BertEmbedderOptions o;
        o.model_dir = (tmp / "m").string();
        const nlohmann::json recorded = BertEmbedder(o, nullptr).to_json();
        REQUIRE(recorded.contains("config_fingerprint"));
        CHECK(refusal([&] { make_bert_embedder_from_json(recorded, nullptr); }) == "(accepted)");
        set_json(tmp / "m" / "config.json", "hidden_act", "relu");
        const std::string why = refusal([&] { make_bert_embedder_from_json(recorded, nullptr); });
        CHECK(why.find((tmp / "m" / "config.json").string() + ": or the sentence-transformers module settings") == 0);
        CHECK(why.find(kChanged) != std::string::npos);
        nlohmann::json older = recorded;
        older.erase("config_fingerprint");
        CHECK(refusal([&] { make_bert_embedder_from_json(older, nullptr); }) == "(accepted)");
    }
    SUBCASE("t5: a Dense module's activation, then the pooling") {
        fs::copy(kGolden / "t5_tiny" / "st", tmp / "m", fs::copy_options::recursive);
        const nlohmann::json recorded = T5Embedder(T5EmbedderOptions{(tmp / "m").string(), 64, 8}, nullptr).to_json();
        CHECK(refusal([&] { make_t5_embedder_from_json(recorded, nullptr); }) == "(accepted)");
        const fs::path dense = tmp / "m" / "2_Dense" / "config.json";
        const std::string kept = test::read_text(dense);
        set_json(dense, "activation_function", "torch.nn.modules.activation.Tanh");
        CHECK(refusal([&] { make_t5_embedder_from_json(recorded, nullptr); }).find(kChanged) != std::string::npos);
        test::write_text(dense, kept);
        CHECK(refusal([&] { make_t5_embedder_from_json(recorded, nullptr); }) == "(accepted)");
        set_json(tmp / "m" / "1_Pooling" / "config.json", "pooling_mode", "max");
        CHECK(refusal([&] { make_t5_embedder_from_json(recorded, nullptr); }).find(kChanged) != std::string::npos);
    }
    SUBCASE("clip: the text tower's activation") {
        fs::copy(kGolden / "clip_tiny" / "tiny", tmp / "m", fs::copy_options::recursive);
        const nlohmann::json recorded = ClipEmbedder(ClipEmbedderOptions{(tmp / "m").string(), 77, 8}, nullptr).to_json();
        CHECK(refusal([&] { make_clip_embedder_from_json(recorded, nullptr); }) == "(accepted)");
        nlohmann::json cfg = json_read_file((tmp / "m" / "config.json").string());
        cfg["text_config"]["hidden_act"] = "gelu";
        test::write_text(tmp / "m" / "config.json", cfg.dump(2));
        CHECK(refusal([&] { make_clip_embedder_from_json(recorded, nullptr); }).find(kChanged) != std::string::npos);
    }
}

TEST_CASE("encoder config: retro-index --resume after a module's settings changed is refused, not mixed") {
    test::TempDir tmp("encoder-config-resume");
    const fs::path db = test::chunk_test_db(tmp, 7);
    fs::copy(kGolden / "t5_tiny" / "st", tmp / "m", fs::copy_options::recursive);
    const auto shard = [&](const std::string& extra) {
        return test::run_tool("retro-index", db.string() + " --embedder t5 --model " + (tmp / "m").string() + " --out " +
                                                 (tmp / "s0").string() + " --shard 0/2 --quiet" + extra);
    };
    REQUIRE(shard("").exit_code == 0);
    CHECK(shard(" --resume").exit_code == 0);   // the same settings: resumes (nothing left to do)
    set_json(tmp / "m" / "1_Pooling" / "config.json", "pooling_mode", "max");
    const test::RunResult refused = shard(" --resume");
    CHECK(refused.exit_code == 2);
    CHECK_MESSAGE(refused.err.find("records another job: embedder.config_fingerprint") != std::string::npos, refused.err);
}
