// `merge --resume` of retro-chunk, retro-index and retro-knn (core/output_folder.h, merge_resume_check): a pipeline run
// again skips a merge it made (nothing rewritten), makes an interrupted one again (the same bytes as a straight merge),
// and refuses a finished folder of another job naming the difference, a run of another kind, the user's files and
// --force with --resume. Also retro-knn --resume of finished neighbours found for other --queries (taken as complete
// before session 55).
#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "test_chunk_util.h"
#include "test_util.h"

using namespace retro;
namespace fs = std::filesystem;

namespace {

void check_refused(const test::RunResult& r, const std::string& expected) {
    CHECK(r.exit_code == 2);
    CHECK_MESSAGE(r.err.find(expected) != std::string::npos, r.err);
}

void check_complete(const test::RunResult& r, const fs::path& out) {
    CHECK_MESSAGE(r.exit_code == 0, r.err);
    CHECK_MESSAGE(r.err.find(out.string() + " is already complete (manifest.json exists); nothing to resume") != std::string::npos,
                  r.err);
}

}  // namespace

TEST_CASE("merge --resume: retro-chunk keeps a finished merge, makes an interrupted one again, refuses another job") {
    test::TempDir dir("merge-resume-chunk");
    const fs::path corpus = test::chunk_test_jsonl(dir, "c.jsonl", 30'000, 300);
    const std::string common = corpus.string() + " --tokenizer " + test::chunk_test_tokenizer() + " --block-docs 9 --quiet";
    std::string shards, other_shards;
    for (int i = 0; i < 2; ++i) {
        const fs::path s = dir / ("s." + std::to_string(i)), o = dir / ("o." + std::to_string(i));
        REQUIRE(test::run_tool("retro-chunk", common + " --shard " + std::to_string(i) + "/2 --out " + s.string()).exit_code == 0);
        REQUIRE(test::run_tool("retro-chunk", common + " --chunk-size 32 --shard " + std::to_string(i) + "/2 --out " + o.string())
                    .exit_code == 0);
        shards += " " + s.string();
        other_shards += " " + o.string();
    }
    REQUIRE(test::run_tool("retro-chunk", common + " --out " + (dir / "whole").string()).exit_code == 0);
    const fs::path merged = dir / "merged";
    const auto merge = [&](const std::string& given, const std::string& flags) {
        return test::run_tool("retro-chunk", "merge" + given + " --out " + merged.string() + " " + flags);
    };
    // --resume of a folder not there yet: merged
    const test::RunResult first = merge(shards, "--resume");
    REQUIRE_MESSAGE(first.exit_code == 0, first.err);
    test::chunk_check_same_bytes(dir / "whole", merged);
    const std::string manifest = test::read_text(merged / "manifest.json");
    // run again: complete, nothing rewritten (the manifest records its time: the same bytes mean it was not written)
    check_complete(merge(shards, "--resume"), merged);
    CHECK(test::read_text(merged / "manifest.json") == manifest);
    // without --resume, as before: refused
    check_refused(merge(shards, ""), "already exists and is not empty (fix: pass --force to replace it, --resume where it "
                                     "is this merge's (a finished one is kept), or choose another --out)");
    check_refused(merge(shards, "--resume --force"), "--resume and --force: contradict each other");
    // shards of another run (chunks of 32): the finished merge is another job's, named by its shard
    check_refused(merge(other_shards, "--resume"), "already holds the output of another job: shard 0 (");
    CHECK(test::read_text(merged / "manifest.json") == manifest);
    // a database made by one run of the same job is the merge byte for byte: complete (as index and knn merges take
    // one); one of another job is named
    const std::string whole_manifest = test::read_text(dir / "whole" / "manifest.json");
    check_complete(test::run_tool("retro-chunk", "merge" + shards + " --out " + (dir / "whole").string() + " --resume"),
                   dir / "whole");
    CHECK(test::read_text(dir / "whole" / "manifest.json") == whole_manifest);
    REQUIRE(test::run_tool("retro-chunk", common + " --chunk-size 32 --out " + (dir / "whole32").string()).exit_code == 0);
    check_refused(test::run_tool("retro-chunk", "merge" + shards + " --out " + (dir / "whole32").string() + " --resume"),
                  "its database, made by one retro-chunk run, is of another job: parameters.chunk_size is 64, the folder's 32");
    // Ctrl-C before the manifest: the database's files without it (one still .tmp) are made again, the same bytes
    fs::remove(merged / "manifest.json");
    fs::rename(merged / test::chunk_output_names()[0], merged / (test::chunk_output_names()[0] + ".tmp"));
    const test::RunResult remade = merge(shards, "--resume");
    CHECK_MESSAGE(remade.exit_code == 0, remade.err);
    CHECK_MESSAGE(remade.err.find("holds an interrupted merge (no manifest.json), which cannot be continued: making it again") !=
                      std::string::npos,
                  remade.err);
    test::chunk_check_same_bytes(dir / "whole", merged);
    CHECK_FALSE(fs::exists(merged / (test::chunk_output_names()[0] + ".tmp")));
    // killed while the manifest was written (a review, session 55: refused, where --force went ahead)
    fs::rename(merged / "manifest.json", merged / "manifest.json.tmp");
    const test::RunResult in_manifest = merge(shards, "--resume");
    CHECK_MESSAGE(in_manifest.exit_code == 0, in_manifest.err);
    test::chunk_check_same_bytes(dir / "whole", merged);
    CHECK(fs::exists(merged / "manifest.json"));
    CHECK_FALSE(fs::exists(merged / "manifest.json.tmp"));
    // a folder of the user's own files is not taken for an interrupted merge
    fs::create_directories(dir / "mine");
    test::write_text(dir / "mine" / "notes.txt", "mine");
    check_refused(test::run_tool("retro-chunk", "merge" + shards + " --out " + (dir / "mine").string() + " --resume"),
                  "already exists and holds no finished retro-chunk output");
    CHECK(test::read_text(dir / "mine" / "notes.txt") == "mine");
    // a retro-chunk run stopped part-way (its checkpoint) is resumed by its own command, not replaced by a merge
    fs::create_directories(dir / "running");
    test::write_text(dir / "running" / "progress.json", "{}");
    check_refused(test::run_tool("retro-chunk", "merge" + shards + " --out " + (dir / "running").string() + " --resume"),
                  "holds an unfinished retro-chunk run that is not a merge");
}

TEST_CASE("merge --resume: retro-index and retro-knn keep a finished merge, make an interrupted one again") {
    test::TempDir tmp("merge-resume-index");
    const fs::path db = test::chunk_test_db(tmp, 21);
    for (int i = 0; i < 2; ++i)
        REQUIRE(test::run_tool("retro-index", db.string() + " --out " + (tmp / ("s" + std::to_string(i))).string() +
                                                  " --block 8 --dim 32 --shard " + std::to_string(i) + "/2 --quiet")
                    .exit_code == 0);
    const std::string shards = " " + (tmp / "s0").string() + " " + (tmp / "s1").string();
    const fs::path idx = tmp / "idx";
    const auto merge = [&](const fs::path& out, const std::string& flags) {
        return test::run_tool("retro-index", "merge" + shards + " --out " + out.string() + " " + flags);
    };
    REQUIRE(merge(idx, "--resume").exit_code == 0);
    const std::string manifest = test::read_text(idx / "manifest.json"), index_bytes = test::read_text(idx / "index.faiss");
    check_complete(merge(idx, "--resume"), idx);
    CHECK(test::read_text(idx / "manifest.json") == manifest);
    check_refused(merge(idx, "--resume --force"), "--resume and --force: contradict each other");
    // an unsharded build of the same job is the same index: complete; one of another --dim is another job's
    REQUIRE(test::run_tool("retro-index", db.string() + " --out " + (tmp / "one").string() + " --block 8 --dim 32 --quiet").exit_code == 0);
    check_complete(merge(tmp / "one", "--resume"), tmp / "one");
    REQUIRE(test::run_tool("retro-index", db.string() + " --out " + (tmp / "d16").string() + " --block 8 --dim 16 --quiet").exit_code == 0);
    check_refused(merge(tmp / "d16", "--resume"), "already holds the output of another job: embedder.dim is 32, the folder's 16");
    // Ctrl-C in a merge leaves its mark (state.json: a run that cannot be resumed) and parts: made again, the same bytes
    const fs::path cut = tmp / "cut";
    fs::create_directories(cut / "parts");
    test::write_text(cut / "state.json", nlohmann::json{{"tool", "retro-index"}, {"resumable", false}, {"run", "a merge"}}.dump());
    test::write_text(cut / "embeddings.npy.tmp", "cut short");
    const test::RunResult remade = merge(cut, "--resume");
    CHECK_MESSAGE(remade.exit_code == 0, remade.err);
    CHECK(remade.err.find("holds an interrupted merge, which cannot be continued: making it again") != std::string::npos);
    CHECK(test::read_text(cut / "index.faiss") == index_bytes);
    CHECK_FALSE(fs::exists(cut / "state.json"));
    CHECK_FALSE(fs::exists(cut / "embeddings.npy.tmp"));
    // killed between removing its mark and writing its manifest: its outputs alone, made again
    fs::remove(cut / "manifest.json");
    test::write_text(cut / "manifest.json.tmp", "{");
    const test::RunResult unmarked = merge(cut, "--resume");
    CHECK_MESSAGE(unmarked.exit_code == 0, unmarked.err);
    CHECK(unmarked.err.find("holds an interrupted merge (no manifest.json)") != std::string::npos);
    CHECK(test::read_text(cut / "index.faiss") == index_bytes);
    // ... and with an empty parts/ (killed between removing the mark and the parts)
    fs::remove(cut / "manifest.json");
    fs::create_directories(cut / "parts");
    const test::RunResult with_parts = merge(cut, "--resume");
    CHECK_MESSAGE(with_parts.exit_code == 0, with_parts.err);
    CHECK(with_parts.err.find("holds an interrupted merge (no manifest.json)") != std::string::npos);
    CHECK(fs::exists(cut / "manifest.json"));
    CHECK_FALSE(fs::exists(cut / "parts"));
    CHECK(test::read_text(cut / "index.faiss") == index_bytes);
    // files of the user's that only look like a merge's (a review, session 55: all were deleted), each beside an output
    // of the merge's name: refused, kept
    int n = 0;
    for (const std::string name : {"parts/mydata.txt", "manifest.json", "notes.tmp", "index.faiss/x"}) {
        CAPTURE(name);
        const fs::path users = tmp / ("users" + std::to_string(n++));
        fs::create_directories((users / name).parent_path());
        if (name != "index.faiss/x") test::write_text(users / "embeddings.npy", "not mine to keep");
        test::write_text(users / name, "{\"name\": \"precious\"}");
        check_refused(merge(users, "--resume"), "already exists and holds no finished retro-index output");
        CHECK(test::read_text(users / name) == "{\"name\": \"precious\"}");
    }
    // an interrupted bm25 build (marked as a merge is) is another job's
    fs::create_directories(tmp / "bmcut" / "parts");
    test::write_text(tmp / "bmcut" / "state.json",
                     nlohmann::json{{"tool", "retro-index"}, {"resumable", false}, {"run", "a --kind bm25 build"}}.dump());
    check_refused(merge(tmp / "bmcut", "--resume"), "holds an interrupted retro-index run of another kind (a --kind bm25 build), not a merge");
    CHECK(fs::exists(tmp / "bmcut" / "state.json"));
    // an unfinished build (a run of another kind, resumable) is not replaced by the merge
    fs::create_directories(tmp / "building" / "parts");
    test::write_text(tmp / "building" / "state.json", nlohmann::json{{"tool", "retro-index"}}.dump());
    check_refused(merge(tmp / "building", "--resume"), "holds an unfinished retro-index run that is not a merge (a build or a shard)");
    CHECK(fs::exists(tmp / "building" / "state.json"));

    // retro-knn's merge, the same way
    for (int i = 0; i < 2; ++i)
        REQUIRE(test::run_tool("retro-knn", idx.string() + " --db " + db.string() + " --out " + (tmp / ("k" + std::to_string(i))).string() +
                                                " --block 8 --shard " + std::to_string(i) + "/2 --quiet")
                    .exit_code == 0);
    const std::string knn_shards = " " + (tmp / "k0").string() + " " + (tmp / "k1").string();
    const auto knn_merge = [&](const fs::path& out, const std::string& flags) {
        return test::run_tool("retro-knn", "merge" + knn_shards + " --out " + out.string() + " " + flags);
    };
    REQUIRE(knn_merge(tmp / "nb", "--resume").exit_code == 0);
    const std::string neighbours = test::read_text(tmp / "nb" / "neighbours.npy");
    const std::string knn_manifest = test::read_text(tmp / "nb" / "manifest.json");
    check_complete(knn_merge(tmp / "nb", "--resume"), tmp / "nb");
    CHECK(test::read_text(tmp / "nb" / "manifest.json") == knn_manifest);
    // neighbours of another --neighbours count: another job's
    REQUIRE(test::run_tool("retro-knn", idx.string() + " --db " + db.string() + " --out " + (tmp / "k5").string() +
                                            " --neighbours 5 --block 8 --quiet")
                .exit_code == 0);
    check_refused(knn_merge(tmp / "k5", "--resume"), "already holds the output of another job: parameters.neighbours is 2, the folder's 5");
    const fs::path knn_cut = tmp / "nbcut";
    fs::create_directories(knn_cut / "parts");
    test::write_text(knn_cut / "state.json", nlohmann::json{{"tool", "retro-knn"}, {"resumable", false}, {"run", "a merge"}}.dump());
    const test::RunResult knn_remade = knn_merge(knn_cut, "--resume");
    CHECK_MESSAGE(knn_remade.exit_code == 0, knn_remade.err);
    CHECK(test::read_text(knn_cut / "neighbours.npy") == neighbours);
    // killed while it wrote its mark (state.json.tmp beside an empty parts/: its --resume was refused as a user's
    // folder, a helper's kill soak, session 68): made again, the same bytes; the mark of another tool's is not its own
    for (const std::string& mark : {nlohmann::json{{"tool", "retro-knn"}, {"resumable", false}, {"run", "a merge"}}.dump(), std::string()}) {
        const fs::path marked = tmp / ("nbmark" + std::to_string(mark.size()));
        fs::create_directories(marked / "parts");
        test::write_text(marked / "state.json.tmp", mark);
        const test::RunResult r = knn_merge(marked, "--resume");
        CHECK_MESSAGE(r.exit_code == 0, r.err);
        CHECK(test::read_text(marked / "neighbours.npy") == neighbours);
        CHECK_FALSE(fs::exists(marked / "state.json.tmp"));
    }
    fs::create_directories(tmp / "othermark" / "parts");
    test::write_text(tmp / "othermark" / "state.json.tmp", nlohmann::json{{"tool", "retro-index"}}.dump());
    check_refused(knn_merge(tmp / "othermark", "--resume"), "already exists and holds no finished retro-knn output");
    // a finished merge with an output gone (a --force stopped after removing it, before session 68 its manifest last):
    // not "already complete"
    fs::copy(tmp / "nb", tmp / "nbgone", fs::copy_options::recursive);
    fs::remove(tmp / "nbgone" / "neighbours.npy");
    check_refused(knn_merge(tmp / "nbgone", "--resume"), "neighbours.npy: missing, though");
    check_refused(knn_merge(tmp / "nbgone", "--resume"), "records it: the folder is not whole");
    // a user's folder: refused, kept
    fs::create_directories(tmp / "mine");
    test::write_text(tmp / "mine" / "notes.txt", "mine");
    check_refused(knn_merge(tmp / "mine", "--resume"), "already exists and holds no finished retro-knn output");

    // a shard resumed with one block lost says what it kept (it said nothing: a new user's pass, session 54)
    int parts = 0;
    for (const auto& e : fs::directory_iterator(tmp / "s0" / "parts")) parts += e.path().extension() == ".npy";
    REQUIRE(parts > 1);
    fs::remove(tmp / "s0" / "parts" / "embeddings.0.npy");
    const test::RunResult resumed = test::run_tool("retro-index", db.string() + " --out " + (tmp / "s0").string() +
                                                                     " --block 8 --dim 32 --shard 0/2 --resume");
    CHECK_MESSAGE(resumed.exit_code == 0, resumed.err);
    CHECK_MESSAGE(resumed.err.find(": resuming: " + std::to_string(parts - 1) + " of " + std::to_string(parts) +
                                   (parts - 1 == 1 ? " blocks was" : " blocks were") + " embedded before, 1 left") !=
                                  std::string::npos,
                  resumed.err);
}

TEST_CASE("knn --resume: finished neighbours of other --queries are another job's") {
    // found writing merge --resume (session 55): the finished-folder check compared the parameters and the index, not
    // the queries, so `--queries B --resume` over neighbours of queries A said "already complete"
    test::TempDir tmp("knn-resume-queries");
    const fs::path db = test::chunk_test_db(tmp, 22);
    test::TempDir qa_dir("knn-resume-qa"), qb_dir("knn-resume-qb");
    const fs::path qa = test::chunk_test_db(qa_dir, 23), qb = test::chunk_test_db(qb_dir, 24);
    REQUIRE(test::run_tool("retro-index", db.string() + " --out " + (tmp / "idx").string() + " --dim 32 --quiet").exit_code == 0);
    const std::string base = (tmp / "idx").string() + " --db " + db.string() + " --out " + (tmp / "nb").string();
    REQUIRE(test::run_tool("retro-knn", base + " --queries " + qa.string() + " --quiet").exit_code == 0);
    const std::string manifest = test::read_text(tmp / "nb" / "manifest.json");
    check_complete(test::run_tool("retro-knn", base + " --queries " + qa.string() + " --resume"), tmp / "nb");
    check_refused(test::run_tool("retro-knn", base + " --queries " + qb.string() + " --resume"),
                  "already holds the finished neighbours of another job: the queries are " + qb.string() +
                      ", not those it searched for (" + fs::absolute(qa).lexically_normal().string() + ")");
    CHECK(test::read_text(tmp / "nb" / "manifest.json") == manifest);
    // an unfinished folder (a shard's blocks) resumed as the whole job: the same queries through a linked path are the
    // same queries (compared by contents since session 55), other queries are another job
    fs::create_directory_symlink(qa, tmp / "qa-link");
    const std::string part = (tmp / "idx").string() + " --db " + db.string() + " --out " + (tmp / "part").string() + " --block 4";
    REQUIRE(test::run_tool("retro-knn", part + " --queries " + qa.string() + " --shard 0/2 --quiet").exit_code == 0);
    check_refused(test::run_tool("retro-knn", part + " --queries " + qb.string() + " --resume"), "records another job: ");
    const test::RunResult linked = test::run_tool("retro-knn", part + " --queries " + (tmp / "qa-link").string() + " --resume");
    CHECK_MESSAGE(linked.exit_code == 0, linked.err);
    CHECK(fs::exists(tmp / "part" / "manifest.json"));
}

TEST_CASE("merge: a database or queries made again in place since the shards read them is named") {
    // a review (session 55): retro-index merge recorded the database as it is now beside the vectors of the chunks the
    // shards embedded, and retro-knn merge the queries likewise; both now hold the folder to what the shards recorded
    test::TempDir tmp("merge-remade");
    const fs::path db = test::chunk_test_db(tmp, 31);
    test::TempDir other("merge-remade-other");
    const fs::path db2 = test::chunk_test_db(other, 32);
    const auto remake = [](const fs::path& from, const fs::path& to) {   // another database at the same path
        fs::remove_all(to);
        fs::copy(from, to, fs::copy_options::recursive);
    };
    const fs::path saved = tmp / "db-saved";
    fs::copy(db, saved, fs::copy_options::recursive);
    for (int i = 0; i < 2; ++i)
        REQUIRE(test::run_tool("retro-index", db.string() + " --out " + (tmp / ("s" + std::to_string(i))).string() +
                                                  " --block 8 --dim 32 --shard " + std::to_string(i) + "/2 --quiet")
                    .exit_code == 0);
    remake(db2, db);
    const std::string shards = " " + (tmp / "s0").string() + " " + (tmp / "s1").string();
    check_refused(test::run_tool("retro-index", "merge" + shards + " --out " + (tmp / "idx").string()),
                  db.string() + ": has been made again since the shards read it as the database");
    CHECK_FALSE(fs::exists(tmp / "idx"));
    fs::remove_all(db);
    check_refused(test::run_tool("retro-index", "merge" + shards + " --out " + (tmp / "idx").string()),
                  "records the database " + fs::absolute(db).lexically_normal().string() + ", which is no longer there");
    remake(saved, db);
    REQUIRE(test::run_tool("retro-index", "merge" + shards + " --out " + (tmp / "idx").string() + " --quiet").exit_code == 0);

    // the queries of a sharded retro-knn made again before its merge
    const fs::path queries = tmp / "q";
    fs::copy(db2, queries, fs::copy_options::recursive);
    for (int i = 0; i < 2; ++i)
        REQUIRE(test::run_tool("retro-knn", (tmp / "idx").string() + " --db " + db.string() + " --queries " + queries.string() +
                                                " --out " + (tmp / ("k" + std::to_string(i))).string() + " --block 8 --shard " +
                                                std::to_string(i) + "/2 --quiet")
                    .exit_code == 0);
    remake(saved, queries);
    check_refused(test::run_tool("retro-knn", "merge " + (tmp / "k0").string() + " " + (tmp / "k1").string() + " --out " +
                                                  (tmp / "nb").string()),
                  queries.string() + ": has been made again since the shards read it as the queries");
    CHECK_FALSE(fs::exists(tmp / "nb"));
    remake(db2, queries);

    // shards of a version before session 55 (no queries_fingerprint in their state.json) merge in either order, also
    // beside one that records it (a review: the first merge of such shards failed on a null field, exit 2)
    const auto drop_fingerprint = [](const fs::path& shard) {
        nlohmann::json st = nlohmann::json::parse(test::read_text(shard / "state.json"));
        st.erase("queries_fingerprint");
        test::write_text(shard / "state.json", st.dump(2));
    };
    drop_fingerprint(tmp / "k0");
    for (const std::string order : {"k0 k1", "k1 k0"}) {
        CAPTURE(order);
        const std::string a = order.substr(0, 2), b = order.substr(3, 2);
        const test::RunResult mixed = test::run_tool("retro-knn", "merge " + (tmp / a).string() + " " + (tmp / b).string() +
                                                                      " --out " + (tmp / ("nb-" + a)).string() + " --quiet");
        CHECK_MESSAGE(mixed.exit_code == 0, mixed.err);
    }
    drop_fingerprint(tmp / "k1");
    const test::RunResult old = test::run_tool("retro-knn", "merge " + (tmp / "k0").string() + " " + (tmp / "k1").string() +
                                                                " --out " + (tmp / "nb-old").string() + " --quiet");
    CHECK_MESSAGE(old.exit_code == 0, old.err);
    CHECK(test::read_text(tmp / "nb-old" / "neighbours.npy") == test::read_text(tmp / "nb-k0" / "neighbours.npy"));

    // the database made again before the knn merge: named (the manifest recorded it beside neighbours of the old)
    remake(db2, db);
    check_refused(test::run_tool("retro-knn", "merge " + (tmp / "k0").string() + " " + (tmp / "k1").string() + " --out " +
                                                  (tmp / "nb2").string()),
                  db.string() + ": has been made again since the shards read it as the database");
    CHECK_FALSE(fs::exists(tmp / "nb2"));
}
