// Implementation of bm25_knn.h.
#include "index/bm25_knn.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <vector>

#include "core/error.h"
#include "core/log.h"
#include "core/manifest.h"
#include "core/memory_budget.h"
#include "core/npy.h"
#include "core/progress.h"
#include "core/threads.h"
#include "data/chunk_db.h"
#include "index/bm25_params.h"
#include "index/bm25_postings.h"
#include "index/bm25_search.h"
#include "index/index_folder.h"

namespace fs = std::filesystem;

namespace retro {
namespace {

void refuse_dense_flags(const KnnOptions& opts) {
    if (opts.exact)
        user_error_in("--exact", "does not apply to a bm25 index: its search is exact already (Xapian's top k by BM25 score)",
                      "drop --exact");
    if (opts.measure_recall > 0)
        user_error_in("--measure-recall", "does not apply to a bm25 index: its search is exact, there is no approximation to measure",
                      "drop --measure-recall");
    if (opts.device != "cpu") user_error_in("--device", "a bm25 index is searched on the CPU (Xapian)", "drop --device");
    if (opts.nprobe != 0) user_error_in("--nprobe", "applies to FAISS IVF indices, not to a bm25 index", "drop it");
    if (opts.ef_search != 0) user_error_in("--ef-search", "applies to FAISS HNSW indices, not to a bm25 index", "drop it");
    if (opts.faiss_search) user_error_in("--faiss-search", "applies to FAISS indices, not to a bm25 index", "drop it");
    if (opts.extra != KnnOptions().extra)   // (Xapian's top k are filtered in the search itself: no candidates to add)
        user_error_in("--extra", "applies to FAISS indices' searches, not to a bm25 index", "drop it");
}

}  // namespace

void knn_build_bm25(const ToolContext& ctx, const KnnOptions& opts) {
    refuse_dense_flags(opts);
    ChunkDb db(opts.db);
    IndexFolderOptions fo;
    fo.load_index = false;
    const IndexFolder folder = index_folder_open(opts.index, db, fo);
    const Bm25Params params = bm25_params_from_json(folder.manifest.value("bm25", nlohmann::json()), folder.file("manifest.json"));
    std::unique_ptr<ChunkDb> qdb = knn_queries_open(opts.queries, db, opts.db);
    const bool self_mode = !qdb;
    knn_check_k(opts.k, db.chunk_count(), self_mode, opts.db);
    if (ctx.verify_inputs) {   // the Xapian database is searched for every query; the query chunks are read whole unsharded
        manifest_verify_outputs(opts.index, {kBm25DbFile});
        if (self_mode) db.verify(opts.shard.active() ? ChunkDb::Verify::kLayout : ChunkDb::Verify::kRows);
        else if (!opts.shard.active()) qdb->verify(ChunkDb::Verify::kRows);
    }
    const ChunkDb& queries = qdb ? *qdb : db;
    std::vector<std::int64_t> docs;   // self mode: each chunk's document, for the filter
    if (self_mode) {
        db.check_arrays();   // the copy below reads every doc_ids row anyway
        docs.resize(static_cast<std::size_t>(db.chunk_count()));
        for (std::int64_t i = 0; i < db.chunk_count(); ++i) docs[static_cast<std::size_t>(i)] = db.doc_of(i);
    }
    // The index's postings in memory, searched term at a time (bm25_postings.h), where they fit; else Xapian's
    // matcher, one searcher (one Xapian::Database) per thread. The choice is made (and the database opened, by its
    // total length) before any output; the postings are read once there is a block left to search.
    const std::string db_file = folder.file(kBm25DbFile);
    const char* forced = std::getenv("RETRO_BM25_SEARCH");
    if (forced && std::string(forced) != "xapian" && std::string(forced) != "postings")
        user_error_in("RETRO_BM25_SEARCH", cat("is '", forced, "'; expected xapian or postings"), "unset it");
    const std::int64_t total_length = bm25_total_length(db_file);
    const std::string unfit = bm25_postings_unfit(db.chunk_count(), db.chunk_size(), params);
    const double need = bm25_postings_bytes(db.chunk_count(), total_length, thread_count());
    const bool fits = need <= 0.5 * static_cast<double>(memory_available_bytes());
    const bool in_memory = forced ? std::string(forced) == "postings" : unfit.empty() && fits;
    if (in_memory && !unfit.empty()) user_error_in("RETRO_BM25_SEARCH=postings", unfit, "unset it");
    if (in_memory && !fits) memory_require("RETRO_BM25_SEARCH=postings", need, "the bm25 index's postings in memory", "unset it");
    nlohmann::json pj = {{"kind", "bm25"}, {"neighbours", opts.k}, {"block", opts.block},
                         {"same_document_filter", self_mode}, {"bm25", bm25_params_to_json(params)}};
    nlohmann::json state = {{"tool", "retro-knn"},
                            {"index", fs::absolute(opts.index).lexically_normal().string()},
                            {"db", fs::absolute(opts.db).lexically_normal().string()},
                            {"queries", qdb ? fs::absolute(opts.queries).lexically_normal().string() : std::string()},
                            {"queries_fingerprint", qdb ? folder_fingerprint(qdb->manifest()) : std::string()},
                            {"index_fingerprint", folder_fingerprint(folder.manifest)},
                            {"rows", queries.chunk_count()},
                            {"parameters", pj}};
    if (!knn_state_write(ctx, opts, state)) return;

    const int k = opts.k, cs = queries.chunk_size();
    BlockParts nb(opts.out, "neighbours", queries.chunk_count(), opts.block), ds(opts.out, "distances", queries.chunk_count(), opts.block);
    const auto todo = nb.pending_with(ds, opts.shard);
    std::int64_t total = 0;
    for (auto b : todo) total += nb.block_end(b) - nb.block_begin(b);
    std::unique_ptr<Bm25Postings> postings;
    std::vector<std::unique_ptr<Bm25PostingsSearcher>> fast;
    std::vector<std::unique_ptr<Bm25Searcher>> searchers;
    if (const std::string line = nb.resuming_line(todo.size(), opts.shard, "searched"); !line.empty()) log_info(line);
    if (todo.empty()) {
        log_info(nb.nothing_pending(opts.shard, "searched"));   // (a shard past the last block says so, as the dense search does)
    } else if (in_memory) {
        postings = std::make_unique<Bm25Postings>(db_file, params, db.chunk_count());
        for (int t = 0; t < thread_count(); ++t) fast.push_back(std::make_unique<Bm25PostingsSearcher>(*postings));
        log_info(cat("search: bm25 (the index's ", postings->postings(), " postings in memory, ", memory_format_bytes(need),
                     ", scored term at a time as Xapian's BM25Weight; ", fast.size(), " threads)"));
    } else {
        for (int t = 0; t < thread_count(); ++t)
            searchers.push_back(std::make_unique<Bm25Searcher>(db_file, params, db.chunk_count()));
        const std::string why = forced        ? std::string("RETRO_BM25_SEARCH=xapian")
                                : !unfit.empty() ? unfit
                                                 : "the postings in memory would need " + memory_format_bytes(need) +
                                                       ", more than half the memory available";
        log_info(cat("search: bm25 (Xapian BM25Weight, ", searchers.size(), " threads: ", why, ")"));
    }
    Progress progress("bm25 search", total, "queries");
    std::vector<std::int32_t> tokens;
    std::vector<std::int64_t> ids;
    std::vector<float> scores;
    for (auto b : todo) {
        const std::int64_t b0 = nb.block_begin(b), n = nb.block_end(b) - b0;
        tokens.clear();
        queries.rows(b0, b0 + n, tokens);
        ids.assign(static_cast<std::size_t>(n * k), -1);
        scores.assign(ids.size(), 0.0f);
        std::atomic<std::int64_t> next{0};   // slices of 64 queries, taken by whichever thread is free
        parallel_ranges(thread_count(), [&](std::int64_t, std::int64_t, int t) {
            for (std::int64_t i0; (i0 = next.fetch_add(64)) < n;) {
                const std::int64_t i1 = std::min(n, i0 + 64);
                for (std::int64_t i = i0; i < i1; ++i) {
                    const std::int64_t* filter = self_mode ? docs.data() : nullptr;
                    const std::int64_t skip = self_mode ? docs[static_cast<std::size_t>(b0 + i)] : -1;
                    if (postings) fast[static_cast<std::size_t>(t)]->search(tokens.data() + i * cs, cs, k, filter, skip, ids.data() + i * k, scores.data() + i * k);
                    else searchers[static_cast<std::size_t>(t)]->search(tokens.data() + i * cs, cs, k, filter, skip, ids.data() + i * k, scores.data() + i * k);
                }
                progress.add(i1 - i0);
            }
        });
        npy_save(ds.part_path(b), {n, static_cast<std::int64_t>(k)}, scores.data());
        ds.seal(b);
        npy_save(nb.part_path(b), {n, static_cast<std::int64_t>(k)}, ids.data());
        nb.seal(b);   // written last: marks the block done
    }
    progress.finish();
    if (!knn_join_parts(opts, nb, ds)) return;
    knn_write_manifest(ctx, state, opts.out, 0, 0);
}

}  // namespace retro
