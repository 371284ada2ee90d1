// Implementation of chunk_inspect.h.
#include "data/chunk_inspect.h"

#include <algorithm>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>

#include "core/error.h"
#include "core/fingerprint.h"
#include "core/log.h"
#include "core/manifest.h"
#include "core/terminal_text.h"
#include "data/chunk_db.h"
#include "text/corpus.h"
#include "text/tokenizer.h"
#include "text/tokenizer_folder.h"

namespace fs = std::filesystem;

namespace retro {
namespace {

using json = nlohmann::ordered_json;

std::unique_ptr<Tokenizer> open_tokenizer(const ChunkDb& db, const InspectOptions& o, bool required) {
    if (!o.tokenizer.empty())   // asked for
        return std::make_unique<Tokenizer>(db.tokenizer_checked(o.tokenizer), db.tokenizer_fingerprint());
    try {
        return std::make_unique<Tokenizer>(db.tokenizer_checked(""), db.tokenizer_fingerprint());
    } catch (const UserError& e) {
        if (required) throw;
        log_warn(std::string(e.what()) + ": statistics without text");   // --stats
        return nullptr;
    }
}

std::vector<int> non_pad(const std::vector<std::int32_t>& rows) {
    std::vector<int> ids;
    for (std::int32_t t : rows)
        if (t != TOKEN_PAD) ids.push_back(t);
    return ids;
}

json source_json(const DocSource& s) {
    return {{"file", s.source}, {"line", s.line}, {"byte_offset", s.byte_offset}, {"block", s.block}};
}

std::string source_text(const DocSource& s) {
    // a Parquet file's document is a row, and its offset the row's page's (text/corpus_parquet.h)
    if (corpus_is_parquet(s.source)) return cat(terminal_text(s.source, true), " row ", s.line, " (page at byte ", s.byte_offset, ")");
    return terminal_text(s.source, true) + (s.line > 0 ? ":" + std::to_string(s.line) : "") + " (byte offset " +
           std::to_string(s.byte_offset) + ")";
}

void check_id(const char* flag, std::int64_t id, std::int64_t count, const std::string& dir) {
    if (id < 0 || id >= count)
        user_error_in(flag, std::to_string(id) + " is outside [0, " + std::to_string(count) + ") of " + dir);
}


// UserError naming chunks.npy's row when one of its ids is outside the tokenizer's vocabulary (the tokenizer's
// decode named the model, as if it were the one at fault)
void check_row_ids(const ChunkDb& db, const Tokenizer& tok, std::int64_t row, const std::vector<int>& ids) {
    for (const int t : ids)
        if (t < 0 || t >= tok.vocab_size())
            user_error_in((fs::path(db.dir()) / "chunks.npy").string(),
                          cat("row ", row, " holds token id ", t, ", outside the tokenizer's vocabulary [0, ", tok.vocab_size(), ")"),
                          "rebuild the database with retro-chunk");
}

void inspect_chunk(const ChunkDb& db, const InspectOptions& o, std::ostream& out) {
    check_id("--chunk", o.chunk, db.chunk_count(), db.dir());
    auto tok = open_tokenizer(db, o, true);
    std::int64_t doc = db.doc_of_checked(o.chunk), first = db.doc_first(doc), end = db.doc_end(doc);
    std::vector<std::int32_t> rows;
    db.rows(o.chunk, o.chunk + 1, rows);
    std::vector<int> ids = non_pad(rows);
    check_row_ids(db, *tok, o.chunk, ids);
    DocSource src = db.source(doc);
    json j = {{"chunk", o.chunk},
              {"doc", doc},
              {"chunk_in_doc", o.chunk - first},
              {"doc_chunks", end - first},
              {"token_start", (o.chunk - first) * db.chunk_size()},
              {"tokens", ids.size()},
              {"padding", rows.size() - ids.size()},
              {"source", source_json(src)},
              {"ids", rows},
              {"text", tok->decode(ids)}};
    if (o.json) {
        out << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
        return;
    }
    out << "chunk " << o.chunk << " of " << db.chunk_count() << ": document " << doc << ", chunk "
        << (o.chunk - first) << " of " << (end - first) << " in it, tokens " << (o.chunk - first) * db.chunk_size()
        << ".." << (o.chunk - first) * db.chunk_size() + static_cast<std::int64_t>(ids.size()) - 1 << " ("
        << rows.size() - ids.size() << " padding)\n"
        << "source: " << source_text(src) << "\n"
        << "text: " << terminal_text(j["text"].get<std::string>()) << "\n";
}

void inspect_doc(const ChunkDb& db, const InspectOptions& o, std::ostream& out) {
    check_id("--doc", o.doc, db.doc_count(), db.dir());
    auto tok = open_tokenizer(db, o, true);
    db.check_doc(o.doc);
    std::int64_t first = db.doc_first(o.doc), end = db.doc_end(o.doc);
    DocSource src = db.source(o.doc);
    json chunks = json::array();
    std::int64_t tokens = 0;
    std::vector<int> all;
    for (std::int64_t c = first; c < end; ++c) {
        std::vector<std::int32_t> rows;
        db.rows(c, c + 1, rows);
        std::vector<int> ids = non_pad(rows);
        check_row_ids(db, *tok, c, ids);
        tokens += static_cast<std::int64_t>(ids.size());
        all.insert(all.end(), ids.begin(), ids.end());
        chunks.push_back({{"chunk", c}, {"tokens", ids.size()}, {"text", tok->decode(ids)}});
    }
    json j = {{"doc", o.doc}, {"source", source_json(src)}, {"first_chunk", first}, {"chunk_count", end - first},
              {"tokens", tokens}, {"text", tok->decode(all)}, {"chunks", chunks}};
    if (o.json) {
        out << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
        return;
    }
    out << "document " << o.doc << " of " << db.doc_count() << ": chunks " << first << ".." << end - 1 << ", "
        << tokens << " tokens (bos and eos included)\nsource: " << source_text(src) << "\n";
    for (const auto& c : chunks)
        out << "[chunk " << c["chunk"].get<std::int64_t>() << "] " << terminal_text(c["text"].get<std::string>()) << "\n";
}

// min / median / mean / max of a list of counts.
json summary(std::vector<std::int64_t> v) {
    if (v.empty()) return {{"min", 0}, {"median", 0}, {"mean", 0.0}, {"max", 0}};
    double mean = static_cast<double>(std::accumulate(v.begin(), v.end(), std::int64_t(0))) / static_cast<double>(v.size());
    auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
    std::nth_element(v.begin(), mid, v.end());
    return {{"min", *std::min_element(v.begin(), v.end())}, {"median", *mid}, {"mean", mean},
            {"max", *std::max_element(v.begin(), v.end())}};
}

// The same summary from a histogram (hist[n] = how many items equal n).
json summary_hist(const std::vector<std::int64_t>& hist) {
    std::int64_t total = std::accumulate(hist.begin(), hist.end(), std::int64_t(0)), seen = 0, sum = 0;
    if (total == 0) return summary({});
    std::int64_t lo = -1, hi = 0, median = 0;
    for (std::size_t n = 0; n < hist.size(); ++n) {
        if (hist[n] == 0) continue;
        if (lo < 0) lo = static_cast<std::int64_t>(n);
        hi = static_cast<std::int64_t>(n);
        if (seen <= total / 2 && total / 2 < seen + hist[n]) median = static_cast<std::int64_t>(n);
        seen += hist[n];
        sum += hist[n] * static_cast<std::int64_t>(n);
    }
    return {{"min", lo}, {"median", median}, {"mean", static_cast<double>(sum) / static_cast<double>(total)}, {"max", hi}};
}

void inspect_stats(const ChunkDb& db, const InspectOptions& o, std::ostream& out) {
    db.check_arrays();   // the loop below reads every row anyway
    const int cs = db.chunk_size();
    std::vector<std::int64_t> per_chunk_hist(static_cast<std::size_t>(cs) + 1, 0), per_doc, chunks_per_doc;
    std::vector<std::int64_t> freq;
    std::int64_t tokens = 0;
    // the histogram is indexed by token id: one outside the vocabulary (a hand-made or edited chunks.npy) is named,
    // not allocated for (a negative id, or one near 2^31, asked for gigabytes)
    const std::int64_t vocab =
        db.manifest().value("parameters", nlohmann::json::object()).value("vocab_size", std::int64_t(0));
    const std::int64_t id_limit = vocab > 0 ? vocab : std::int64_t(1) << 24;
    for (std::int64_t d = 0; d < db.doc_count(); ++d) {
        std::int64_t doc_tokens = 0;
        for (std::int64_t c = db.doc_first(d); c < db.doc_end(d); ++c) {
            int n = 0;
            for (int k = 0; k < cs; ++k) {
                std::int32_t t = db.token(c, k);
                if (t == TOKEN_PAD) continue;
                ++n;
                if (t < 0 || t >= id_limit)
                    user_error_in((fs::path(db.dir()) / "chunks.npy").string(),
                                  cat("row ", c, " holds token id ", t, ", outside ",
                                      vocab > 0 ? cat("the vocabulary [0, ", vocab, ")") : cat("[0, ", id_limit, ")")),
                                  "rebuild the database with retro-chunk");
                if (static_cast<std::size_t>(t) >= freq.size()) freq.resize(static_cast<std::size_t>(t) + 1, 0);
                freq[static_cast<std::size_t>(t)]++;
            }
            per_chunk_hist[static_cast<std::size_t>(n)]++;
            doc_tokens += n;
        }
        tokens += doc_tokens;
        per_doc.push_back(doc_tokens);
        chunks_per_doc.push_back(db.doc_end(d) - db.doc_first(d));
    }
    auto tok = open_tokenizer(db, o, false);
    std::vector<int> order(freq.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return freq[a] > freq[b]; });
    json top = json::array();
    for (std::size_t i = 0; i < std::min<std::size_t>(10, order.size()) && freq[order[i]] > 0; ++i) {
        json t = {{"id", order[i]}, {"count", freq[order[i]]}};
        if (tok) t["piece"] = tok->piece(order[i]);
        top.push_back(t);
    }
    double slots = static_cast<double>(db.chunk_count()) * cs;
    json j = {{"documents", db.doc_count()},
              {"chunks", db.chunk_count()},
              {"sequences", db.seq_count()},
              {"tokens", tokens},
              {"chunk_size", cs},
              {"token_dtype", dtype_name(db.token_dtype())},
              {"padding_fraction", slots > 0 ? 1.0 - static_cast<double>(tokens) / slots : 0.0},
              {"full_chunks", per_chunk_hist[static_cast<std::size_t>(cs)]},
              {"tokens_per_chunk", summary_hist(per_chunk_hist)},
              {"tokens_per_doc", summary(per_doc)},
              {"chunks_per_doc", summary(chunks_per_doc)},
              {"distinct_tokens", std::count_if(freq.begin(), freq.end(), [](std::int64_t f) { return f > 0; })},
              {"top_tokens", top}};
    const json params = db.manifest().value("parameters", json::object());
    const int shard_count = params.is_object() ? params.value("shard_count", 1) : 1;
    if (shard_count > 1) j["shard"] = cat(params.value("shard_index", 0), "/", shard_count);   // (not a whole database)
    if (o.json) {
        out << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
        return;
    }
    auto line = [&](const char* name, const json& s) {
        out << name << ": min " << s["min"] << ", median " << s["median"] << ", mean " << s["mean"].get<double>()
            << ", max " << s["max"] << "\n";
    };
    out << db.dir() << ": " << j["documents"] << " documents, " << j["chunks"] << " chunks of " << cs << " ("
        << j["token_dtype"].get<std::string>() << "), " << j["sequences"] << " sequences, " << tokens << " tokens"
        << (shard_count > 1 ? " (shard " + j["shard"].get<std::string>() + " of a sharded run: join with retro-chunk merge)" : "")
        << "\n"
        << "padding fraction: " << j["padding_fraction"].get<double>() << " (" << j["full_chunks"] << " full chunks)\n";
    line("tokens per chunk", j["tokens_per_chunk"]);
    line("tokens per document", j["tokens_per_doc"]);
    line("chunks per document", j["chunks_per_doc"]);
    out << "distinct tokens: " << j["distinct_tokens"] << "; most frequent:";
    for (const auto& t : top)
        out << " " << t["id"] << (t.contains("piece") ? "'" + terminal_text(t["piece"].get<std::string>()) + "'" : "") << "×"
            << t["count"];
    out << "\n";
}

}  // namespace

void chunk_inspect(const InspectOptions& o, std::ostream& out) {
    ChunkDb db(o.db, /*shard_ok=*/true);
    if (o.chunk >= 0 || (o.chunk < -1)) return inspect_chunk(db, o, out);
    if (o.doc >= 0 || (o.doc < -1)) return inspect_doc(db, o, out);
    inspect_stats(db, o, out);
}

}  // namespace retro
