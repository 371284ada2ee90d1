// Implementation of knn_show.h.
#include "index/knn_show.h"

#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/log.h"
#include "core/manifest.h"
#include "core/memory_budget.h"
#include "core/npy.h"
#include "core/std_streams.h"
#include "core/terminal_text.h"
#include "data/chunk_db.h"
#include "text/tokenizer.h"
#include "text/tokenizer_folder.h"

namespace fs = std::filesystem;

namespace retro {
namespace {
std::string chunk_text(const ChunkDb& db, const Tokenizer& tok, std::int64_t id) {
    std::vector<std::int32_t> row;
    db.rows(id, id + 1, row);
    std::vector<int> ids;
    for (auto t : row)
        if (t != TOKEN_PAD) ids.push_back(t);
    return tok.decode(ids);
}
}  // namespace

void knn_show(const KnnShowOptions& opts) {
    std_output_required("the neighbours");
    if (opts.count < 1) user_error_in("--count", std::to_string(opts.count) + " is not a number of chunks", "give 1 or more");
    nlohmann::json km = manifest_read(opts.knn);
    if (const std::string tool = km.value("tool", std::string()); tool != "retro-knn" && !tool.empty())
        user_error_in((fs::path(opts.knn) / "manifest.json").string(), "was written by " + tool + ", not retro-knn",
                      "pass the neighbours folder retro-knn wrote");
    // --db and a --queries run's --queries, where left out: the folders the neighbours folder records (as retro-knn and
    // retro-index query take --db from the index); held to its fingerprints below all the same
    KnnShowOptions o = opts;
    if (o.db.empty()) o.db = manifest_recorded_folder(o.knn, "db", "database", o.knn + " was computed for", "--db");
    if (o.queries.empty() && !manifest_input(km, "queries", "path").empty())
        o.queries = manifest_recorded_folder(o.knn, "queries", "--queries database", o.knn + " was computed for", "--queries");
    ChunkDb db(o.db);
    std::string db_fp = folder_fingerprint(db.manifest());
    const std::string knn_db_fp = manifest_input(km, "db", "fingerprint");
    if (!knn_db_fp.empty() && knn_db_fp != db_fp)
        user_error_in(o.db, "is not the database " + o.knn + " was computed for", "pass the same --db as retro-knn");
    // the rows: --db's own chunks, or those of the run's --queries database (recorded in its manifest)
    const std::string knn_queries = manifest_input(km, "queries", "path");
    std::unique_ptr<ChunkDb> qdb_owned;
    if (!knn_queries.empty()) {
        if (o.queries.empty())
            user_error_in(o.knn, "holds the neighbours of the chunks of " + knn_queries + " (retro-knn --queries), not of --db's",
                          "add --queries " + knn_queries);
        qdb_owned = std::make_unique<ChunkDb>(o.queries, /*shard_ok=*/true);
        if (folder_fingerprint(qdb_owned->manifest()) != manifest_input(km, "queries", "fingerprint"))
            user_error_in(o.queries, "is not the --queries database " + o.knn + " was computed for (" + knn_queries + ")",
                          "pass the same --queries as retro-knn");
    } else if (!o.queries.empty()) {
        user_error_in("--queries", o.knn + " holds the neighbours of --db's own chunks (retro-knn ran without --queries)",
                      "drop --queries");
    }
    const ChunkDb& qdb = qdb_owned ? *qdb_owned : db;
    const std::string rows_name = qdb_owned ? "the --queries database" : "the database";
    // the files against the manifest's fingerprints, while that is cheap beside a look at a few rows (1 GiB: ~1 s of
    // hashing; a billion-chunk run's 16 GB would take a minute for every `show`): above, a note says it was not done
    if (o.verify) {
        std::error_code ec;
        const double bytes = static_cast<double>(fs::file_size(fs::path(o.knn) / "neighbours.npy", ec)) +
                             static_cast<double>(fs::file_size(fs::path(o.knn) / "distances.npy", ec));
        if (bytes <= double(std::int64_t{1} << 30)) manifest_verify_outputs(o.knn, {"neighbours.npy", "distances.npy"});
        else log_info(cat(o.knn, ": neighbours.npy and distances.npy (", memory_format_bytes(bytes), ") not re-hashed for a look at ",
                          o.count, " rows; retro-train verifies them when it reads them"));
    }
    NpyArray nb((fs::path(o.knn) / "neighbours.npy").string()), ds((fs::path(o.knn) / "distances.npy").string());
    if (nb.shape().size() != 2) user_error_in(nb.path(), "must be a 2-D array (queries, k)");
    nb.data<std::int64_t>();   // (the dtypes, checked before a row is read: a file of another dtype is named)
    ds.data<float>();
    const std::int64_t k = nb.dim(1);
    if (nb.dim(0) != qdb.chunk_count())
        user_error_in(nb.path(), cat("has ", nb.dim(0), " rows, ", rows_name, " ", qdb.chunk_count(), " chunks"),
                      "compute the neighbours again with retro-knn");
    if (ds.shape() != nb.shape())
        user_error_in(ds.path(), "has shape " + shape_string(ds.shape()) + ", neighbours.npy " + shape_string(nb.shape()));
    Tokenizer tok(db.tokenizer_checked(o.tokenizer), db.tokenizer_fingerprint());
    if (o.chunk < 0 || o.chunk >= qdb.chunk_count())
        user_error_in("--chunk", std::to_string(o.chunk) + " is outside [0, " + std::to_string(qdb.chunk_count()) + ")");
    std::int64_t end = std::min(qdb.chunk_count(), o.chunk + std::max<std::int64_t>(1, o.count));
    if (end - o.chunk < o.count)   // a note, not a refusal: the chunks up to the last are shown
        log_info(cat("--count ", o.count, ": ", rows_name, " ends at chunk ", qdb.chunk_count() - 1, ", showing ",
                     end - o.chunk));
    // the rows shown are checked before anything is printed (only they are read past the verification above)
    for (std::int64_t c = o.chunk; c < end; ++c) {
        qdb.doc_of_checked(c);
        for (std::int64_t r = 0; r < k; ++r) {
            const std::int64_t id = nb.data<std::int64_t>()[c * k + r];   // -1 pads a short row (docs/formats.md)
            if (id < -1 || id >= db.chunk_count())
                user_error_in(nb.path(), cat("row ", c, " names chunk ", id, " outside [0, ", db.chunk_count(), ")"),
                              "compute the neighbours again with retro-knn");
            if (id >= 0) db.doc_of_checked(id);
        }
    }
    for (std::int64_t c = o.chunk; c < end; ++c) {
        nlohmann::json j = {{"chunk", c}, {"doc", qdb.doc_of(c)}, {"text", chunk_text(qdb, tok, c)}, {"neighbours", nlohmann::json::array()}};
        for (std::int64_t r = 0; r < k; ++r) {
            std::int64_t id = nb.data<std::int64_t>()[c * k + r];
            if (id < 0) continue;
            j["neighbours"].push_back({{"chunk", id}, {"doc", db.doc_of(id)}, {"score", ds.data<float>()[c * k + r]},
                                       {"text", chunk_text(db, tok, id)}});
        }
        if (o.json) {
            std::printf("%s\n", json_line(j).c_str());
            continue;
        }
        std::printf("%schunk %lld (document %lld):\n  %s\n", qdb_owned ? "query " : "", static_cast<long long>(c), static_cast<long long>(j["doc"].get<std::int64_t>()),
                    terminal_text(j["text"].get<std::string>()).c_str());
        if (j["neighbours"].empty())
            std::printf("  (no neighbour: every slot is -1, none was found outside the chunk's document)\n");
        for (const auto& n : j["neighbours"])
            std::printf("  neighbour %lld (document %lld, score %.3f):\n    %s\n", static_cast<long long>(n["chunk"].get<std::int64_t>()),
                        static_cast<long long>(n["doc"].get<std::int64_t>()), n["score"].get<double>(), terminal_text(n["text"].get<std::string>()).c_str());
        std::printf("\n");
    }
}

}  // namespace retro
