// Implementation of bm25_index_build.h over Xapian 1.4 (WritableDatabase, glass backend, compact).
#include "index/bm25_index_build.h"

#include <algorithm>
#include <filesystem>
#include <limits>
#include <vector>

#include <xapian.h>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/log.h"
#include "core/manifest.h"
#include "core/progress.h"
#include "data/chunk_db.h"
#include "index/bm25_params.h"
#include "text/tokenizer.h"

namespace fs = std::filesystem;

namespace retro {
namespace {

// Adds every chunk of `db` to a fresh Xapian database at `dir` (docid = row + 1); returns when committed.
void add_chunks(const ChunkDb& db, const std::string& dir) {
    Xapian::WritableDatabase w(dir, Xapian::DB_CREATE_OR_OVERWRITE | Xapian::DB_BACKEND_GLASS);
    const std::int64_t n = db.chunk_count();
    const int cs = db.chunk_size();
    Progress progress("indexing chunks", n, "chunks");
    std::vector<std::int32_t> tokens;
    for (std::int64_t b = 0; b < n; b += 4096) {
        const std::int64_t e = std::min(n, b + 4096);
        tokens.clear();
        db.rows(b, e, tokens);
        for (std::int64_t r = b; r < e; ++r) {
            Xapian::Document doc;
            const std::int32_t* t = tokens.data() + (r - b) * cs;
            for (int j = 0; j < cs; ++j)
                if (bm25_indexes(t[j])) doc.add_term(bm25_term(t[j]));   // each occurrence adds 1 to the wdf
            const Xapian::docid id = w.add_document(doc);
            RETRO_CHECK(static_cast<std::int64_t>(id) == r + 1, "Xapian gave chunk ", r, " docid ", id);
        }
        progress.add(e - b);
    }
    w.commit();
    w.close();
    progress.finish();
}

}  // namespace

void bm25_index_build(const ToolContext& ctx, const IndexBuildOptions& opts) {
    bm25_params_check(opts.bm25);
    if (opts.shard.active())
        user_error_in("--shard", "does not apply to --kind bm25 (one pass writes one Xapian database)", "drop --shard");
    ChunkDb db(opts.db);
    const std::int64_t n = db.chunk_count();
    if (n == 0) user_error_in(opts.db, "holds no chunks");
    // Xapian numbers documents in 32 bits (docid = row + 1): the build would fail at chunk 2^32 - 1, hours in
    if (n > static_cast<std::int64_t>(std::numeric_limits<Xapian::docid>::max()))
        user_error_in(opts.db, cat("holds ", n, " chunks; a --kind bm25 index numbers them with Xapian's 32-bit document "
                                   "ids, at most ", std::numeric_limits<Xapian::docid>::max()),
                      "index it with --kind dense, or split the corpus into databases of fewer chunks");
    if (ctx.verify_inputs) db.verify(ChunkDb::Verify::kRows);
    db.check_arrays();   // 8 bytes a chunk, beside the chunks the build reads: a bad database fails here, not at retro-knn
    const nlohmann::json params = {{"kind", "bm25"}, {"k1", opts.bm25.k1}, {"k3", opts.bm25.k3}, {"b", opts.bm25.b},
                                   {"min_normlen", opts.bm25.min_normlen}};
    // --resume of a finished index: "nothing to resume" for this job, refused for another (it was built again, other
    // parameters and all, as --force would: a helper's pass, session 54)
    const auto difference = [&](const nlohmann::json& done) {
        if (const std::string kind = done.value("kind", std::string("dense")); kind != "bm25") return "it is a " + kind + " index";
        if (std::string d = json_first_difference(done.value("parameters", nlohmann::json::object()), params, "parameters");
            !d.empty())
            return d;
        if (manifest_input(done, "db", "fingerprint") != folder_fingerprint(db.manifest()))
            return "the database " + opts.db + " is not the one it was built from (" + manifest_input(done, "db", "path") + ")";
        return std::string();
    };
    // (the guard first: another tool's folder is named as such, not as an index of another job)
    output_folder_guard(opts.out, ctx.tool, {{"the database", opts.db}}, false);
    if (output_folder_finished(opts.out, opts.resume, opts.force, "a complete index", difference)) return;
    // one pass, nothing to resume: Ctrl-C says to run it again with --force (it said "--resume", which then built it
    // all again), and the folder is marked as an unfinished bm25 build from the start
    output_folder_refuse_existing(ctx.tool, opts.out, opts.force, opts.resume);
    output_folder_prepare(ctx.tool, opts.out, opts.force, opts.resume, {{"the database", opts.db}}, /*resumable=*/false,
                          "a --kind bm25 build");
    const fs::path out(opts.out), build = out / "parts" / "bm25.build", final_path = out / kBm25DbFile;
    const std::string tmp = final_path.string() + ".tmp";
    fs::remove(out / "manifest.json");   // --resume: nothing complete-looking while it builds again
    if (opts.resume) log_info("--kind bm25 has no resumable parts: building the Xapian database again");
    fs::remove_all(build);
    fs::remove(tmp);
    try {
        add_chunks(db, build.string());
    } catch (const Xapian::Error& e) {
        user_error_in(build.string(), "Xapian could not write the database (" + e.get_description() + ")");
    }
    try {   // (a failure here named the build folder, which was whole: the compacted copy is what could not be written)
        log_info("compacting the Xapian database into " + final_path.string());
        Xapian::Database(build.string()).compact(tmp, Xapian::DBCOMPACT_SINGLE_FILE | Xapian::DBCOMPACT_NO_RENUMBER);
    } catch (const Xapian::Error& e) {
        std::error_code ec;
        fs::remove(tmp, ec);   // (a cut-short copy was left beside the folder; --force or --resume removed it)
        user_error_in(tmp, "Xapian could not write the compacted database (" + e.get_description() + ")");
    }
    commit_file_atomic(tmp, final_path.string());
    const Xapian::Database check(final_path.string());
    RETRO_CHECK(static_cast<std::int64_t>(check.get_doccount()) == n && static_cast<std::int64_t>(check.get_lastdocid()) == n,
                final_path.string(), " holds ", check.get_doccount(), " documents for ", n, " chunks");

    nlohmann::json bm25 = bm25_params_to_json(opts.bm25);
    bm25["terms"] = "t<token id>";
    bm25["excluded_tokens"] = {TOKEN_PAD, TOKEN_BOS, TOKEN_EOS};
    bm25["docid"] = "chunk row + 1";
    bm25["documents"] = n;
    bm25["average_length"] = check.get_avlength();
    bm25["xapian_version"] = Xapian::version_string();
    Manifest m(ctx);
    m.parameters() = params;
    m.extra()["kind"] = "bm25";
    m.extra()["bm25"] = bm25;
    m.add_input_folder("db", opts.db);
    m.add_output(opts.out, kBm25DbFile);
    m.inputs_check();   // before the run's marks go: inputs made again meanwhile leave it unfinished (core/input_stamps.h)
    fs::remove(out / "state.json");
    parts_remove(opts.out);
    m.write(opts.out);
    log_info("wrote " + opts.out + ": " + std::to_string(n) + " chunks, BM25 over Xapian " + Xapian::version_string());
}

}  // namespace retro
