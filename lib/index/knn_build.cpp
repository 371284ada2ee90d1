// Implementation of knn_build.h. Like retro-index: OUT/state.json first, parts per query block,
// then neighbours.npy / distances.npy, manifest.json last.
#include "index/knn_build.h"

#include <cstdio>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <numeric>
#include <set>

#include <unistd.h>

#include "core/atomic_file.h"
#include "core/cuda_device.h"
#include "core/error.h"
#include "core/log.h"
#include "core/manifest.h"
#include "core/disk_space.h"
#include "core/memory_budget.h"
#include "core/npy.h"
#include "core/progress.h"
#include "data/chunk_db.h"
#include "embed/embedder.h"
#include "index/bm25_knn.h"
#include "index/exact_search.h"
#include "index/exact_search_cuda.h"
#include "index/exact_self_join.h"
#include "index/faiss_index.h"
#include "index/index_build.h"
#include "index/index_folder.h"
#include "text/tokenizer.h"

namespace fs = std::filesystem;

namespace retro {

void knn_filter_row(const std::int64_t* cand_ids, const float* cand_scores, int candidates, std::int64_t self,
                    std::int64_t doc, const std::int64_t* docs, int k, std::int64_t* ids, float* scores) {
    int kept = 0;
    for (int c = 0; c < candidates && kept < k; ++c) {
        std::int64_t id = cand_ids[c];
        if (id < 0 || id == self || (docs && docs[id] == doc)) continue;
        ids[kept] = id;
        scores[kept] = cand_scores[c];
        ++kept;
    }
    for (; kept < k; ++kept) {
        ids[kept] = -1;
        scores[kept] = -std::numeric_limits<float>::infinity();
    }
}

ScratchKnn::ScratchKnn(const ToolContext& ctx, const std::string& index, const std::string& db, int k)
    : scratch_("retro-scratch-knn") {
    dir_ = (fs::path(scratch_.path()) / "knn").string();
    KnnOptions o;
    o.index = index;
    o.db = db;
    o.out = dir_;
    o.k = k;
    o.force = true;
    log_info("searching the neighbours of every chunk of " + db + " in " + index);
    knn_build(ctx, o);
}

ScratchKnn::~ScratchKnn() = default;

namespace {

std::string state_path(const std::string& dir) { return (fs::path(dir) / "state.json").string(); }

// Embeddings of the query chunks as f32, block by block.
class QuerySource {
public:
    // device "cuda" (retro-knn --exact --device cuda): a bert index embeds the query chunks on the GPU too
    QuerySource(const IndexFolder& folder, const ChunkDb& db, const ChunkDb* query_db, const std::string& device)
        : query_db_(query_db) {
        if (!query_db_) {   // the database itself: its embeddings, one row per chunk
            emb_ = index_folder_embeddings(folder, db);
            return;
        }
        // a bert or t5 index decodes the query chunks to text: with the tokenizer they were chunked with (checked)
        const std::string kind = folder.embedder().is_object() ? folder.embedder().value("name", "") : "";
        if (kind == "bert" || kind == "t5" || kind == "clip")
            tok_ = std::make_unique<Tokenizer>(query_db_->tokenizer_checked(""), query_db_->tokenizer_fingerprint());
        embedder_ = embedder_from_json(folder.embedder(), folder.dir, tok_.get(), device);
        if (embedder_->dim() == folder.dim)   // (a dimension that differs is refused by its own check, naming it)
            index_folder_check_embedder(folder, db, *embedder_);   // the manifest's settings give the index's vectors
    }
    std::int64_t rows() const { return query_db_ ? query_db_->chunk_count() : emb_.dim(0); }
    void get(std::int64_t b, std::int64_t e, int d, std::vector<float>& out) {
        out.resize(static_cast<std::size_t>((e - b) * d));
        if (!query_db_) {
            if (emb_.dtype() == DType::F32) {
                std::copy(emb_.data<float>() + b * d, emb_.data<float>() + e * d, out.begin());
            } else {
                const auto* h = static_cast<const std::uint16_t*>(emb_.raw());
                for (std::int64_t i = 0; i < (e - b) * d; ++i) out[static_cast<std::size_t>(i)] = f16_to_f32(h[b * d + i]);
            }
            return;
        }
        tokens_.clear();
        query_db_->rows(b, e, tokens_);
        embedder_->embed(tokens_.data(), e - b, query_db_->chunk_size(), out.data());
    }

private:
    const ChunkDb* query_db_;
    NpyArray emb_;
    std::unique_ptr<Tokenizer> tok_;
    std::unique_ptr<Embedder> embedder_;
    std::vector<std::int32_t> tokens_;
};

// The index's embeddings as one f32 array (mapped when stored as f32).
class BaseVectors {
public:
    BaseVectors(const IndexFolder& folder, const ChunkDb& db, const std::string& option)
        : emb_(index_folder_embeddings(folder, db)) {
        if (emb_.dtype() == DType::F32) return;
        memory_require(option, 4.0 * static_cast<double>(emb_.numel()),
                       cat("an f32 copy of the ", emb_.dim(0), " f16 embeddings for exact search"),
                       "search the index without " + option + ", or an index built with --embedding-dtype f32 (mapped, not copied)");
        const auto* h = static_cast<const std::uint16_t*>(emb_.raw());
        copy_.resize(static_cast<std::size_t>(emb_.numel()));
        for (std::size_t i = 0; i < copy_.size(); ++i) copy_[i] = f16_to_f32(h[i]);
    }
    const float* data() const { return copy_.empty() ? emb_.data<float>() : copy_.data(); }
    std::int64_t rows() const { return emb_.dim(0); }
    int dim() const { return static_cast<int>(emb_.dim(1)); }

private:
    NpyArray emb_;
    std::vector<float> copy_;
};

struct Searcher {
    const KnnOptions& opts;
    const ChunkDb& db;
    bool self_mode;
    std::unique_ptr<FaissIndex> index;
    std::unique_ptr<BaseVectors> base;
    std::unique_ptr<CudaStreamOwner> gpu_stream;   // the stream gpu runs on (declared first: destroyed last)
    std::unique_ptr<CudaExactSearch> gpu;          // --device cuda: the base on the GPU

    // Searches queries [q0, q0+n) into ids/scores (n x k).
    void search(const float* q, std::int64_t q0, std::int64_t n, int d, bool exact, std::int64_t* ids, float* scores) {
        search_rows(q, [q0](std::int64_t i) { return q0 + i; }, n, d, exact, ids, scores);
    }
    // Searches n queries whose row numbers (for the self-mode document filter) are row_of(0..n-1).
    template <typename RowOf>
    void search_rows(const float* q, RowOf row_of, std::int64_t n, int d, bool exact, std::int64_t* ids, float* scores) {
        const std::int64_t* base_docs = self_mode ? doc_ids() : nullptr;
        std::vector<std::int64_t> qdocs;   // the query's own chunk shares its document: one filter drops both
        if (self_mode && exact)
            for (std::int64_t i = 0; i < n; ++i) qdocs.push_back(base_docs[row_of(i)]);
        if (exact && gpu) {
            gpu->search(q, n, self_mode ? qdocs.data() : nullptr, opts.k, ids, scores, gpu_stream->get());
            return;
        }
        if (exact) {
            ExactSearchOptions eo;
            eo.k = opts.k;
            if (self_mode) eo.query_docs = qdocs.data(), eo.base_docs = base_docs;
            exact_search_ip(q, n, base->data(), base->rows(), d, eo, ids, scores);
            return;
        }
        const int k = opts.k;
        if (index->filters_inside()) {   // our searchers drop the query's document inside the search
            if (self_mode)
                for (std::int64_t i = 0; i < n; ++i) qdocs.push_back(base_docs[row_of(i)]);
            index->search(n, q, k, ids, scores, self_mode ? AnnFilter{qdocs.data(), base_docs} : AnnFilter{});
            return;
        }
        int kc = static_cast<int>(std::min<std::int64_t>(k + opts.extra, index->size()));
        std::vector<std::int64_t> todo(static_cast<std::size_t>(n)), cand;   // rows to (re)search
        std::iota(todo.begin(), todo.end(), std::int64_t{0});
        std::vector<float> qs, cscore;
        // FAISS's own search cannot filter: search k + extra and drop the query's document. A row left
        // short although all kc candidates came back was filled by its own document: search it again
        // with 8x the candidates, up to 3 more times (at most the whole index), so -1 only pads rows
        // that truly have fewer than k neighbours outside their document.
        for (int round = 0; round < 4 && !todo.empty(); ++round) {
            const auto m = static_cast<std::int64_t>(todo.size());
            const float* qp = q;
            if (round > 0) {
                qs.resize(static_cast<std::size_t>(m * d));
                for (std::int64_t t = 0; t < m; ++t) std::copy(q + todo[t] * d, q + (todo[t] + 1) * d, qs.begin() + t * d);
                qp = qs.data();
                widened_rows_ += m;
            }
            cand.assign(static_cast<std::size_t>(m * kc), -1);
            cscore.assign(cand.size(), 0.0f);
            index->search(m, qp, kc, cand.data(), cscore.data());
            std::vector<std::int64_t> again;
            for (std::int64_t t = 0; t < m; ++t) {
                const std::int64_t i = todo[t];
                knn_filter_row(cand.data() + t * kc, cscore.data() + t * kc, kc, self_mode ? row_of(i) : -1,
                               self_mode ? base_docs[row_of(i)] : -1, base_docs, k, ids + i * k, scores + i * k);
                if (self_mode && ids[i * k + k - 1] < 0 && cand[static_cast<std::size_t>(t * kc + kc - 1)] >= 0) again.push_back(i);
            }
            const int wider = static_cast<int>(std::min<std::int64_t>(std::int64_t{kc} * 8, index->size()));
            if (wider <= kc) break;
            kc = wider;
            todo.swap(again);
        }
    }
    const std::int64_t* doc_ids() const {
        static_assert(sizeof(std::int64_t) == 8);
        return doc_ids_.data();
    }
    std::vector<std::int64_t> doc_ids_;
    std::int64_t widened_rows_ = 0;   // rows searched again with more candidates (approximate search)
};

}  // namespace

void knn_write_manifest(const ToolContext& ctx, const nlohmann::json& state, const std::string& out, double recall,
                        std::int64_t recall_sample) {
    Manifest m(ctx);
    std::int64_t rows = 0, k = 0;
    double padded = 0;
    {   // how many slots stayed -1: fewer than k candidates outside the query's document were found
        NpyArray nb((fs::path(out) / "neighbours.npy").string());
        rows = nb.dim(0);
        k = nb.dim(1);
        std::int64_t missing = 0;
        for (std::int64_t i = 0; i < nb.numel(); ++i) missing += nb.data<std::int64_t>()[i] < 0;
        double frac = nb.numel() ? static_cast<double>(missing) / static_cast<double>(nb.numel()) : 0.0;
        padded = frac;
        m.extra()["padded_fraction"] = frac;
        if (frac > 0.01) {
            const nlohmann::json& p = state["parameters"];
            const bool own_db = state["queries"].get<std::string>().empty();
            const ChunkDb searched(state["db"].get<std::string>());
            const std::int64_t docs = own_db ? searched.doc_count() : 0, k = p.value("neighbours", std::int64_t(0));
            // an index that holds no approximation (Flat): every chunk was compared, --nprobe cannot help
            std::string factory;
            if (p.value("kind", "") != "bm25") {
                const nlohmann::json im = manifest_read(state["index"].get<std::string>());
                if (im.contains("index") && im["index"].is_object()) factory = im["index"].value("factory", std::string());
            }
            const bool exhaustive = p.value("exact", false) ||
                                    (!factory.empty() && factory.find("IVF") == std::string::npos && factory.find("HNSW") == std::string::npos);
            char pct[16];
            std::snprintf(pct, sizeof pct, "%.1f%%", 100 * frac);
            std::string why;
            if (own_db && docs <= 1)   // every candidate is the query's own document, which the filter drops
                why = "(the database holds one document and a chunk's own document is excluded: chunk a corpus of several "
                      "documents, e.g. one a file)";
            else if (p.value("kind", "") == "bm25")
                why = "(BM25: fewer chunks of other documents share a token with the query)";
            else if (exhaustive)
                why = cat("(every chunk was compared: the database has too few chunks outside a query's document for ", k,
                          " neighbours; lower --neighbours)");
            else
                why = "(fix: a larger --nprobe or --ef-search, or --exact, which filters inside the search)";
            log_warn(std::string(pct) + " of neighbour slots are -1: fewer than k neighbours outside the query's document "
                     "were found " + why);
        }
    }
    m.parameters() = state["parameters"];
    m.add_input_folder("index", state["index"].get<std::string>());
    m.add_input_folder("db", state["db"].get<std::string>());
    if (!state["queries"].get<std::string>().empty()) m.add_input_folder("queries", state["queries"].get<std::string>());
    if (recall_sample > 0) m.extra()["recall"] = {{"sample", recall_sample}, {"recall_at_k", recall}};
    m.add_output(out, "neighbours.npy");
    m.add_output(out, "distances.npy");
    m.inputs_check();   // before the run's marks go: inputs made again meanwhile leave it unfinished (core/input_stamps.h)
    fs::remove(state_path(out));
    parts_remove(out);
    m.write(out);
    // the line every other tool ends with (a new user's pass, session 54: retro-knn ended without one)
    char pct[32];
    std::snprintf(pct, sizeof pct, "%.2f", padded * 100);
    log_info(cat("wrote ", out, ": ", rows, " rows of ", k, " neighbours (", pct, " % of the slots -1)"));
}

namespace {

// recall@k of the approximate neighbours against exact search, on `sample` evenly spaced queries, searched
// together in one exact search. A returned neighbour counts as found when exact search returned it, or when its
// score ties the k-th exact score (duplicate chunks make equal scores common; which of them is kept is arbitrary).
double measure_recall(Searcher& s, QuerySource& queries, const std::string& out, std::int64_t sample, int d) {
    NpyArray approx((fs::path(out) / "neighbours.npy").string());
    const std::int64_t n = queries.rows();
    const int k = s.opts.k;
    sample = std::min(sample, n);
    std::vector<std::int64_t> rows(static_cast<std::size_t>(sample));
    std::vector<float> qv(static_cast<std::size_t>(sample * d)), one;
    for (std::int64_t i = 0; i < sample; ++i) {
        rows[static_cast<std::size_t>(i)] = i * n / sample;
        queries.get(rows[static_cast<std::size_t>(i)], rows[static_cast<std::size_t>(i)] + 1, d, one);
        std::copy(one.begin(), one.end(), qv.begin() + i * d);
    }
    std::vector<std::int64_t> ids(static_cast<std::size_t>(sample * k));
    std::vector<float> scores(ids.size());
    s.search_rows(qv.data(), [&](std::int64_t i) { return rows[static_cast<std::size_t>(i)]; }, sample, d, true, ids.data(),
                  scores.data());
    double hit = 0, total = 0;
    for (std::int64_t i = 0; i < sample; ++i) {
        const std::int64_t r = rows[static_cast<std::size_t>(i)];
        const std::int64_t* ex = ids.data() + i * k;
        std::set<std::int64_t> exact;
        float kth = std::numeric_limits<float>::infinity();
        for (int j = 0; j < k; ++j)
            if (ex[j] >= 0) exact.insert(ex[j]), kth = scores[static_cast<std::size_t>(i * k + j)];
        total += static_cast<double>(exact.size());
        double found = 0;
        for (int j = 0; j < k; ++j) {
            const std::int64_t id = approx.data<std::int64_t>()[r * k + j];
            if (id < 0) continue;
            // a neighbour tied with the exact k-th counts as found, by its true inner product: distances.npy holds the
            // index's own scores, which a compressed index (PQ, SQ, PCA) overstates (IVF64,PQ8x4 reported recall 0.49
            // for a true 0.08: a helper's pass, session 54)
            const float* v = s.base->data() + id * d;
            const float* q = qv.data() + i * d;
            double sc = 0;
            for (int c = 0; c < d; ++c) sc += static_cast<double>(q[c]) * v[c];
            if (exact.count(id) || sc >= kth - 1e-5 * std::max(1.0, std::fabs(static_cast<double>(kth)))) found += 1;
        }
        hit += std::min<double>(found, static_cast<double>(exact.size()));
    }
    return total > 0 ? hit / total : 1.0;
}

}  // namespace

bool knn_join_parts(const KnnOptions& opts, const BlockParts& nb, const BlockParts& ds) {
    if (opts.shard.active()) {
        state_mark_shard_done(opts.out, opts.shard.index, opts.shard.count);
        log_info("shard done; join the shards with: retro-knn merge SHARD_DIRS... --out DIR");
        return false;
    }
    npy_concat_rows(ds.collect({opts.out}), (fs::path(opts.out) / "distances.npy").string(), DType::F32);
    npy_concat_rows(nb.collect({opts.out}), (fs::path(opts.out) / "neighbours.npy").string(), DType::I64);
    return true;
}

namespace {

std::string queries_named(const std::string& q) { return q.empty() ? std::string("the database itself") : q; }

// What finished neighbours (their manifest `done`) differ in from the job in `state` ("" for the same job): its
// parameters, then the index searched (`index` as the user named it).
std::string knn_difference(const nlohmann::json& done, const nlohmann::json& state, const std::string& index) {
    if (std::string d = json_first_difference(done.value("parameters", nlohmann::json::object()), state["parameters"],
                                              "parameters");
        !d.empty())
        return d;
    if (manifest_input(done, "index", "fingerprint") != state["index_fingerprint"].get<std::string>())
        return "the index " + index + " is not the one it was searched in (" + manifest_input(done, "index", "path") + ")";
    // the queries (another --queries database found "already complete" before: found by session 55's merge --resume)
    const std::string queries = state.value("queries", std::string()), was = manifest_input(done, "queries");
    if (manifest_input(done, "queries", "fingerprint") !=
        (queries.empty() ? std::string() : folder_fingerprint(manifest_read(queries)))) {
        if (!queries.empty() && queries == was) return "its queries " + queries + " have been made again since it searched for them";
        return "the queries are " + queries_named(queries) + ", not those it searched for (" + queries_named(was) + ")";
    }
    return std::string();
}

const nlohmann::json& field(const nlohmann::json& j, const char* key) {   // null where absent (nothing inserted)
    static const nlohmann::json none;
    const auto it = j.find(key);
    return it == j.end() ? none : *it;
}

std::string string_field(const nlohmann::json& j, const char* key) {
    const nlohmann::json& v = field(j, key);
    return v.is_string() ? v.get<std::string>() : std::string();
}

// What the job of knn state `now` differs in from `recorded`'s ("" for the same; `whose` names `recorded`): the index,
// rows and parameters, then the queries — by their contents where both record queries_fingerprint (since session 55:
// the same folder reached by another path is the same queries, one made again in place is not), else by path (a
// state of an older version).
std::string knn_state_difference(const nlohmann::json& recorded, const nlohmann::json& now, const std::string& whose) {
    for (const char* key : {"index_fingerprint", "rows", "parameters"})
        if (field(recorded, key) != field(now, key))
            return json_first_difference(field(recorded, key), field(now, key), key, whose);
    const std::string was = string_field(recorded, "queries"), is = string_field(now, "queries");
    if (field(recorded, "queries_fingerprint").is_string() && field(now, "queries_fingerprint").is_string()) {
        if (field(recorded, "queries_fingerprint") == field(now, "queries_fingerprint")) return "";
        return was == is ? "the queries " + queries_named(is) + " have been made again " +
                               (whose == "the folder's" ? std::string("since the stopped search began")
                                                        : std::string("between the shards' searches"))
                         : "the queries are " + queries_named(is) + ", " + whose + " " + queries_named(was);
    }
    return was == is ? std::string() : "the queries are " + queries_named(is) + ", " + whose + " " + queries_named(was);
}

// The inputs the output folder's guard keeps --out apart from.
std::vector<OutputInput> knn_output_inputs(const KnnOptions& opts) {
    return {{"the index", opts.index}, {"--db", opts.db}, {"--queries", opts.queries}};
}

}  // namespace

bool knn_state_write(const ToolContext& ctx, const KnnOptions& opts, const nlohmann::json& state) {
    (void)disk_free_bytes(opts.out);   // a RETRO_DISK_FREE that is no size refused before the folder is made
    const auto difference = [&](const nlohmann::json& done) { return knn_difference(done, state, opts.index); };
    const std::vector<OutputInput> inputs = knn_output_inputs(opts);
    if (output_folder_finished(opts.out, opts.resume, opts.force, "the finished neighbours", difference)) return false;
    output_folder_prepare(ctx.tool, opts.out, opts.force, opts.resume, inputs);
    if (opts.resume && fs::exists(state_path(opts.out))) {
        const nlohmann::json old = json_read_file(state_path(opts.out));
        // (the queries too since session 55: another --queries of as many rows was resumed into the same folder)
        if (const std::string d = knn_state_difference(old, state, "the folder's"); !d.empty())
            user_error_in(state_path(opts.out), "records another job: " + d,
                          "rerun with the folder's settings to resume it, or --force to start over");
        state_check_same_shard(old, state_path(opts.out), opts.shard.index, opts.shard.count);
    }
    nlohmann::json written = state;
    written["shard"] = state_shard_record(opts.shard.index, opts.shard.count);
    written["parts_sealed"] = true;   // block_parts.h: every part of this folder gets its seal
    write_file_atomic(state_path(opts.out), written.dump(2));
    return true;
}

void knn_check_k(std::int64_t k, std::int64_t chunks, bool self_mode, const std::string& db) {
    if (self_mode ? k >= chunks : k > chunks)
        user_error_in("--neighbours", cat(k, " is ", self_mode ? "not below" : "more than", " the ", chunks, " chunks of ", db,
                                          self_mode ? " (a chunk is never its own neighbour)" : ""),
                      cat("give at most ", self_mode ? chunks - 1 : chunks));
}

std::unique_ptr<ChunkDb> knn_queries_open(const std::string& queries, const ChunkDb& db, const std::string& db_dir) {
    if (queries.empty()) return nullptr;
    auto qdb = std::make_unique<ChunkDb>(queries, /*shard_ok=*/true);   // (a shard's chunks are queries as good as any)
    const std::string query_tok = manifest_input(qdb->manifest(), "tokenizer", "fingerprint"),
                      db_tok = manifest_input(db.manifest(), "tokenizer", "fingerprint");
    if (!query_tok.empty() && !db_tok.empty() && query_tok != db_tok)   // its token ids mean other pieces
        user_error_in(queries, "was chunked with another tokenizer than --db " + db_dir,
                      "chunk the queries with the database's tokenizer");
    if (folder_fingerprint(qdb->manifest()) == folder_fingerprint(db.manifest())) return nullptr;   // --db itself
    return qdb;
}

void knn_build(const ToolContext& ctx, const KnnOptions& opts) {
    if (opts.k < 1) user_error_in("--neighbours", "must be at least 1");
    if (opts.extra < 0) user_error_in("--extra", "must not be negative");
    if (opts.block < 1) user_error_in("--block", "must be positive");
    if (opts.measure_recall < 0) user_error_in("--measure-recall", "must not be negative (got " + std::to_string(opts.measure_recall) + ")", "0 measures nothing");
    index_check_search_options(opts.nprobe, opts.ef_search);
    if (opts.exact) {   // brute force reads embeddings.npy, never index.faiss: these would be ignored silently
        if (opts.faiss_search) user_error_in("--faiss-search", "chooses how index.faiss is searched; --exact does not search it", "drop one of the two");
        if (opts.nprobe > 0) user_error_in("--nprobe", "tunes the IVF index's search; --exact does not search it", "drop one of the two");
        if (opts.ef_search > 0) user_error_in("--ef-search", "tunes the HNSW index's search; --exact does not search it", "drop one of the two");
    }
    output_folder_refuse_existing(ctx.tool, opts.out, opts.force, opts.resume);   // before the index is read
    // another tool's folder (an index given as --out with --resume), an input or a folder inside one: refused before
    // the index and the database are read and verified (minutes for a large index), not named as neighbours of
    // another job after it
    output_folder_guard(opts.out, ctx.tool, knn_output_inputs(opts), false, /*lock=*/false);
    // a block's ids and scores (k per query) and its candidate lists, a block being at most the queries there are
    // (`--block 300000000` over 4,740 chunks was refused for 78 GiB). Blamed on what a user must change: an --extra
    // above its default and k (`--extra 1000000000` was blamed on --block), a --block above its default, else
    // --neighbours (`--neighbours 1000000000` was blamed on --block: a helper's pass, session 54)
    const std::int64_t query_rows = ChunkDb(opts.queries.empty() ? opts.db : opts.queries, !opts.queries.empty()).chunk_count();
    const std::int64_t block_rows = std::max<std::int64_t>(1, std::min(opts.block, query_rows));
    const bool extra_to_blame = opts.extra > std::max(opts.k, 8);
    const bool block_to_blame = !extra_to_blame && block_rows > KnnOptions().block;
    memory_require(extra_to_blame ? "--extra" : block_to_blame ? "--block" : "--neighbours",
                   double(block_rows) * double(opts.k + opts.extra) * 28,
                   cat("blocks of ", block_rows, " queries with ", opts.k, " neighbours",
                       opts.extra > 0 ? cat(" and ", opts.extra, " extra candidates") : std::string()),
                   extra_to_blame ? "a smaller --extra (the default is 8)"
                   : block_to_blame ? cat("a smaller --block (the default is ", KnnOptions().block, ")")
                                    : std::string("a smaller --neighbours"));
    if (index_folder_kind(opts.index) == "bm25") return knn_build_bm25(ctx, opts);
    if (opts.device != "cpu" && opts.device != "cuda") user_error_in("--device", "expected cpu or cuda, got '" + opts.device + "'");
    if (opts.device == "cuda") {
        if (!opts.exact) user_error_in("--device cuda", "only exact search runs on the GPU", "add --exact");
        if (opts.k > kCudaExactMaxK)
            user_error_in("--neighbours", "exact search on CUDA keeps at most " + std::to_string(kCudaExactMaxK) + " neighbours",
                          "search on the CPU (--device cpu)");
        cuda_require("--device cuda", "retro-knn", "search on the CPU (--device cpu)");
    }
    ChunkDb db(opts.db);
    IndexFolderOptions fo;
    fo.load_index = !opts.exact;
    fo.nprobe = opts.nprobe;
    fo.ef_search = opts.ef_search;
    fo.verify = ctx.verify_inputs;
    IndexFolder folder = index_folder_open(opts.index, db, fo);
    const nlohmann::json& im = folder.manifest;
    std::unique_ptr<ChunkDb> qdb = knn_queries_open(opts.queries, db, opts.db);
    const bool self_mode = !qdb;
    knn_check_k(opts.k, db.chunk_count(), self_mode, opts.db);
    if (ctx.verify_inputs) {   // the files read whole below (index.faiss was checked as it was opened)
        const bool whole = !opts.shard.active();
        if (opts.exact || opts.measure_recall > 0 || (self_mode && whole))
            manifest_verify_outputs(opts.index, {"embeddings.npy"});
        if (self_mode) db.verify(ChunkDb::Verify::kLayout);   // doc_ids read whole for the same-document filter
        if (qdb && whole) qdb->verify(ChunkDb::Verify::kRows);
    }
    QuerySource queries(folder, db, qdb.get(), opts.device);
    Searcher s{opts, db, self_mode, nullptr, nullptr, nullptr, nullptr, {}};
    const int d = folder.dim;
    if (self_mode) {
        db.check_arrays();   // the copy below reads every doc_ids row anyway
        memory_require("--db", 8.0 * static_cast<double>(db.chunk_count()),
                       cat("a copy of the document ids of ", db.chunk_count(), " chunks (8 bytes a chunk)"), "a machine with more memory");
        s.doc_ids_.resize(static_cast<std::size_t>(db.chunk_count()));
        for (std::int64_t i = 0; i < db.chunk_count(); ++i) s.doc_ids_[static_cast<std::size_t>(i)] = db.doc_of(i);
    }
    if (opts.exact || opts.measure_recall > 0) {
        s.base = std::make_unique<BaseVectors>(folder, db, opts.exact ? "--exact" : "--measure-recall");
        if (opts.device == "cuda")
            if constexpr (kCudaBuilt) {
                s.gpu_stream = std::make_unique<CudaStreamOwner>();
                s.gpu = CudaExactSearch::upload(s.base->data(), s.base->rows(), d, self_mode ? s.doc_ids() : nullptr,
                                                s.gpu_stream->get());
            }
    }
    if (!opts.exact) {
        s.index = std::move(folder.index);
        s.index->use_faiss_search(opts.faiss_search);
    }

    nlohmann::json params = {{"neighbours", opts.k}, {"extra", opts.extra}, {"exact", opts.exact}, {"device", opts.device},
                             {"nprobe", opts.nprobe}, {"ef_search", opts.ef_search}, {"block", opts.block},
                             {"same_document_filter", self_mode}};
    // FAISS's own search of the index gives other neighbours than RetroKit's (an IVF's ties, HNSW's walk): recorded
    // so that a --resume or a shard of the other kind is refused (a helper's pass, session 54, merged both kinds);
    // only when given, so that a folder an earlier version made without it resumes and merges as before
    if (opts.faiss_search) params["faiss_search"] = true;
    nlohmann::json state = {{"tool", "retro-knn"},
                            {"index", fs::absolute(opts.index).lexically_normal().string()},
                            {"db", fs::absolute(opts.db).lexically_normal().string()},
                            {"queries", qdb ? fs::absolute(opts.queries).lexically_normal().string() : std::string()},
                            {"queries_fingerprint", qdb ? folder_fingerprint(qdb->manifest()) : std::string()},
                            {"index_fingerprint", folder_fingerprint(im)},
                            {"rows", queries.rows()},
                            {"parameters", params}};
    if (!knn_state_write(ctx, opts, state)) return;
    // (once the folder is taken: before, this line came ahead of the refusals of --out and --resume)
    if (s.index) log_info("search: " + s.index->search_method());

    BlockParts nb(opts.out, "neighbours", queries.rows(), opts.block), ds(opts.out, "distances", queries.rows(), opts.block);
    auto todo = nb.pending_with(ds, opts.shard);
    if (todo.empty()) log_info(nb.nothing_pending(opts.shard, "searched"));
    if (const std::string line = nb.resuming_line(todo.size(), opts.shard, "searched"); !line.empty()) log_info(line);
    std::int64_t total = 0;
    for (auto b : todo) total += nb.block_end(b) - nb.block_begin(b);
    // the disk: the parts still to search (8-byte ids and 4-byte scores), then (one run) the arrays beside them
    disk_space_warn(opts.out, (double(total) + (opts.shard.active() ? 0.0 : double(queries.rows()))) * double(opts.k) * 12.0,
                    opts.shard.active() ? "the neighbours' parts" : "the neighbours' parts and the arrays joined from them");
    Progress progress(opts.exact ? "exact search" : "searching", total, "queries");
    std::vector<float> q, scores;
    std::vector<std::int64_t> ids;
    // The database against itself, exactly (--exact, or a Flat index searched by RetroKit): each pair
    // scored once (exact_self_join.h), same results as scoring both ways.
    const float* self_join_rows = nullptr;
    if (self_mode && !opts.shard.active() && opts.device == "cpu" && self_join_available())
        self_join_rows = opts.exact ? s.base->data() : s.index->flat_vectors();
    if (self_join_rows) {
        log_info("exact self-join: each pair of chunks scored once");
        memory_require("--neighbours", double(db.chunk_count()) * (64 + 16.0 * opts.k),
                       "the running lists of " + std::to_string(db.chunk_count()) + " chunks", "a smaller --neighbours, or --shard");
        SelfJoinOptions so;
        so.k = opts.k;
        so.block = opts.block;
        so.docs = s.doc_ids();
        exact_self_join_ip(self_join_rows, db.chunk_count(), d, so, todo,
                           [&](std::int64_t b, const std::int64_t* bids, const float* bscores) {
                               const std::int64_t n = nb.block_end(b) - nb.block_begin(b);
                               npy_save(ds.part_path(b), {n, static_cast<std::int64_t>(opts.k)}, bscores);
                               ds.seal(b);
                               npy_save(nb.part_path(b), {n, static_cast<std::int64_t>(opts.k)}, bids);
                               nb.seal(b);   // marks the block done
                               progress.add(n);
                           });
        todo.clear();
    }
    for (auto b : todo) {
        std::int64_t b0 = nb.block_begin(b), b1 = nb.block_end(b), n = b1 - b0;
        ids.assign(static_cast<std::size_t>(n * opts.k), -1);
        scores.assign(ids.size(), 0.0f);
        // exact search: slices of 2048 (the progress bar moves); approximate: 8192, since an IVF
        // search reads each probed list once per slice (ivf_search.h)
        const std::int64_t slice = opts.exact ? 2048 : 8192;
        for (std::int64_t r = b0; r < b1; r += slice) {
            std::int64_t e = std::min(b1, r + slice);
            queries.get(r, e, d, q);
            s.search(q.data(), r, e - r, d, opts.exact, ids.data() + (r - b0) * opts.k, scores.data() + (r - b0) * opts.k);
            progress.add(e - r);
        }
        npy_save(ds.part_path(b), {n, static_cast<std::int64_t>(opts.k)}, scores.data());
        ds.seal(b);
        npy_save(nb.part_path(b), {n, static_cast<std::int64_t>(opts.k)}, ids.data());
        nb.seal(b);   // written last: marks the block done
    }
    progress.finish();
    if (!knn_join_parts(opts, nb, ds)) return;
    double recall = 0;
    if (opts.measure_recall > 0 && !opts.exact) {
        recall = measure_recall(s, queries, opts.out, opts.measure_recall, d);
        log_info("recall@" + std::to_string(opts.k) + " against exact search on " +
                 std::to_string(std::min(opts.measure_recall, queries.rows())) + " queries: " + std::to_string(recall));
    }
    if (s.widened_rows_ > 0)   // FAISS's own search only
        log_info("widened " + std::to_string(s.widened_rows_) + " searches with more candidates (a row's own document filled "
                 "the first " + std::to_string(opts.k + opts.extra) + "; a row can be widened more than once)");
    // (the queries measured: --measure-recall past the query count measures them all, and the manifest said the asked number)
    knn_write_manifest(ctx, state, opts.out, recall, opts.exact ? 0 : std::min(opts.measure_recall, queries.rows()));
}

void knn_merge(const ToolContext& ctx, const std::vector<std::string>& shard_dirs, const std::string& out, bool force,
               bool resume) {
    if (shard_dirs.empty()) user_error_in("merge", "needs the shard folders");
    merge_resume_force_refuse(resume, force);
    shards_check_complete(shard_dirs, "retro-knn");
    const nlohmann::json first = json_read_file(state_path(shard_dirs.front()));
    for (const auto& d : shard_dirs)   // (shards of a version before session 55 record no queries_fingerprint: by path)
        if (const std::string diff = knn_state_difference(first, json_read_file(state_path(d)), "the first shard's"); !diff.empty())
            user_error_in(state_path(d), "belongs to another job than " + shard_dirs.front() + ": " + diff,
                          "merge the shards of one retro-knn command");
    std::vector<OutputInput> shards;
    for (const auto& d : shard_dirs) shards.push_back({"shard", d});
    // the index and queries the manifest will record are those the shards searched (a review, session 55)
    const std::string again = "run the shards again (the same retro-knn commands with --force)";
    const std::string shard0 = state_path(shard_dirs.front()), index = string_field(first, "index");
    recorded_folder_check(shard0, "the index", index, string_field(first, "index_fingerprint"), again);
    recorded_folder_check(shard0, "the queries", string_field(first, "queries"), string_field(first, "queries_fingerprint"), again);
    // and the database, as the index records it (the shards' own check at their start)
    recorded_folder_check(shard0, "the database", string_field(first, "db"),
                          manifest_input(manifest_read(index), "db", "fingerprint"),
                          "make the index and the shards again over the database as it is now",
                          (fs::path(index) / "manifest.json").string());
    if (resume) {   // finished neighbours of this job (merged, or found by one run) are complete; an interrupted merge made again
        const auto difference = [&](const nlohmann::json& done) { return knn_difference(done, first, index); };
        const MergeResume r = merge_resume_check(ctx.tool, out, force, shards, difference, {"neighbours.npy", "distances.npy"});
        if (r == MergeResume::kDone) return;
        force = r == MergeResume::kRemake;   // the interrupted merge's files removed, as --force does
    }
    NewOutputFolder new_out(out);   // a merge refused below (a shard missing blocks) leaves no folder to block the rerun
    output_folder_prepare(ctx.tool, out, force, false, shards, /*resumable=*/false, "a merge");
    std::int64_t rows = first.at("rows").get<std::int64_t>(), block = first.at("parameters").at("block").get<std::int64_t>();
    BlockParts nb(out, "neighbours", rows, block), ds(out, "distances", rows, block);
    npy_concat_rows(ds.collect(shard_dirs), (fs::path(out) / "distances.npy").string(), DType::F32);
    npy_concat_rows(nb.collect(shard_dirs), (fs::path(out) / "neighbours.npy").string(), DType::I64);
    knn_write_manifest(ctx, first, out, 0, 0);
    new_out.keep();
}

}  // namespace retro
