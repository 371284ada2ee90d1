// --model of the bert, t5 and clip embedders (embed/model_folder.h): a checkpoint folder, a Hugging Face cache
// folder of one model, or a Hub id found in the local cache (files as symlinks into blobs/, as huggingface_hub
// lays them out); the messages for a model not in the cache and an ambiguous cache folder; retro-index recording
// the snapshot and taking the same index again with --resume whatever --model's spelling.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>

#include "core/error.h"
#include "core/manifest.h"
#include "embed/model_folder.h"
#include "test_chunk_util.h"
#include "test_util.h"

using namespace retro;
namespace fs = std::filesystem;

namespace {

// HUB/models--ORG--NAME with one snapshot `hash` of the tiny BERT: files in blobs/, the snapshot's names linked to
// them, refs/main naming it (unless `ref` is false). Returns the snapshot folder.
fs::path cached_tiny_bert(const fs::path& hub, const std::string& repo, const std::string& hash, bool ref = true) {
    const fs::path root = hub / repo, golden = test::source_dir() / "tests" / "reference" / "golden" / "bert_tiny";
    fs::create_directories(root / "blobs");
    fs::create_directories(root / "snapshots" / hash);
    for (const char* f : {"config.json", "model.safetensors", "vocab.txt", "tokenizer_config.json"}) {
        const fs::path blob = root / "blobs" / (hash + "-" + f);
        if (!fs::exists(blob)) fs::copy_file(golden / f, blob);
        fs::create_symlink(fs::path("..") / ".." / "blobs" / blob.filename(), root / "snapshots" / hash / f);
    }
    if (ref) {
        fs::create_directories(root / "refs");
        test::write_text(root / "refs" / "main", hash);
    }
    return root / "snapshots" / hash;
}

std::string refusal(const std::string& given) {
    try {
        embedder_model_folder("bert", given);
    } catch (const UserError& e) {
        return e.what();
    }
    return "(accepted)";
}

}  // namespace

TEST_CASE("model folder: a Hub id or a cache folder is the snapshot refs/main names, nothing downloaded") {
    test::TempDir tmp("model-folder");
    const fs::path hub = tmp / "hub";
    const fs::path snap = cached_tiny_bert(hub, "models--org--tiny-bert", "0123abcd");
    test::ScopedEnv cache("HF_HUB_CACHE", hub.string());
    CHECK(hf_hub_cache_dir() == hub.string());
    CHECK(embedder_model_folder("bert", "org/tiny-bert") == snap.string());
    CHECK(embedder_model_folder("bert", (hub / "models--org--tiny-bert").string()) == snap.string());
    CHECK(embedder_model_folder("bert", (hub / "models--org--tiny-bert").string() + "/") == snap.string());
    CHECK(embedder_model_folder("bert", snap.string() + "/") == snap.string());   // a checkpoint folder as it is
    // a bare id (the Hub's old root models) and a second snapshot beside the one refs/main names
    const fs::path bare = cached_tiny_bert(hub, "models--tiny-bert", "feed01");
    cached_tiny_bert(hub, "models--tiny-bert", "feed02", false);
    CHECK(embedder_model_folder("bert", "tiny-bert") == bare.string());
    {   // without refs/main: the only snapshot, or a refusal naming where the snapshots are
        cached_tiny_bert(hub, "models--org--noref", "aaaa", false);
        CHECK(embedder_model_folder("bert", "org/noref") == (hub / "models--org--noref" / "snapshots" / "aaaa").string());
        cached_tiny_bert(hub, "models--org--noref", "bbbb", false);
        const std::string msg = refusal("org/noref");
        CHECK(msg.find("org/noref: is a Hugging Face cache folder of 2 snapshots and no refs/main naming one") == 0);
        CHECK(msg.find((hub / "models--org--noref" / "snapshots" / "HASH").string()) != std::string::npos);
        // refs/main naming a snapshot that is not there (a partial copy of a cache): said so, not "no refs/main"
        fs::create_directories(hub / "models--org--noref" / "refs");
        test::write_text(hub / "models--org--noref" / "refs" / "main", "cccc\n");
        CHECK(refusal("org/noref").find("org/noref: is a Hugging Face cache folder of 2 snapshots, and refs/main names cccc, "
                                        "which is not among them (fix: give one of them: ") == 0);
    }
    {   // not in the cache: the command that fetches it
        const std::string msg = refusal("org/absent");
        CHECK(msg.find("org/absent: is not a folder, nor a model in the Hugging Face cache " + hub.string()) == 0);
        CHECK(msg.find("hf download org/absent") != std::string::npos);
        CHECK(msg.find('\n') == std::string::npos);
    }
    CHECK(refusal("./no/such/dir").find("./no/such/dir: is not a folder (fix: give a Hugging Face bert checkpoint folder") == 0);
    CHECK(refusal((snap / "vocab.txt").string()).find(": is not a folder") != std::string::npos);
    CHECK(refusal("").find("--model: the bert embedder needs a model folder") == 0);
    {   // huggingface_hub's order of variables
        test::ScopedEnv no_cache("HF_HUB_CACHE", std::nullopt);
        test::ScopedEnv legacy("HUGGINGFACE_HUB_CACHE", (tmp / "legacy").string());
        CHECK(hf_hub_cache_dir() == (tmp / "legacy").string());
        test::ScopedEnv no_legacy("HUGGINGFACE_HUB_CACHE", std::nullopt);
        test::ScopedEnv home("HF_HOME", (tmp / "hf").string());
        CHECK(hf_hub_cache_dir() == (tmp / "hf" / "hub").string());
        test::ScopedEnv tilde("HF_HOME", std::string("~/hf"));
        CHECK(hf_hub_cache_dir() == std::string(std::getenv("HOME")) + "/hf/hub");
        test::ScopedEnv no_home("HF_HOME", std::nullopt);
        test::ScopedEnv no_tilde("HF_HOME", std::nullopt);
        test::ScopedEnv xdg("XDG_CACHE_HOME", (tmp / "xdg").string());
        CHECK(hf_hub_cache_dir() == (tmp / "xdg" / "huggingface" / "hub").string());
    }
    {   // expanduser, then expandvars, over the whole path, as huggingface_hub's constants do
        test::ScopedEnv no_cache("HF_HUB_CACHE", std::nullopt);
        test::ScopedEnv no_legacy("HUGGINGFACE_HUB_CACHE", std::nullopt);
        test::ScopedEnv root("RETRO_TEST_ROOT", tmp.path.string());
        test::ScopedEnv unset("RETRO_TEST_UNSET", std::nullopt);
        test::ScopedEnv plain("HF_HOME", std::string("$RETRO_TEST_ROOT/hf"));
        CHECK(hf_hub_cache_dir() == (tmp / "hf" / "hub").string());
        test::ScopedEnv braced("HF_HOME", std::string("${RETRO_TEST_ROOT}x/$RETRO_TEST_UNSET/${RETRO_TEST_UNSET}/$/${"));
        CHECK(hf_hub_cache_dir() == tmp.path.string() + "x/$RETRO_TEST_UNSET/${RETRO_TEST_UNSET}/$/${/hub");
        test::ScopedEnv no_home("HF_HOME", std::nullopt);
        test::ScopedEnv xdg("XDG_CACHE_HOME", std::string("~/$RETRO_TEST_UNSET"));
        CHECK(hf_hub_cache_dir() == std::string(std::getenv("HOME")) + "/$RETRO_TEST_UNSET/huggingface/hub");
        test::ScopedEnv hub_cache("HF_HUB_CACHE", std::string("~root/c"));
        CHECK(hf_hub_cache_dir() == "/root/c");   // Debian's root home, from the password file
        test::ScopedEnv no_such_user("HF_HUB_CACHE", std::string("~no-such-user-retro/c"));
        CHECK(hf_hub_cache_dir() == "~no-such-user-retro/c");
        test::ScopedEnv no_hub("HF_HUB_CACHE", std::nullopt);
        // expanded twice where huggingface_hub expands twice (HF_HOME, then the hub path under it)
        test::ScopedEnv twice("HF_HOME", std::string("$RETRO_TEST_A/x"));
        test::ScopedEnv a("RETRO_TEST_A", std::string("$RETRO_TEST_B"));
        test::ScopedEnv b("RETRO_TEST_B", std::string("/bb"));
        CHECK(hf_hub_cache_dir() == "/bb/x/hub");
        test::ScopedEnv empty("HF_HOME", std::string());   // set to "": os.getenv's "" (the hub cache "hub", relative)
        CHECK(hf_hub_cache_dir() == "hub");
        test::ScopedEnv eq("HF_HUB_CACHE", std::string("${RETRO_TEST_A=B}"));
        test::ScopedEnv aeq("RETRO_TEST_A", std::string("B=C"));   // glibc getenv("RETRO_TEST_A=B") would say "C"
        CHECK(hf_hub_cache_dir() == "${RETRO_TEST_A=B}");
    }
}

TEST_CASE("model folder: retro-index records the snapshot, and --resume takes any spelling of the same folder") {
    test::TempDir tmp("model-folder-cli");
    const fs::path hub = tmp / "hub";
    const fs::path snap = cached_tiny_bert(hub, "models--org--tiny-bert", "0123abcd");
    test::ScopedEnv cache("HF_HUB_CACHE", hub.string());
    const fs::path db = test::chunk_test_db(tmp, 5), idx = tmp / "idx";
    const std::string common = db.string() + " --embedder bert --out " + idx.string() + " --quiet --model ";
    const test::RunResult built = test::run_tool("retro-index", common + "org/tiny-bert");
    REQUIRE_MESSAGE(built.exit_code == 0, built.err);
    const nlohmann::json manifest = json_read_file((idx / "manifest.json").string());
    CHECK(manifest["embedder"]["model"] == snap.string());
    // the same index asked for again (a script rerun): before, any spelling but the recorded absolute path was "another job"
    for (const std::string& spelling : {std::string("org/tiny-bert"), snap.string() + "/", (snap / ".." / "0123abcd").string(),
                                        (hub / "models--org--tiny-bert").string()}) {
        CAPTURE(spelling);
        const test::RunResult again = test::run_tool("retro-index", common + spelling + " --resume");
        CHECK_MESSAGE(again.exit_code == 0, again.err);
    }
    const test::RunResult other = test::run_tool("retro-index", common + "org/absent --resume");
    CHECK(other.exit_code == 2);
    CHECK(other.err.find("org/absent: is not a folder, nor a model in the Hugging Face cache") != std::string::npos);
}
